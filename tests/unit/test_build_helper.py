"""roles/gdrcopy/files/gdrcopy-build: all-or-nothing builds with stamps, run for real on small tarballs."""

import hashlib
import os
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

HELPER = Path(__file__).resolve().parents[2] / "roles" / "gdrcopy" / "files" / "gdrcopy-build"


def tarball(tmp_path, makefile: str, name="gdrcopy-2.6") -> Path:
    tree = tmp_path / "tree" / name
    tree.mkdir(parents=True)
    (tree / "Makefile").write_text(makefile)
    path = tmp_path / f"{name}.tar.gz"
    with tarfile.open(path, "w:gz") as t:
        t.add(tree, arcname=name)
    return path


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def build(tar, out, stamp, *cmd, artifact=None, log=None, pin=None):
    argv = [str(HELPER), "--tarball", str(tar), "--sha256", pin or sha256(tar), "--dir", str(out),
            "--stamp", json.dumps(stamp)]
    if artifact:
        argv += ["--artifact", artifact]
    if log:
        argv += ["--log", str(log)]
    return subprocess.run(argv + ["--", *cmd], capture_output=True, text=True, timeout=60)


GOOD = "driver:\n\tmkdir -p src/gdrdrv && echo module > src/gdrdrv/gdrdrv.ko\n"
BAD = "driver:\n\techo half > src.partial && exit 3\n"


def test_a_build_lands_whole_with_its_stamp_artifact_and_log_line(tmp_path):
    out, log = tmp_path / "build" / "driver" / "k1", tmp_path / "builds.log"
    r = build(tarball(tmp_path, GOOD), out, {"kernel": "k1"}, "make", "driver", artifact="src/gdrdrv/gdrdrv.ko", log=log)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"built {out} in ")
    assert json.loads((out / ".gdrcopy-stamp.json").read_text()) == {"kernel": "k1"}
    assert (out / "gdrdrv.ko").read_text() == "module\n"
    assert (out / "Makefile").exists(), "the tarball's top folder is dropped"
    assert len(log.read_text().splitlines()) == 1
    assert not Path(str(out) + ".new").exists()


@pytest.mark.fault(8)
def test_a_failed_build_leaves_the_previous_build_untouched(tmp_path):
    out = tmp_path / "build"
    assert build(tarball(tmp_path, GOOD), out, {"v": 1}, "make", "driver").returncode == 0
    before = sorted(p.name for p in out.iterdir())
    r = build(tarball(tmp_path / "b", BAD), out, {"v": 2}, "make", "driver")
    assert r.returncode == 1
    assert "failed in" in r.stderr
    assert sorted(p.name for p in out.iterdir()) == before
    assert json.loads((out / ".gdrcopy-stamp.json").read_text()) == {"v": 1}


@pytest.mark.fault(8)
def test_leftovers_of_a_killed_build_are_cleared_by_the_next(tmp_path):
    out = tmp_path / "build"
    stale = Path(str(out) + ".new")
    stale.mkdir(parents=True)
    (stale / "half-written.o").write_text("x")
    assert build(tarball(tmp_path, GOOD), out, {"v": 1}, "make", "driver").returncode == 0
    assert not stale.exists()
    assert not (out / "half-written.o").exists()


@pytest.mark.parametrize("args", [[], ["--tarball", "x"], ["--bogus", "1"]])
def test_bad_arguments_are_refused(args):
    r = subprocess.run([str(HELPER), *args], capture_output=True, text=True)
    assert r.returncode == 2


