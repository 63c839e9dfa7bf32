# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""The nvidia_peermem role's decisions, pure: what nvidia_peermem_state means on this host (gdrcopy_parsers'
peermem_plan, with the legacy nv_peer_mem that conflicts with it), what to do with the legacy module, and what the
role exports and says. The gdrcopy_peermem module reads the host and acts on these answers; its action plugin answers
from a read of the same run instead when that answer needs nothing done on the host (from_read)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P

BLACKLIST = {
    "nvidia_peermem": "/etc/modprobe.d/gdrcopy-ansible-nvidia-peermem.conf",
    "nv_peer_mem": "/etc/modprobe.d/gdrcopy-ansible-nv_peer_mem.conf",
}
WHY = {
    "nvidia_peermem": "nvidia_peermem_state: absent",
    "nv_peer_mem": "nv_peer_mem is deprecated and conflicts with nvidia-peermem (nvidia_peermem_legacy_nv_peer_mem: remove).",
}


# gdrcopy_peermem's options: the module's argument spec, and the defaults and choices its action plugin answers with.
ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["auto", "present", "required", "absent"], default="auto"),
    legacy=dict(type="str", choices=["leave", "remove"], default="leave"),
    persist=dict(type="bool", default=True),
    image=dict(type="bool", default=False),
    read=dict(type="dict"),
)


def blacklist(module_name):
    """The modprobe.d file that keeps a module from loading (blacklist, and an install line that fails)."""
    return ("# Ansible managed (gdrcopy-ansible, role nvidia_peermem): changes here are overwritten by the next run.\n"
            "# %s\nblacklist %s\ninstall %s /bin/false\n" % (WHY[module_name], module_name, module_name))


def legacy_present(legacy):
    return bool(legacy["loaded"] or legacy["available"] or legacy["service"])


def plan(state, legacy_choice, facts):
    """peermem_plan, except that a loaded nv_peer_mem that stays (leave) keeps nvidia-peermem from loading."""
    out = P.peermem_plan(state, facts)
    if facts["peermem"]["nv_peer_mem"]["loaded"] and legacy_choice == "leave" and out["action"] == "load":
        out = dict(out, action="none", boot=False, fail=state == "required",
                   reason="the deprecated nv_peer_mem is loaded and conflicts with nvidia-peermem, which is left "
                          "unloaded; set nvidia_peermem_legacy_nv_peer_mem: remove to replace it")
    return out


def required_message(reason):
    return ("nvidia_peermem_state is required, but %s. Install the NVIDIA driver's nvidia-peermem for this kernel (and "
            "MLNX_OFED / DOCA-OFED for the peer-memory API), or set nvidia_peermem_state: auto. Nothing was changed; "
            "loaded modules are left as they are." % reason)


def load_failed_message(stderr):
    return ("nvidia_peermem_state is required, but `modprobe nvidia-peermem` failed: %s. Loaded modules are left as "
            "they are. Check that ib_core has the peer-memory API (MLNX_OFED / DOCA-OFED) and that the module matches "
            "the NVIDIA driver, or set nvidia_peermem_state: auto." % stderr.strip())


def legacy_sentences(legacy, choice, image):
    """What the role says about the legacy nv_peer_mem (nothing when it is not there)."""
    if not legacy_present(legacy):
        return []
    out = ["the deprecated nv_peer_mem is %s%s: it conflicts with nvidia-peermem. %s" % (
        "loaded" if legacy["loaded"] else "installed", " (%s)" % legacy["service"] if legacy["service"] else "",
        "nvidia_peermem_legacy_nv_peer_mem is leave: it stays." if choice == "leave" else
        "nvidia_peermem_legacy_nv_peer_mem is remove: it is disabled and unloaded.")]
    if choice == "remove" and legacy["loaded"] and legacy["refcount"] != 0 and not image:
        out.append("nv_peer_mem is in use (%d user(s)): it stays loaded until the next boot, where it no longer "
                   "loads." % legacy["refcount"])
    return out


def exports(facts, the_plan, persist, image, modprobe):
    """nvidia_peermem_loaded, nvidia_peermem_boot_modules and nvidia_peermem_report. modprobe: (rc, stderr) of the
    load, or None when there was none."""
    pm = facts["peermem"]
    mod, legacy = pm["nvidia_peermem"], pm["nv_peer_mem"]
    loaded_now = modprobe is not None and modprobe[0] == 0
    msg = the_plan["reason"]
    if modprobe is not None and modprobe[0] != 0:
        msg += "; but modprobe failed: " + modprobe[1].strip()
    return {
        "loaded": False if image else bool(mod["loaded"] and the_plan["action"] != "unload"
                                           or the_plan["action"] == "load" and loaded_now),
        "boot_modules": ["nvidia-peermem"] if the_plan["boot"] and persist else [],
        "report": {"available": mod["available"], "rdma_stack": pm["ib_core"]["peer_memory_api"] is True,
                   "legacy_nv_peer_mem": bool(legacy["loaded"] or legacy["service"]),
                   "action": "loaded" if loaded_now and the_plan["action"] == "load"
                   else "unloaded" if the_plan["action"] == "unload" else "none",
                   "msg": msg, "dmabuf": the_plan["dmabuf"]},
    }


def result(facts, the_plan, legacy_choice, persist, image, modprobe, changes):
    """The module's result: the exports, the plan, what changed and what the role says."""
    legacy = facts["peermem"]["nv_peer_mem"]
    out = exports(facts, the_plan, persist, image, modprobe)
    out.update(changed=bool(changes), changes=changes, plan=the_plan,
               msg=" ".join(legacy_sentences(legacy, legacy_choice, image) + [out["report"]["msg"]]))
    return out


def from_read(facts, state, legacy_choice, persist, image):
    """The module's result composed from a read of this run (gdrcopy_verify's or gdrcopy_info's, which hold these
    facts and RV(blacklist_files)) when the call would do nothing on the host: nothing to load or unload (an image,
    or no action), no legacy module to remove, no modprobe.d file to write or remove, no failure to report. None
    when the module has to run."""
    pm = facts.get("peermem") or {}
    if "blacklist_files" not in pm or not facts.get("kernel") or "nvidia" not in facts:
        return None  # not a read that holds what the plan needs
    the_plan = plan(state, legacy_choice, facts)
    if the_plan["fail"] or (the_plan["action"] != "none" and not image):
        return None
    if legacy_choice == "remove" and legacy_present(pm["nv_peer_mem"]):
        return None
    if state == "absent" or BLACKLIST["nvidia_peermem"] in pm["blacklist_files"]:
        return None  # the file absent wants is written (or checked) by the module; any other state removes it
    return result(facts, the_plan, legacy_choice, persist, image, None, [])
