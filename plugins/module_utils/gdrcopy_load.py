# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""What loading nvidia and gdrdrv takes on a running host, decided in pure functions (the gdrcopy_load module reads
the host and runs the steps).

The chain loads in order (nvidia first, then what must sit between it and gdrdrv). A loaded gdrdrv is reloaded when
its file (srcversion) or its options differ from what is installed and configured, and only when nothing holds it
(refcount 0): with `rmmod gdrdrv` then `modprobe gdrdrv`, never `modprobe -r`, which could unload an idle nvidia.
When a process holds /dev/gdrdrv the reload is pending. When the kernel would refuse gdrdrv (enforced signatures,
a key not enrolled), gdrdrv is never offered to it. The device node is made after every load.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

MODULE_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")


def sysfs_name(module):
    """The name a module has under /sys/module (modprobe accepts - and _ alike; the kernel uses _)."""
    return module.replace("-", "_")


def reload_reasons(gdrdrv, wanted_params):
    """Why the loaded gdrdrv is not the one wanted: its file changed, or its options (those gdrdrv reports in
    /proc/driver/gdrdrv/params and the role sets) differ. [] when it is current or not loaded."""
    if not gdrdrv["loaded"]:
        return []
    why = []
    if gdrdrv["srcversion"] != gdrdrv["installed_srcversion"]:
        why.append("its file changed (srcversion %s loaded, %s installed)"
                   % (gdrdrv["srcversion"] or "unknown", gdrdrv["installed_srcversion"] or "none"))
    loaded = dict((k, v) for k, v in sorted((gdrdrv.get("params") or {}).items())
                  if k in wanted_params and v is not None)
    wanted = dict((k, wanted_params[k]) for k in sorted(wanted_params) if k in loaded)
    if loaded != wanted:
        why.append("its options changed (%s loaded, %s wanted)" % (_options(loaded), _options(wanted)))
    return why


def _options(opts):
    return " ".join("%s=%s" % (k, opts[k]) for k in sorted(opts)) or "none"


def decide(state, chain, wanted_params):
    """The steps for state ({loaded: {module: bool}, gdrdrv: {...}, load_refusal: str}), chain (modules before
    gdrdrv, in order) and the wanted gdrdrv options.

    -> {steps: [argv...], reload_why: [...], pending: bool, refused: str, mknod: bool}"""
    steps = [["modprobe", m] for m in chain if not state["loaded"].get(sysfs_name(m))]
    gdrdrv = state["gdrdrv"]
    refused = state.get("load_refusal") or ""
    why = reload_reasons(gdrdrv, wanted_params)
    pending = bool(why) and gdrdrv["refcount"] != 0
    if not refused:
        if not gdrdrv["loaded"]:
            steps.append(["modprobe", "gdrdrv"])
        elif why and not pending:
            steps += [["rmmod", "gdrdrv"], ["modprobe", "gdrdrv"]]
    return {"steps": steps, "reload_why": why, "pending": pending, "refused": refused, "mknod": not refused}


def pending_message(gdrdrv, why, reboot_ok):
    """What the role says when gdrdrv is left as it is."""
    return ("gdrdrv is in use (%d open handle(s) on /dev/gdrdrv) and %s: it keeps running as it is. Stop the programs "
            "that use GPUDirect copies and run again, or reboot%s." % (
                gdrdrv["refcount"], "; ".join(why),
                " (gdrcopy_reboot_ok is true: rebooting now)" if reboot_ok
                else " (set gdrcopy_reboot_ok: true to let the role reboot)"))


def refused_message(refusal, enrollment_pending):
    return "gdrdrv is not loaded: %s. %s" % (refusal, (
        "A MOK enrollment is pending: confirm it at the console during the next boot (see the mok_signing report); "
        "gdrdrv loads at that boot." if enrollment_pending else
        "Enable module signing (mok_signing_enabled: true) and get its key enrolled, then run again."))
