"""Fault 8, proven at every step: gdrcopy-build and gdrcopy-install are killed (SIGKILL of their whole process group,
as a lost SSH session or an OOM kill does) after each of their shell commands in turn, and after every kill:

- what worked before is still there and whole: the previous build or install, or the new one, never a half of
  either (a helper that fails right after the kill must leave a working one in place);
- the next normal run finishes the job and leaves no staging directory behind.

The helpers are the role's own files; the kill comes from a DEBUG trap loaded through BASH_ENV, which counts the
commands the helper runs (functions and command substitutions included) and kills at the Nth."""

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FILES = REPO / "roles" / "gdrcopy" / "files"
MAX_STEPS = 400

KILLER = r"""
set -T
__gdrcopy_steps=0
trap '__gdrcopy_steps=$((__gdrcopy_steps + 1)); if [ "$__gdrcopy_steps" -ge "$GDRCOPY_KILL_AT" ]; then kill -9 -- -$$; fi' DEBUG
"""


def run(argv, kill_at, tmp_path):
    """Run a helper; kill_at 0 runs it plainly. Returns (killed, CompletedProcess)."""
    env = dict(os.environ)
    if kill_at:
        killer = tmp_path / "killer.sh"
        killer.write_text(KILLER)
        env.update(BASH_ENV=str(killer), GDRCOPY_KILL_AT=str(kill_at))
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, start_new_session=True)
    return r.returncode == -9, r


def every_kill(argv, tmp_path, check, reset):
    """Kill argv at step 1, 2, ... until it finishes unkilled; check() after every kill. Returns the step count."""
    for n in range(1, MAX_STEPS):
        reset()
        killed, r = run(argv, n, tmp_path)
        if not killed:
            assert r.returncode == 0, r.stderr
            return n - 1
        check(n)
    raise AssertionError("the helper was still running after %d steps" % MAX_STEPS)


def tree(top: Path):
    return dict((str(p.relative_to(top)), p.read_bytes() if p.is_file() and not p.is_symlink() else os.readlink(p)
                 if p.is_symlink() else None) for p in sorted(top.rglob("*")))


# --- gdrcopy-build ---------------------------------------------------------------------------------------------

def tarball(tmp_path, body):
    src = tmp_path / ("tree-" + hashlib.sha256(body.encode()).hexdigest()[:8]) / "gdrcopy-2.6"
    src.mkdir(parents=True)
    (src / "Makefile").write_text("driver:\n\tmkdir -p src/gdrdrv && echo '%s' > src/gdrdrv/gdrdrv.ko\n" % body)
    path = src.parent / "gdrcopy-2.6.tar.gz"
    with tarfile.open(path, "w:gz") as t:
        t.add(src, arcname="gdrcopy-2.6")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def build_argv(tar, sha, out, stamp):
    return [str(FILES / "gdrcopy-build"), "--tarball", str(tar), "--sha256", sha, "--dir", str(out),
            "--stamp", json.dumps(stamp), "--artifact", "src/gdrdrv/gdrdrv.ko", "--", "make", "driver"]


@pytest.mark.fault(8)
def test_gdrcopy_build_killed_at_every_step_keeps_a_whole_build_and_the_rerun_finishes(tmp_path):
    out = tmp_path / "build" / "driver" / "k1"
    old_tar, old_sha = tarball(tmp_path, "old module")
    new_tar, new_sha = tarball(tmp_path, "new module")
    assert run(build_argv(old_tar, old_sha, out, {"v": 1}), 0, tmp_path)[1].returncode == 0
    previous = tree(out)

    def reset():
        for leftover in (out, Path(str(out) + ".new"), Path(str(out) + ".old")):
            shutil.rmtree(leftover, ignore_errors=True)
        assert run(build_argv(old_tar, old_sha, out, {"v": 1}), 0, tmp_path)[1].returncode == 0

    def check(n):
        # right after the kill: the old build, the new one, or the old one moved aside (the next run restores it)
        seen = out if out.exists() else Path(str(out) + ".old")
        stamp = json.loads((seen / ".gdrcopy-stamp.json").read_text())
        assert (stamp, (seen / "gdrdrv.ko").read_text()) in (({"v": 1}, "old module\n"), ({"v": 2}, "new module\n")), n
        assert stamp == {"v": 2} or tree(seen) == previous, n
        # a failing build now must leave a whole build in place, then the good one finishes
        bad = build_argv(new_tar, "0" * 64, out, {"v": 3})
        assert run(bad, 0, tmp_path)[1].returncode == 1, n
        assert (out / ".gdrcopy-stamp.json").is_file() and (out / "gdrdrv.ko").is_file(), n
        r = run(build_argv(new_tar, new_sha, out, {"v": 2}), 0, tmp_path)[1]
        assert r.returncode == 0, (n, r.stderr)
        assert json.loads((out / ".gdrcopy-stamp.json").read_text()) == {"v": 2}, n
        assert (out / "gdrdrv.ko").read_text() == "new module\n", n
        assert not Path(str(out) + ".new").exists() and not Path(str(out) + ".old").exists(), n

    steps = every_kill(build_argv(new_tar, new_sha, out, {"v": 2}), tmp_path, check, reset)
    assert steps >= 15, steps  # the trap saw the helper's commands (a broken trap would kill nothing)


# --- gdrcopy-install -------------------------------------------------------------------------------------------

def install_argv(build, dest, stamp, target="lib_install"):
    return [str(FILES / "gdrcopy-install"), "--build", str(build), "--dest", str(dest), "--stamp", json.dumps(stamp),
            "--", "make", "-s", target]


@pytest.mark.fault(8)
def test_gdrcopy_install_killed_at_every_step_keeps_a_whole_library_and_the_rerun_finishes(tmp_path, built_lib):
    prefix = tmp_path / "opt" / "gdrcopy"
    dest = prefix / "2.6"

    def reset():
        shutil.rmtree(prefix, ignore_errors=True)
        assert run(install_argv(built_lib, dest, {"v": 1}), 0, tmp_path)[1].returncode == 0

    reset()
    previous = tree(dest)
    lib = next(p for p in previous if p.startswith("lib/libgdrapi.so.") and p.count(".") >= 3)

    def check(n):
        seen = dest if dest.exists() else prefix / ".2.6.old"
        stamp = json.loads((seen / ".gdrcopy-install.json").read_text())
        assert stamp in ({"v": 1}, {"v": 2}) and (seen / lib).read_bytes() == previous[lib], n
        # Before: killed between the two renames, then a failed rerun, there was no library at all while the
        # message said "untouched". A failing install must leave a whole one where it belongs.
        r = run(install_argv(built_lib, dest, {"v": 3}, target="no-such-target"), 0, tmp_path)[1]
        assert r.returncode == 1 and "untouched" in r.stderr, n
        assert (dest / lib).read_bytes() == previous[lib], n
        assert json.loads((dest / ".gdrcopy-install.json").read_text()) in ({"v": 1}, {"v": 2}), n
        r = run(install_argv(built_lib, dest, {"v": 2}), 0, tmp_path)[1]
        assert r.returncode == 0, (n, r.stderr)
        assert json.loads((dest / ".gdrcopy-install.json").read_text()) == {"v": 2}, n
        assert sorted(p.name for p in prefix.iterdir()) == ["2.6"], n

    steps = every_kill(install_argv(built_lib, dest, {"v": 2}), tmp_path, check, reset)
    assert steps >= 20, steps