def from_built(built_tar, out, stamp, log=None, pin=None, source=None):
    """gdrcopy-build --from: source is the taking node's own copy of the pinned tarball (default: the one the
    builder built from, tarball(tmp_path, ...) beside built_tar)."""
    source = source or next(Path(built_tar).parent.glob("gdrcopy-2.6.tar.gz"))
    argv = [str(HELPER), "--from", str(built_tar), "--from-sha256", pin or sha256(built_tar), "--tarball", str(source),
            "--sha256", sha256(source), "--dir", str(out), "--stamp", json.dumps(stamp)]
    if log:
        argv += ["--log", str(log)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def pack(directory, tar_path):
    subprocess.run(["tar", "-czf", str(tar_path), "-C", str(directory), "."], check=True)
    return tar_path


def test_a_build_from_another_host_is_unpacked_whole_without_compiling(tmp_path):
    """Fleet builds: one host compiles, the others take its build dir (packed on the controller)."""
    builder, log = tmp_path / "builder" / "k1", tmp_path / "builds.log"
    stamp = {"component": "driver", "kernel": "k1"}
    assert build(tarball(tmp_path, GOOD), builder, stamp, "make", "driver", artifact="src/gdrdrv/gdrdrv.ko",
                 log=log).returncode == 0
    other = tmp_path / "other" / "k1"
    r = from_built(pack(builder, tmp_path / "k1.tar.gz"), other, stamp, log=log)
    assert r.returncode == 0, r.stderr
    assert (other / "gdrdrv.ko").read_bytes() == (builder / "gdrdrv.ko").read_bytes()
    assert json.loads((other / ".gdrcopy-stamp.json").read_text()) == stamp
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and " built " in lines[0] and f" unpacked {other} from " in lines[1]


def test_a_build_of_other_inputs_is_refused_and_the_old_one_stays(tmp_path):
    builder = tmp_path / "builder" / "k1"
    assert build(tarball(tmp_path, GOOD), builder, {"kernel": "k1"}, "make", "driver",
                 artifact="src/gdrdrv/gdrdrv.ko").returncode == 0
    other = tmp_path / "other" / "k2"
    other.mkdir(parents=True)
    (other / "gdrdrv.ko").write_text("previous")
    r = from_built(pack(builder, tmp_path / "k1.tar.gz"), other, {"kernel": "k2"})
    assert r.returncode != 0 and "made from other inputs" in r.stderr
    assert (other / "gdrdrv.ko").read_text() == "previous"
    assert not Path(str(other) + ".new").exists()


@pytest.mark.fault(18)
def test_a_tarball_that_is_not_the_pin_is_never_unpacked(tmp_path):
    """Before: the node built whatever tarball sat under its name; the second host of a play that pinned another
    release got the first host's. Now the copy on the node is checked against the host's own pin."""
    out = tmp_path / "build" / "driver" / "k1"
    tar = tarball(tmp_path, GOOD)
    assert build(tar, out, {"kernel": "k1"}, "make", "driver").returncode == 0
    before = (out / ".gdrcopy-stamp.json").read_text()
    r = build(tar, out, {"kernel": "k2"}, "make", "driver", pin="0" * 64)
    assert r.returncode == 1 and "not the pinned " + "0" * 64 in r.stderr, r.stderr
    assert (out / ".gdrcopy-stamp.json").read_text() == before and not (tmp_path / "build" / "driver" / "k1.new").exists()


@pytest.mark.fault(19)
def test_a_build_from_another_host_is_used_only_with_the_checksum_the_controller_recorded(tmp_path):
    """Before: a taking host unpacked whatever tarball came from the controller, on the strength of its stamp."""
    builder = tmp_path / "builder" / "k1"
    stamp = {"component": "driver", "kernel": "k1"}
    assert build(tarball(tmp_path, GOOD), builder, stamp, "make", "driver", artifact="src/gdrdrv/gdrdrv.ko").returncode == 0
    packed = pack(builder, tmp_path / "k1.tar.gz")
    recorded = sha256(packed)
    other = tmp_path / "other" / "k1"
    with open(packed, "ab") as f:
        f.write(b"tampered after the controller recorded it")
    r = from_built(packed, other, stamp, pin=recorded)
    assert r.returncode == 1 and "not the " + recorded + " the controller recorded" in r.stderr, r.stderr
    assert not other.exists() and not Path(str(other) + ".new").exists()


@pytest.mark.fault(19)
def test_a_taking_host_keeps_its_own_pinned_makefile_and_takes_only_build_outputs(tmp_path):
    """Before: the whole builder's tree was unpacked and the library installed with the builder's Makefile. Now the
    tree is the node's own verified source plus the builder's outputs (*.o, *.so*, *.ko, tests/, stamp)."""
    lib_make = "lib:\n\tcd src && cc -shared -o libgdrapi.so.2.6 -x c /dev/null && ln -sf libgdrapi.so.2.6 libgdrapi.so\n"
    source = tarball(tmp_path, lib_make)
    builder = tmp_path / "builder" / "lib"
    (tmp_path / "tree" / "gdrcopy-2.6" / "src").mkdir(exist_ok=True)
    with tarfile.open(source, "w:gz") as t:
        t.add(tmp_path / "tree" / "gdrcopy-2.6", arcname="gdrcopy-2.6")
    stamp = {"component": "lib"}
    r = build(source, builder, stamp, "make", "lib")
    assert r.returncode == 0, r.stderr
    # a builder that changed its tree after building: its Makefile, a new file, a library
    (builder / "Makefile").write_text("lib_install:\n\ttouch /tmp/owned\n")
    (builder / "src" / "evil.sh").write_text("#!/bin/sh\n")
    packed = pack(builder, tmp_path / "lib.tar.gz")
    other = tmp_path / "other" / "lib"
    r = from_built(packed, other, stamp, source=source)
    assert r.returncode == 0, r.stderr
    assert (other / "Makefile").read_text() == lib_make, "the pinned Makefile, not the builder's"
    assert (other / "src" / "libgdrapi.so.2.6").read_bytes() == (builder / "src" / "libgdrapi.so.2.6").read_bytes()
    assert os.readlink(other / "src" / "libgdrapi.so") == "libgdrapi.so.2.6"
    assert not (other / "src" / "evil.sh").exists()
    # a link that points out of its directory is refused
    os.unlink(builder / "src" / "libgdrapi.so")
    os.symlink("/etc/shadow", builder / "src" / "libgdrapi.so")
    r = from_built(pack(builder, tmp_path / "lib2.tar.gz"), tmp_path / "third" / "lib", stamp, source=source)
    assert r.returncode == 1 and "points out of its directory" in r.stderr, r.stderr
    assert not (tmp_path / "third" / "lib").exists()
