#!/usr/bin/env python3
"""Hand the roles a gdrcopy source tarball the way a user with an internal mirror would.

    pack_source.py --out DIR [--version X.Y[.Z]] [--defect compile|version]

Packs tests/fixtures/gdrcopy-src into DIR/gdrcopy-<version>.tar.gz (top folder gdrcopy-<version>/, like
upstream's release tarballs; byte-for-byte reproducible), or, when GDRCOPY_SOURCE_TARBALL names a real
release tarball, takes that file as it is. --version packs the fixture (always, GDRCOPY_SOURCE_TARBALL or not) as
another release, whose library and gdrdrv report that MAJOR.MINOR (the release-change tests); --defect packs a
release that does not work: `compile` (gdrdrv does not build) or `version` (it builds and loads but reports the
fixture's own version, so its smoke check fails). Writes DIR/source.json with the version, a file:// URL and the
sha256: the values the test inventory passes as gdrcopy_version, gdrcopy_source_url and gdrcopy_source_sha256.
Standard library only.
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import hashlib
import io
import json
import os
import re
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "gdrcopy-src"
MTIME = 1767225600  # 2026-01-01T00:00:00Z: a fixed date keeps the tarball reproducible


def fixture_version(tree: Path) -> str:
    header = (tree / "include" / "gdrapi.h").read_text()
    major = re.search(r"#define\s+GDR_API_MAJOR_VERSION\s+(\d+)", header)
    minor = re.search(r"#define\s+GDR_API_MINOR_VERSION\s+(\d+)", header)
    if not (major and minor):
        sys.exit(f"{tree}/include/gdrapi.h has no GDR_API_MAJOR_VERSION/GDR_API_MINOR_VERSION")
    return f"{major.group(1)}.{minor.group(1)}"


def ignored(tree: Path) -> list[str]:
    """Build outputs to leave out, from the fixture's own .gitignore (simple name globs)."""
    gi = tree / ".gitignore"
    lines = gi.read_text().splitlines() if gi.exists() else []
    return [ln.strip().rstrip("/") for ln in lines if ln.strip() and not ln.startswith(("#", "!"))]


# What --version and --defect change in the packed copy: {path in the tree: [(pattern, replacement)]}.
def edits(version: str, defect: str | None) -> dict[str, list[tuple[str, str]]]:
    major, minor = version.split(".")[:2]
    out: dict[str, list[tuple[str, str]]] = {}
    if defect != "version":
        out["include/gdrapi.h"] = [(r"(#define\s+GDR_API_MAJOR_VERSION\s+)\d+", rf"\g<1>{major}"),
                                   (r"(#define\s+GDR_API_MINOR_VERSION\s+)\d+", rf"\g<1>{minor}")]
        out["src/gdrdrv/gdrdrv.h"] = [(r"(#define\s+GDRDRV_MAJOR_VERSION\s+)\d+", rf"\g<1>{major}"),
                                      (r"(#define\s+GDRDRV_MINOR_VERSION\s+)\d+", rf"\g<1>{minor}")]
    if defect == "compile":
        out["src/gdrdrv/gdrdrv.c"] = [(r"\A", "#error this release of the test fixture does not compile\n")]
    return out


def edited(data: bytes, rules: list[tuple[str, str]], rel: str) -> bytes:
    text = data.decode()
    for pattern, replacement in rules:
        text, n = re.subn(pattern, replacement, text, count=1)
        if n != 1:
            sys.exit(f"{rel}: no match for {pattern}")
    return text.encode()


def pack(tree: Path, version: str, dest: Path, changes: dict[str, list[tuple[str, str]]] | None = None) -> None:
    changes = changes or {}
    skip = ignored(tree)
    top = f"gdrcopy-{version}"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted([tree, *tree.rglob("*")]):
            rel = path.relative_to(tree)
            if any(fnmatch.fnmatch(part, pat) for part in rel.parts for pat in skip):
                continue
            info = tar.gettarinfo(str(path), arcname=str(Path(top) / rel) if rel.parts else top)
            info.mtime, info.uid, info.gid, info.uname, info.gname = MTIME, 0, 0, "root", "root"
            info.mode = 0o755 if (path.is_dir() or os.access(path, os.X_OK)) else 0o644
            if path.is_file():
                data = path.read_bytes()
                if str(rel) in changes:
                    data = edited(data, changes[str(rel)], str(rel))
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    tmp = dest.with_suffix(".tmp")
    with open(tmp, "wb") as out, gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    tmp.replace(dest)


def release_version(tarball: Path) -> str:
    with tarfile.open(tarball) as tar:
        first = tar.next()
    m = re.match(r"gdrcopy-(\d+\.\d+(?:\.\d+)?)(?:/|$)", first.name if first else "")
    if not m:
        sys.exit(f"{tarball}: top folder is not gdrcopy-<version>/ as in upstream's release tarballs")
    return m.group(1)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--version", help="pack the fixture as this release (X.Y or X.Y.Z)")
    p.add_argument("--defect", choices=["compile", "version"], help="pack a release that does not work")
    a = p.parse_args(argv)
    if a.version and not re.match(r"^\d+\.\d+(\.\d+)?\Z", a.version):
        sys.exit(f"--version {a.version}: not X.Y or X.Y.Z")
    a.out = a.out.resolve()
    a.out.mkdir(parents=True, exist_ok=True)
    given = os.environ.get("GDRCOPY_SOURCE_TARBALL")
    if given and not (a.version or a.defect):
        tarball = Path(given).resolve()
        if not tarball.is_file():
            sys.exit(f"GDRCOPY_SOURCE_TARBALL={given}: no such file")
        kind, version = "release", release_version(tarball)
    else:
        kind, version = "fixture", a.version or fixture_version(FIXTURE)
        tarball = a.out / f"gdrcopy-{version}.tar.gz"
        pack(FIXTURE, version, tarball, edits(version, a.defect) if (a.version or a.defect) else None)
    info = {"kind": kind, "version": version, "url": tarball.as_uri(), "sha256": sha256(tarball)}
    (a.out / "source.json").write_text(json.dumps(info, indent=2) + "\n")
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
