#!/usr/bin/env python3
"""The ansible-core version matrix: the unit tests and the installed collection on every tested ansible-core minor.

    matrix.py [--only CORE] [--jobs N] [--quick]

For each row of MATRIX (meta/runtime.yml's requires_ansible covers exactly these minors) and each Python that
ansible-core minor supports on the controller and this machine has: a virtual environment under .cache/matrix with
that ansible-core and pytest alone (no other collection), then `pytest tests/unit -m "not slow"` with it, then
tests/harness/collection_check.py (the built artifact installed into an empty collections path, every playbook
--syntax-check, status.yml and preflight against localhost). The VM scenarios use the pinned ansible-core of
requirements.txt. Prints one line per row and a table at the end; exits 1 when a row fails, or, under CI, when an
interpreter of the matrix is missing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "matrix"
# ansible-core release -> the controller Pythons it supports (its setup metadata and porting guide); the newest
# minor on PyPI when this was written is 2.21. Python 3.14 (2.20, 2.21) is left out: no interpreter for it here.
MATRIX = {
    "2.17.14": ("3.10", "3.11", "3.12"),
    "2.18.19": ("3.11", "3.12", "3.13"),
    "2.19.14": ("3.11", "3.12", "3.13"),
    "2.20.10": ("3.12", "3.13"),
    "2.21.5": ("3.12", "3.13"),
}
# `--quick` (make test): one row per ansible-core minor, chosen so that every Python of MATRIX runs once; not the
# pinned 2.19.14 of requirements.txt, whose unit tests and artifact checks make unit and make collection run just
# before (4 rows: two rounds of 2 jobs instead of three).
QUICK = {"2.17.14": "3.10", "2.18.19": "3.11", "2.20.10": "3.12", "2.21.5": "3.13"}
PYTEST = "pytest==9.2.0"


def interpreter(version):
    """A working interpreter of that X.Y: pyenv's, else pythonX.Y on PATH (a pyenv shim of a version that is not
    selected fails to run, so each candidate is tried)."""
    cands = []
    for root in (Path.home() / ".pyenv" / "versions", Path("/root/.pyenv/versions")):
        cands += [str(c / "bin" / "python3") for c in sorted(root.glob(version + ".*"))] if root.is_dir() else []
    cands += [p for p in [shutil.which("python" + version)] if p]
    for cand in cands:
        ok = subprocess.run([cand, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
                            capture_output=True, text=True)
        if ok.returncode == 0 and ok.stdout.strip() == version:
            return cand
    return None


def venv(core, py, python):
    """A virtual environment with ansible-core==core and pytest, made once per (core, py)."""
    d = CACHE / ("core%s-py%s" % (core, py))
    stamp = d / ".installed"
    if not stamp.exists():
        shutil.rmtree(d, ignore_errors=True)
        subprocess.run([python, "-m", "venv", d], check=True)
        subprocess.run([d / "bin" / "pip", "install", "-q", "--disable-pip-version-check",
                        "ansible-core==" + core, PYTEST], check=True, capture_output=True)
        stamp.touch()
    return d / "bin" / "python"


def row(core, py, tarball):
    start = time.time()
    python = interpreter(py)
    if python is None:
        return core, py, "missing", 0.0, "no python%s on this machine" % py
    try:
        vpy = venv(core, py, python)
    except subprocess.CalledProcessError as err:
        return core, py, "FAILED", time.time() - start, "venv: %s" % (err.stderr or err)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["PATH"] = "%s:%s" % (vpy.parent, env.get("PATH", ""))
    unit = subprocess.run([vpy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                           "--basetemp", CACHE / "tmp" / ("%s-%s" % (core, py)), str(REPO / "tests" / "unit")],
                          cwd=REPO, env=env, capture_output=True, text=True)
    last = (unit.stdout.strip().splitlines() or [""])[-1]
    if unit.returncode:
        return core, py, "FAILED", time.time() - start, "unit: " + unit.stdout[-3000:] + unit.stderr[-2000:]
    check = subprocess.run([vpy, REPO / "tests" / "harness" / "collection_check.py", "--python", vpy, "--tarball",
                            tarball, "--work", CACHE / "work" / ("%s-%s" % (core, py))],
                           cwd=REPO, env=env, capture_output=True, text=True)
    if check.returncode:
        return core, py, "FAILED", time.time() - start, "collection: " + (check.stdout + check.stderr)[-4000:]
    return core, py, "passed", time.time() - start, "unit: %s | %s" % (last, " | ".join(
        ln.strip() for ln in check.stdout.splitlines()[2:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="one ansible-core version of the matrix")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="one Python per ansible-core minor (QUICK)")
    args = ap.parse_args()
    (CACHE / "tmp").mkdir(parents=True, exist_ok=True)  # pytest makes --basetemp, not its parent
    dist = CACHE / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    subprocess.run([Path(sys.executable).parent / "ansible-galaxy", "collection", "build", REPO, "--output-path",
                    dist, "--force"], check=True, capture_output=True)
    tarball = next(dist.glob("*.tar.gz"))
    rows = [(c, p) for c, pys in MATRIX.items() if not args.only or c == args.only for p in pys
            if not args.quick or QUICK.get(c) == p]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda cp: row(cp[0], cp[1], tarball), rows))
    bad = 0
    print("--- ansible-core matrix (%s) ---" % tarball.name)
    for core, py, verdict, secs, detail in results:
        missing_fails = verdict == "missing" and os.environ.get("CI") == "true"
        bad += verdict == "FAILED" or missing_fails
        print("%-8s python%-5s %-7s %5.0fs  %s" % (core, py, verdict, secs, detail.replace("\n", " ")[:900]
                                                  if verdict != "FAILED" else ""))
        if verdict == "FAILED":
            print(detail)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
