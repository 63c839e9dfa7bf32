"""roles/gdrcopy/files/gdrcopy-install: the library is staged, checked and swapped in, or nothing changes.

Run for real on the fixture source tree (upstream's lib_install interface), built with the host's compiler; the
disk-full case installs onto a small tmpfs (needs root, as CI has).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import need

REPO = Path(__file__).resolve().parents[2]
HELPER = REPO / "roles" / "gdrcopy" / "files" / "gdrcopy-install"


@pytest.fixture
def built(built_lib):
    """The library build of conftest.py (tests that change it work on a copy)."""
    return built_lib


def install(build, dest, stamp, *targets):
    argv = [str(HELPER), "--build", str(build), "--dest", str(dest), "--stamp", json.dumps(stamp), "--",
            "make", "-s", *(targets or ["lib_install"])]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def snapshot(top: Path):
    """Every path under top with its bytes (or link target): what "untouched" compares."""
    out = {}
    for p in sorted(top.rglob("*")):
        rel = str(p.relative_to(top))
        out[rel] = ("link", os.readlink(p)) if p.is_symlink() else ("file", p.read_bytes()) if p.is_file() else "dir"
    return out


def test_an_install_lands_whole_with_its_stamp(tmp_path, built):
    dest = tmp_path / "opt" / "gdrcopy" / "2.6"
    r = install(built, dest, {"v": 1})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"installed {dest}"
    lib = next(built.glob("src/libgdrapi.so.*.*"))
    assert (dest / "lib" / lib.name).read_bytes() == lib.read_bytes()
    assert (dest / "lib" / "libgdrapi.so").is_symlink()
    assert (dest / "include" / "gdrapi.h").exists()
    assert json.loads((dest / ".gdrcopy-install.json").read_text()) == {"v": 1}
    assert sorted(p.name for p in dest.parent.iterdir()) == ["2.6"], "no staging directory is left"


def test_a_reinstall_replaces_the_tree_and_its_stamp(tmp_path, built):
    dest = tmp_path / "2.6"
    assert install(built, dest, {"v": 1}).returncode == 0
    (dest / "lib" / "stale-file").write_text("from an older install")
    r = install(built, dest, {"v": 2})
    assert r.returncode == 0, r.stderr
    assert json.loads((dest / ".gdrcopy-install.json").read_text()) == {"v": 2}
    assert not (dest / "lib" / "stale-file").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2.6"]


@pytest.mark.fault(13)
def test_a_short_write_that_make_ignores_is_caught_and_nothing_changes(tmp_path, built):
    """Upstream's lib_install joins `install` of the library with `;`, so make can succeed after a failed copy."""
    dest = tmp_path / "2.6"
    assert install(built, dest, {"v": 1}).returncode == 0
    before = snapshot(tmp_path)
    bad = tmp_path.parent / (tmp_path.name + "-bad")
    shutil.copytree(built, bad)
    lib = next(bad.glob("src/libgdrapi.so.*.*"))
    (bad / "Makefile").write_text((bad / "Makefile").read_text().replace(
        "\tinstall -m 0755 src/$(LIB_DYNAMIC) '$(DESTLIB)/'\n",
        "\thead -c 100 src/$(LIB_DYNAMIC) > '$(DESTLIB)/$(LIB_DYNAMIC)'; true\n"))
    os.utime(lib)  # keep make from rebuilding
    r = install(bad, dest, {"v": 2})
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert "differs from the build" in last and "untouched" in last, last
    assert snapshot(tmp_path) == before


@pytest.mark.fault(13)
def test_a_full_disk_fails_in_one_sentence_and_the_previous_install_is_intact(tmp_path, built):
    need(os.geteuid() == 0, "needs root to mount a small tmpfs")
    fs = tmp_path / "fs"
    fs.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(fs)], check=True)
    try:
        dest = fs / "gdrcopy" / "2.6"
        assert install(built, dest, {"v": 1}).returncode == 0
        # Fill the filesystem: what is left cannot hold a second copy of the library.
        fd = os.open(fs / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        before = snapshot(fs / "gdrcopy")
        r = install(built, dest, {"v": 2})
        assert r.returncode == 1
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith(f"gdrcopy-install: installing libgdrapi into {dest} failed: the filesystem of ")
        assert "is full" in last and "free space there" in last and "untouched" in last, last
        assert snapshot(fs / "gdrcopy") == before, "the previous install is byte-identical, no staging left"
        assert json.loads((dest / ".gdrcopy-install.json").read_text()) == {"v": 1}
    finally:
        subprocess.run(["umount", str(fs)], check=True)


@pytest.mark.fault(16)
@pytest.mark.parametrize("dest", ["{prefix}/", "{prefix}/../../usr", "{prefix}/2.6/..", "relative/2.6", "/2.6",
                                  "{prefix}/current"])
def test_a_dest_that_is_not_prefix_slash_version_is_refused_before_anything_moves(tmp_path, built, dest):
    """Before: a version of "" or ../../../usr made gdrcopy-install move and rm -rf the prefix, or /usr."""
    prefix = tmp_path / "opt" / "gdrcopy"
    (prefix / "2.5").mkdir(parents=True)
    (prefix / "2.5" / "keep").write_text("x")
    r = install(built, dest.format(prefix=prefix), {"v": 1})
    assert r.returncode == 2 and "--dest must be an absolute PREFIX/VERSION" in r.stderr, r.stderr
    assert (prefix / "2.5" / "keep").read_text() == "x" and sorted(p.name for p in prefix.iterdir()) == ["2.5"]


def test_the_install_lists_the_sha256_of_every_file_it_installed(tmp_path, built):
    """gdrcopy_info checks this manifest on every run: a file changed by hand makes the install not current."""
    import hashlib
    from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_pipeline as PIPE
    dest = tmp_path / "opt" / "gdrcopy" / "2.6"
    assert install(built, dest, {"v": 1}).returncode == 0
    manifest = PIPE.parse_sha256sums((dest / ".gdrcopy-manifest").read_text())
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*")
                   if p.is_file() and not p.is_symlink() and not p.name.startswith(".gdrcopy-"))
    assert sorted(manifest) == files and any(f.startswith("lib/libgdrapi.so.") for f in files)
    assert all(hashlib.sha256((dest / f).read_bytes()).hexdigest() == manifest[f] for f in files)
