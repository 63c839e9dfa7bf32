# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""gdrcopy-smoke: check gdrcopy without a GPU, through the installed libgdrapi.

    gdrcopy-smoke [--expect MAJOR.MINOR] [--lib libgdrapi.so.2] [--dmabuf]

gdr_open() must succeed (it opens /dev/gdrdrv and checks the driver's version against the library's), and
gdr_runtime_get_version() / gdr_driver_get_version() must both report MAJOR.MINOR when --expect is given. With
--dmabuf (the DMA-BUF backend: no gdrdrv), gdr_open() must take gdrcopy 2.6's DMA-BUF path (GDRCOPY_USE_DMABUF_MMAP=1;
it needs a GPU and CUDA driver 13.3+) and say so (gdr_get_attribute), and the runtime version must match.
Prints one JSON object (passed, runtime_version, driver_version, expected, msg); exits 0 when passed, else 1.
Run it as a user in the /dev/gdrdrv group to check that user's access.

One file, two callers (standard library only): the gdrcopy role installs it as the gdrcopy-smoke helper (a shebang
line added: roles/gdrcopy/vars/main.yml), and the modules that smoke-check a host (gdrcopy_load and gdrcopy_verify,
through module_utils/gdrcopy_facts.py) run check() in a child forked from their own process
(in_child): the library is loaded apart from the module, as in the helper, without starting another interpreter.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import ctypes
import json
import os
import select
import signal
import sys
import time

LIBRARY = "libgdrapi.so.2"


# gdrcopy 2.6: this variable makes gdr_open skip gdrdrv and take the DMA-BUF path; the attribute says which it took.
DMABUF_ENV = "GDRCOPY_USE_DMABUF_MMAP"
GDR_ATTR_USING_DMA_BUF_MMAP = 3


def check(libname, expect, dmabuf=False):
    out = {"passed": False, "runtime_version": "", "driver_version": "", "expected": expect or "", "msg": ""}
    if dmabuf:  # before the library reads it, in gdr_open
        os.environ[DMABUF_ENV] = "1"
    try:
        lib = ctypes.CDLL(libname)
    except OSError as e:
        out["msg"] = "cannot load %s: %s (is it installed and known to ldconfig?)" % (libname, e)
        return out
    lib.gdr_open.restype = ctypes.c_void_p
    lib.gdr_runtime_get_version.restype = None  # void in upstream's API
    major, minor = ctypes.c_int(-1), ctypes.c_int(-1)
    lib.gdr_runtime_get_version(ctypes.byref(major), ctypes.byref(minor))
    out["runtime_version"] = "%d.%d" % (major.value, minor.value)
    handle = lib.gdr_open()
    if dmabuf:
        return _check_dmabuf(lib, handle, expect, out)
    if not handle:
        access = "readable and writable" if os.access("/dev/gdrdrv", os.R_OK | os.W_OK) else "not accessible"
        out["msg"] = "gdr_open failed: /dev/gdrdrv is %s for uid %d (is gdrdrv loaded, and is this user in the " \
                     "device's group?)" % (access if os.path.exists("/dev/gdrdrv") else "missing", os.getuid())
        return out
    try:
        if lib.gdr_driver_get_version(ctypes.c_void_p(handle), ctypes.byref(major), ctypes.byref(minor)) != 0:
            out["msg"] = "gdr_driver_get_version failed"
            return out
        out["driver_version"] = "%d.%d" % (major.value, minor.value)
    finally:
        lib.gdr_close(ctypes.c_void_p(handle))
    wrong = [n for n in ("runtime_version", "driver_version") if expect and out[n] != expect]
    if wrong:
        out["msg"] = "expected %s, got runtime %s and driver %s" % (expect, out["runtime_version"], out["driver_version"])
        return out
    out["passed"] = True
    out["msg"] = "gdr_open ok; runtime %s, driver %s" % (out["runtime_version"], out["driver_version"])
    return out


def _check_dmabuf(lib, handle, expect, out):
    """gdr_open through the DMA-BUF path: it must succeed and say it uses DMA-BUF; there is no driver version (no
    gdrdrv: gdr_driver_get_version needs its file descriptor)."""
    if not handle:
        out["msg"] = ("gdr_open failed with %s=1: the CUDA driver offers no DMA-BUF mmap on any GPU here (13.3+ "
                      "needed)" % DMABUF_ENV)
        return out
    try:
        value = ctypes.c_int(0)
        if not hasattr(lib, "gdr_get_attribute") or lib.gdr_get_attribute(
                ctypes.c_void_p(handle), GDR_ATTR_USING_DMA_BUF_MMAP, ctypes.byref(value)) != 0 or value.value != 1:
            out["msg"] = "gdr_open succeeded but the library does not use its DMA-BUF path (gdr_get_attribute)"
            return out
    finally:
        lib.gdr_close(ctypes.c_void_p(handle))
    if expect and out["runtime_version"] != expect:
        out["msg"] = "expected %s, got runtime %s" % (expect, out["runtime_version"])
        return out
    out["passed"] = True
    out["msg"] = "gdr_open ok through DMA-BUF; runtime %s, no gdrdrv" % out["runtime_version"]
    return out


def in_child(fn, args, timeout):
    """fn(*args) in a child forked from this process, its JSON result read through a pipe: (exit code, stdout,
    stderr) as a program would give them - 0 and the JSON when fn returned, the negative signal when the child
    died (a crash in the library), 124 when it ran past timeout seconds (it is killed)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code, never flushes the caller's buffers
        code = 1
        try:
            os.close(rfd)
            data = json.dumps(fn(*args)).encode("utf-8")
            while data:
                data = data[os.write(wfd, data):]
            code = 0
        finally:
            os._exit(code)
    os.close(wfd)
    chunks, deadline, timed_out = [], time.monotonic() + timeout, False
    try:
        while True:
            if not select.select([rfd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(rfd)
        status = os.waitpid(pid, 0)[1]
    if timed_out:
        return 124, "", "timed out after %d s" % timeout
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status), "", "killed by signal %d" % os.WTERMSIG(status)
    return os.WEXITSTATUS(status), b"".join(chunks).decode("utf-8", "replace"), ""


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--expect", default="")
    p.add_argument("--lib", default=LIBRARY)
    p.add_argument("--dmabuf", action="store_true", help="open through the DMA-BUF path (gdrcopy 2.6), not gdrdrv")
    a = p.parse_args()
    result = check(a.lib, a.expect, a.dmabuf)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0 if result["passed"] else 1


if __name__ == "__main__":  # the gdrcopy-smoke helper
    raise SystemExit(main())
