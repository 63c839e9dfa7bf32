# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Upstream's own gdrcopy install on a host (what gdrcopy_facts.upstream_facts reads), and its removal once this
project's release is installed beside it (gdrcopy_upstream_packages: replace).

    packages (apt-get purge / dnf remove: their own scripts run `dkms remove` and stop the init script) -> read
    again -> what they left: each DKMS registration (`dkms remove -m gdrdrv -v V --all`), each init script
    (update-rc.d / chkconfig, then the file), the other files, each gdrdrv file outside this project's module
    subdir (then depmod for its kernel) -> ldconfig when a library went, daemon-reload when a unit went

The decisions are pure functions of the facts (leftovers, refusal); the module (plugins/modules/gdrcopy_upstream.py)
runs the commands.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P

CHOICES = ("refuse", "replace")
# The init scripts and units among the files upstream's packaging leaves (one list: gdrcopy_parsers.UPSTREAM_FILES).
INIT_SCRIPTS = tuple(f for f in P.UPSTREAM_FILES if f.startswith("/etc/init.d/"))
UNITS = tuple(f for f in P.UPSTREAM_FILES if f.endswith(".service"))


def found(upstream):
    """Whether upstream's install left anything on the host."""
    return any((upstream or {}).get(k) for k in ("packages", "dkms", "files", "modules"))


def refusal(upstream):
    """The sentence preflight stops a host with when upstream's install is there and gdrcopy_upstream_packages is
    refuse ('' when nothing of it is there)."""
    if not found(upstream):
        return ""
    return (
        "this host has upstream's own gdrcopy install (%s): its gdrdrv, init script or unit would load another gdrdrv "
        "beside this project's, or make /dev/gdrdrv world-writable (mknod -m 666). Set gdrcopy_upstream_packages: "
        "replace to have the run replace it (this project's release built and installed first, then upstream's "
        "packages purged and its DKMS module, init script, unit, udev rules and libraries removed), or remove it "
        "yourself, then run again. Nothing was changed." % P.upstream_summary(
            upstream))


def leftovers(upstream):
    """What is left to remove by hand once the packages are gone: {dkms: [versions], init: [scripts], files: [paths],
    modules: {kernel release: [gdrdrv files]}, ldconfig, daemon_reload}."""
    files = list(upstream.get("files") or [])
    modules = {}
    for path in upstream.get("modules") or []:
        m = re.match(r"^/lib/modules/([^/]+)/", path)
        if m:
            modules.setdefault(m.group(1), []).append(path)
    return {
        "dkms": [d["version"] for d in upstream.get("dkms") or []],
        "init": [f for f in files if f in INIT_SCRIPTS],
        "files": [f for f in files if f not in INIT_SCRIPTS],
        "modules": modules,
        "ldconfig": any("libgdrapi.so" in f for f in files),
        "daemon_reload": any(f in UNITS for f in files),
    }


def package_argv(manager, names):
    """The command that removes upstream's packages with their own scripts (purge: no config left)."""
    if manager.rsplit("/", 1)[-1] == "apt-get":
        return [manager, "-y", "-q", "purge"] + sorted(names)
    return [manager, "-y", "remove"] + sorted(names)


def init_argv(tool, script):
    """The command that takes an init script out of the boot sequence before the file goes."""
    name = script.rsplit("/", 1)[-1]
    if tool.endswith("update-rc.d"):
        return [tool, "-f", name, "remove"]
    return [tool, "--del", name]
