#!/usr/bin/env python3
"""Unpack the collections the tests need into .cache/collections/ansible_collections, without Galaxy.

Galaxy cannot be reached from the test machines; the collections come from the `ansible` package on PyPI, which
bundles them. Only the wheel is downloaded (pip download --no-deps), and only the pinned collections are taken out of
it: those of collections/requirements.yml (what users install: community.general for image mode) and of
tests/requirements.yml (test-only: ansible.posix). Each unpacked collection's MANIFEST.json must carry the pinned
version, so a bundle that moved on fails here, not in a scenario. Nothing else of the bundle is installed: the
controller keeps plain ansible-core, as a user's has.

Usage: unpack_collections.py [--dest DIR]   (idempotent: a collection already there at its pin is left alone)
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
REQUIREMENTS = (REPO / "collections" / "requirements.yml", REPO / "tests" / "requirements.yml")
# The ansible bundle whose wheel carries the pinned versions (ansible 12.3.0: community.general 11.4.2,
# ansible.posix 2.1.0).
BUNDLE = "ansible==12.3.0"


def pins():
    """{'community.general': '11.4.2', ...} from the requirement files."""
    out = {}
    for path in REQUIREMENTS:
        for item in yaml.safe_load(path.read_text())["collections"]:
            out[item["name"]] = str(item["version"])
    return out


def installed_version(dest, name):
    manifest = dest / "ansible_collections" / Path(*name.split(".")) / "MANIFEST.json"
    if not manifest.is_file():
        return None
    return json.loads(manifest.read_text())["collection_info"]["version"]


def unpack(wheel, dest, wanted):
    """Extract ansible_collections/<ns>/<name>/ of each wanted collection from the wheel into dest."""
    with zipfile.ZipFile(wheel) as z:
        for name, version in wanted.items():
            prefix = "ansible_collections/%s/" % name.replace(".", "/")
            members = [m for m in z.namelist() if m.startswith(prefix)]
            if not members:
                sys.exit("%s has no %s" % (wheel.name, name))
            target = dest / prefix
            tmp = dest / (prefix.rstrip("/") + ".new")
            shutil.rmtree(tmp, ignore_errors=True)
            with tempfile.TemporaryDirectory(dir=dest) as scratch:
                z.extractall(scratch, members)
                Path(tmp).parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(Path(scratch) / prefix), str(tmp))
            got = json.loads((tmp / "MANIFEST.json").read_text())["collection_info"]["version"]
            if got != version:
                shutil.rmtree(tmp)
                sys.exit("%s carries %s %s, but the requirements pin %s: change BUNDLE in %s or the pin"
                         % (BUNDLE, name, got, version, Path(__file__).relative_to(REPO)))
            shutil.rmtree(target, ignore_errors=True)
            tmp.rename(target)
            print("unpacked %s %s into %s" % (name, version, dest))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=REPO / ".cache" / "collections")
    args = parser.parse_args()
    wanted = {n: v for n, v in pins().items() if installed_version(args.dest, n) != v}
    if not wanted:
        return
    args.dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                        "--only-binary", ":all:", "-d", wheels, BUNDLE], check=True)
        unpack(next(Path(wheels).glob("ansible-*.whl")), args.dest, wanted)


if __name__ == "__main__":
    main()
