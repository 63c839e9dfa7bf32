#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrcopy_peermem
short_description: Load, leave or unload nvidia-peermem by a wanted state, and deal with the legacy nv_peer_mem
description:
  - The nvidia_peermem role's work on a host, in one call. Reads whether the NVIDIA driver ships nvidia-peermem for
    the kernel, whether it is loaded, whether ib_core offers the peer-memory API (MLNX_OFED, DOCA-OFED) and whether
    the deprecated nv_peer_mem is there, then decides what O(state) means here (module_utils
    C(gdrcopy_peermem), pure).
  - C(required) that cannot be met fails with one sentence before anything changes. The legacy nv_peer_mem is
    reported; with O(legacy=remove) its service is stopped and disabled, a modprobe.d file keeps it from loading,
    and it is unloaded when nothing holds it.
  - On a running host nvidia-peermem is loaded (after nvidia, which modprobe loads first) or, for C(absent), unloaded
    when nothing holds it (C(rmmod), never C(modprobe -r), which would take an idle nvidia with it); C(absent) also
    writes a modprobe.d file that keeps it from loading at boot, which any other state removes.
  - In an image (O(image)) nothing is loaded or unloaded; the answer says what loads at boot.
  - With O(read), an answer that needs nothing done on the host comes from that read, on the controller.
  - The boot-time load is the gdrcopy role's (its C(gdrcopy-ansible.service) loads RV(boot_modules) between nvidia and
    gdrdrv).
version_added: "0.2.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  state:
    description: C(auto) (load when the RDMA stack offers the peer-memory API), C(present), C(required), C(absent).
    type: str
    choices: [auto, present, required, absent]
    default: auto
  legacy:
    description: What to do with a legacy nv_peer_mem - C(leave) it (nvidia-peermem is then not loaded), C(remove) it.
    type: str
    choices: [leave, remove]
    default: leave
  persist:
    description: Have nvidia-peermem load at every boot in the gdrcopy chain (RV(boot_modules)) when it should load.
    type: bool
    default: true
  image:
    description: The root is an image, not a running host - nothing is loaded or unloaded.
    type: bool
    default: false
  read:
    description:
      - The result of a read of this host earlier in the same run (the preflight play's M(gpufleet.gdrcopy.gdrcopy_verify)
        or a M(gpufleet.gdrcopy.gdrcopy_info) call), with the facts the plan needs. When the answer from it needs
        nothing done on the host - nothing to load or unload (in an image, always), no legacy module to remove, no
        modprobe.d file to write or remove, no C(required) that fails - the action plugin gives that answer and
        starts nothing on the host; otherwise the module runs (and reads the host itself).
    type: dict
attributes:
  check_mode:
    support: full
    description: Says what it would load, unload, stop or write; changes nothing.
  diff_mode:
    support: none
    description: The only files are the fixed modprobe.d ones; RV(changes) names them.
"""

EXAMPLES = r"""
- name: Load nvidia-peermem where the RDMA stack supports it
  gpufleet.gdrcopy.gdrcopy_peermem:
    state: auto
  register: peermem
"""

RETURN = r"""
plan:
  description: C(action) (load, unload, none), C(boot), C(fail), C(reason) and C(dmabuf) (the DMA-BUF note).
  returned: success
  type: dict
loaded:
  description: nvidia-peermem is loaded after the call (false in an image).
  returned: success
  type: bool
boot_modules:
  description: What the gdrcopy boot unit loads between nvidia and gdrdrv.
  returned: success
  type: list
  elements: str
report:
  description: C(available), C(rdma_stack), C(legacy_nv_peer_mem), C(action) (loaded, unloaded, none), C(msg), C(dmabuf).
  returned: success
  type: dict
changes:
  description: What the call did (in check mode, would do).
  returned: always
  type: list
  elements: str
msg:
  description: What the role says - the legacy module, then the plan's reason.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_commands as C
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_commands import Failed, must
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts as F
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_peermem as PM
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_fileops import ensure


def read(h):
    """The facts the plan needs: the kernels (their releases only: no module signature is read), the NVIDIA driver,
    nvidia-peermem, nv_peer_mem and ib_core."""
    kernels = {"running": F.running_release(h), "installed": [{"release": r} for r in F.installed_releases(h)]}
    loaded = P.parse_proc_modules(h.read("/proc/modules") or "")
    return {"kernel": kernels, "nvidia": F.nvidia_facts(h, kernels), "peermem": F.peermem_facts(h, kernels, loaded)}


def remove_legacy(module, h, legacy, image, changes):
    """Stop and disable its service, keep it from loading, unload it when nothing holds it."""
    systemctl = h.tool("systemctl")
    if legacy["service"] and systemctl:
        unit = "nv_peer_mem"
        if not image and h.run([systemctl, "is-active", unit])[1].strip() == "active":
            changes.append("stopped " + unit)
            if not module.check_mode:
                must(h, [systemctl, "stop", unit])
        if h.run([systemctl, "is-enabled", unit])[1].strip() in ("enabled", "enabled-runtime", "generated"):
            changes.append("disabled " + unit)
            if not module.check_mode:
                must(h, [systemctl, "disable", unit])
    path = PM.BLACKLIST["nv_peer_mem"]
    if ensure(module, path, to_bytes(PM.blacklist("nv_peer_mem")), 0o644, module.check_mode):
        changes.append("wrote " + path)
    if legacy["loaded"] and legacy["refcount"] == 0 and not image:
        changes.append("unloaded nv_peer_mem")
        if not module.check_mode:
            must(h, [h.tool("rmmod") or "rmmod", "nv_peer_mem"])


def apply(module, p, h=None):
    """The module's work: the result (raises Failed)."""
    h = h or F.Host(module, "/", image=p["image"])
    image = p["image"] or not h.live
    facts = read(h)
    the_plan = PM.plan(p["state"], p["legacy"], facts)
    if the_plan["fail"]:
        raise Failed(PM.required_message(the_plan["reason"]))
    legacy = facts["peermem"]["nv_peer_mem"]
    changes, modprobe = [], None
    if p["legacy"] == "remove" and PM.legacy_present(legacy):
        remove_legacy(module, h, legacy, image, changes)
    mod = facts["peermem"]["nvidia_peermem"]
    if not image and the_plan["action"] == "load":
        changes.append("loaded nvidia-peermem")
        if module.check_mode:
            modprobe = (0, "")
        else:
            rc, out, err = h.run([h.tool("modprobe") or "modprobe", "nvidia-peermem"])
            modprobe = (rc, err or out)
            if rc != 0:
                changes.pop()
                if p["state"] == "required":
                    raise Failed(PM.load_failed_message(err or out))
    if not image and the_plan["action"] == "unload" and mod["refcount"] == 0:
        changes.append("unloaded nvidia-peermem")
        if not module.check_mode:
            must(h, [h.tool("rmmod") or "rmmod", "nvidia_peermem"])
    path = PM.BLACKLIST["nvidia_peermem"]
    if p["state"] == "absent":
        if ensure(module, path, to_bytes(PM.blacklist("nvidia_peermem")), 0o644, module.check_mode):
            changes.append("wrote " + path)
    elif os.path.lexists(path):
        changes.append("removed " + path)
        if not module.check_mode:
            os.unlink(path)
    return PM.result(facts, the_plan, p["legacy"], p["persist"], image, modprobe, changes)


def main():
    C.main(AnsibleModule(argument_spec=PM.ARGUMENT_SPEC, supports_check_mode=True), apply)


if __name__ == "__main__":
    main()
