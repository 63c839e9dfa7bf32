#!/usr/bin/env python3
"""The collection as users get it: build the artifact, install it, and run its playbooks from outside the checkout.

    collection_check.py [--python PY] [--tarball FILE] --work DIR

1. `ansible-galaxy collection build` of the checkout (unless --tarball names an artifact already built);
2. `ansible-galaxy collection install --no-deps` of that tarball into DIR/collections (Galaxy is not reachable
   here; community.general, the one dependency, is only needed for image mode);
3. from DIR (outside the checkout, no ansible.cfg, ANSIBLE_COLLECTIONS_PATH = DIR/collections alone): every
   playbook of the installed collection with --syntax-check (`ansible-playbook gpufleet.gdrcopy.<name>`);
4. as root: `gpufleet.gdrcopy.status` against localhost (must pass and write the report) and
   `gpufleet.gdrcopy.preflight` against localhost with the fixture source (must reach one of its own stops on a
   controller without a GPU, or pass);
a missing plugin, lookup, filter or test anywhere fails the check. PY is the Python of the ansible-core under test
(default: this one); tests/harness/matrix.py runs this once per ansible-core version.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FQCN = "gpufleet.gdrcopy"
# Messages Ansible gives for content it cannot find, in the versions of the matrix.
MISSING = re.compile(r"(plugin|lookup|filter|test|module|action|collection|role)[^\n]{0,80}(was not found|could not be"
                     r" found|not found in|couldn't resolve|unable to find|No filter named|no test named"
                     r"|could not find)", re.I)
# Preflight's own stops on a controller without a GPU (the first that applies; docs/STATUS-REPORT.md).
PREFLIGHT_STOPS = re.compile(r"no NVIDIA driver|NVIDIA kernel source|module loading is disabled|has no loadable"
                             r" module support|is not supported: gdrcopy-ansible has package tables|gdrdrv cannot be built")


def run(cmd, cwd, env, timeout=900):
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def recap(out):
    lines = [ln.strip() for ln in out.splitlines() if re.match(r"\S+\s+: ok=\d+", ln.strip())]
    return "; ".join(lines) or "(no recap)"


def fail(what, out):
    sys.exit("collection_check: %s\n%s" % (what, out[-6000:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="the Python of the ansible-core to test")
    ap.add_argument("--tarball", type=Path, help="an artifact built already")
    ap.add_argument("--work", type=Path, required=True)
    args = ap.parse_args()
    bindir = Path(args.python).parent
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    (work / "ansible.cfg").write_text("[defaults]\n")  # no setting of the checkout's reaches the runs
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MOLECULE_"))}
    env.update(ANSIBLE_CONFIG=str(work / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(work / "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_LOCAL_TEMP=str(work / "tmp"),
               ANSIBLE_HOME=str(work / "ansible-home"), ANSIBLE_DEPRECATION_WARNINGS="0")
    core = subprocess.run([args.python, "-c", "import ansible.release as r; print(r.__version__)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    print("collection_check: ansible-core %s on %s" % (core, args.python))

    tarball = args.tarball
    if tarball is None:
        rc, out = run([bindir / "ansible-galaxy", "collection", "build", REPO, "--output-path", work / "dist",
                       "--force"], work, env)
        if rc:
            fail("ansible-galaxy collection build failed", out)
        tarball = next((work / "dist").glob("gpufleet-gdrcopy-*.tar.gz"))
    rc, out = run([bindir / "ansible-galaxy", "collection", "install", "--no-deps", "--force", "-p",
                   work / "collections", tarball.resolve()], work, env)
    if rc:
        fail("ansible-galaxy collection install failed", out)
    installed = work / "collections" / "ansible_collections" / "gpufleet" / "gdrcopy"
    print("  installed %s" % tarball.name)

    for playbook in sorted((installed / "playbooks").glob("*.yml")):
        rc, out = run([bindir / "ansible-playbook", "-i", "localhost,", "%s.%s" % (FQCN, playbook.stem),
                       "--syntax-check"], work, env)
        if rc or MISSING.search(out):
            fail("%s.%s --syntax-check failed" % (FQCN, playbook.stem), out)
    print("  --syntax-check passed: %s" % ", ".join(p.stem for p in sorted((installed / "playbooks").glob("*.yml"))))

    if os.geteuid() != 0:
        print("  status and preflight against localhost left out: they need root (become)")
        return
    local = ["-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % args.python,
             "-e", "gdrcopy_hosts=localhost"]  # an inventory of one ungrouped host: name it (the default is gpu_nodes)
    rc, out = run([bindir / "ansible-playbook", *local, "%s.status" % FQCN, "-e",
                   "gdrcopy_report_dir=%s" % (work / "reports")], work, env)
    if rc or MISSING.search(out) or not (work / "reports" / "gdrcopy-report.json").is_file():
        fail("%s.status against localhost failed (rc %d)" % (FQCN, rc), out)
    print("  status against localhost: %s" % recap(out))

    subprocess.run([args.python, REPO / "tests" / "harness" / "pack_source.py", "--out", work / "source"],
                   check=True, capture_output=True)
    src = json.loads((work / "source" / "source.json").read_text())
    source = ["-e", json.dumps({"gdrcopy_version": src["version"], "gdrcopy_source_url": src["url"],
                                "gdrcopy_source_sha256": src["sha256"], "gdrcopy_cache_dir": str(work / "cache")})]
    rc, out = run([bindir / "ansible-playbook", *local, "%s.preflight" % FQCN, *source], work, env)
    failure = out[out.find("fatal: "):] if "fatal: " in out else ""  # the stop's message, not a task's name
    if MISSING.search(out) or (rc and not PREFLIGHT_STOPS.search(failure)):
        fail("%s.preflight against localhost did not reach one of its own stops (rc %d)" % (FQCN, rc), out)
    stop = PREFLIGHT_STOPS.search(failure)
    print("  preflight against localhost: %s; %s" % (recap(out), "stopped: " + stop.group(0) if rc else "passed"))


if __name__ == "__main__":
    main()
