"""module_utils/gdrcopy_smoke.py: the smoke check, run for real - in a child forked from the calling process (what
gdrcopy_load and gdrcopy_verify do) and as the gdrcopy-smoke helper (the same file with a shebang) - against a small
library with libgdrapi's four calls, compiled here."""

import ctypes
import faulthandler
import json
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_smoke as S
from conftest import REPO

FAKE_GDRAPI = r"""
#include <stdlib.h>
static int dev = 1;
void gdr_runtime_get_version(int *major, int *minor) { *major = RT_MAJOR; *minor = RT_MINOR; }
void *gdr_open(void) { return OPEN_OK ? (void *)&dev : NULL; }
int gdr_driver_get_version(void *g, int *major, int *minor) { *major = 2; *minor = 6; return 0; }
int gdr_close(void *g) { return 0; }
"""


@pytest.fixture
def library(tmp_path):
    def build(major=2, minor=6, open_ok=1):
        src, lib = tmp_path / "gdrapi.c", tmp_path / ("libgdrapi-%d-%d-%d.so" % (major, minor, open_ok))
        src.write_text(FAKE_GDRAPI)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src), "-DRT_MAJOR=%d" % major,
                        "-DRT_MINOR=%d" % minor, "-DOPEN_OK=%d" % open_ok], check=True)
        return str(lib)
    return build


def test_the_check_passes_through_the_library_in_a_forked_child(library):
    rc, out, err = S.in_child(S.check, (library(), "2.6"), 30)
    assert (rc, err) == (0, "") and json.loads(out) == {
        "passed": True, "runtime_version": "2.6", "driver_version": "2.6", "expected": "2.6",
        "msg": "gdr_open ok; runtime 2.6, driver 2.6"}


def test_the_check_names_a_version_mismatch_and_a_failed_open(library):
    assert S.check(library(2, 5), "2.6")["msg"] == "expected 2.6, got runtime 2.5 and driver 2.6"
    failed = S.check(library(open_ok=0), "2.6")
    assert not failed["passed"] and failed["msg"].startswith("gdr_open failed: /dev/gdrdrv is ")
    missing = S.check("/nonexistent/libgdrapi.so.2", "2.6")
    assert missing["msg"].startswith("cannot load /nonexistent/libgdrapi.so.2: ")


def test_a_crash_in_the_child_is_its_signal_and_the_caller_lives_on():
    enabled = faulthandler.is_enabled()
    faulthandler.disable()  # pytest's would print the child's crash; a module has none
    try:
        rc, out, err = S.in_child(ctypes.string_at, (0,), 30)  # a NULL read: SIGSEGV in the child only
    finally:
        if enabled:
            faulthandler.enable()
    assert rc < 0 and out == "" and err == "killed by signal %d" % -rc


def test_a_hanging_child_is_killed_at_its_time_limit():
    start = time.monotonic()
    rc, out, err = S.in_child(time.sleep, (30,), 1)
    assert (rc, out, err) == (124, "", "timed out after 1 s") and time.monotonic() - start < 10
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # nothing left behind


def test_the_helper_is_the_same_file_run_as_a_program(library):
    r = subprocess.run([sys.executable, str(REPO / "plugins" / "module_utils" / "gdrcopy_smoke.py"),
                        "--expect", "2.6", "--lib", library()], capture_output=True, text=True)
    assert r.returncode == 0 and json.loads(r.stdout) == S.check(library(), "2.6")
    r = subprocess.run([sys.executable, str(REPO / "plugins" / "module_utils" / "gdrcopy_smoke.py"),
                        "--expect", "2.5", "--lib", library()], capture_output=True, text=True)
    assert r.returncode == 1 and not json.loads(r.stdout)["passed"]
