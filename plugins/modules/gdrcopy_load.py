#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrcopy_load
short_description: Load nvidia, the modules between it and gdrdrv, and gdrdrv, in order; reload gdrdrv when it changed
description:
  - Modelled on C(community.general.modprobe), for one chain. Reads the running host (C(/proc/modules),
    C(/sys/module/gdrdrv), C(/proc/driver/gdrdrv/params), C(modinfo) of the installed gdrdrv, Secure Boot and the
    signature of the module the running kernel would load), then loads what is missing, in the order of O(chain),
    then gdrdrv.
  - A loaded gdrdrv whose file (srcversion) or options (the O(params) it reports) differ from what is installed and
    wanted is reloaded when nothing holds it - C(rmmod gdrdrv), then C(modprobe gdrdrv); never C(modprobe -r), which
    could unload an idle nvidia. When a process holds C(/dev/gdrdrv), it is left running and RV(pending) is true.
  - Where module signatures are enforced and the kernel would refuse the installed gdrdrv (unsigned, or signed by a
    key that is not enrolled yet), gdrdrv is never offered to it; RV(refused) says why.
  - After every load (and on every run where gdrdrv may load) the device node helper makes C(/dev/gdrdrv) right.
  - For a running host only; an image root has nothing to load.
version_added: "0.2.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  chain:
    description: The modules loaded before gdrdrv, in order (nvidia first).
    type: list
    elements: str
    default: [nvidia]
  params:
    description: The gdrdrv options a loaded gdrdrv should report (the release's built-in defaults with the role's
      C(modprobe.d) options over them, as C(gdrcopy_inputs) returns them in C(gdrdrv_params)); a loaded gdrdrv that reports others is
      reloaded.
    type: dict
    default: {}
  mknod:
    description: The helper that makes C(/dev/gdrdrv) (it prints C(created) when it made or fixed the node).
    type: path
    default: /usr/local/libexec/gdrcopy-ansible/gdrdrv-mknod
  mok_cert:
    description: The certificate modules are signed with, to tell whether the kernel would accept gdrdrv.
    type: path
  enrollment_pending:
    description: A MOK enrollment of that certificate is pending (only changes the message).
    type: bool
    default: false
  reboot_ok:
    description: The role will reboot when a reload is pending (only changes the message).
    type: bool
    default: false
  smoke:
    description:
      - The release's MAJOR.MINOR. After the loads, the smoke check (C(gdr_open) through libgdrapi, and the runtime
        and gdrdrv versions; the code of the C(gdrcopy-smoke) helper, run in a child forked from the module) runs
        and must report it; the module fails with the check's words when it does not. Omitted, no smoke check
        runs.
      - Nothing is checked in check mode, or when the kernel would refuse gdrdrv (then C(ran) is false in RV(smoke)).
    type: str
attributes:
  check_mode:
    support: full
    description: Says what it would load, unload or make; runs nothing.
  diff_mode:
    support: none
    description: Loads modules; no file is changed by the module itself.
"""

EXAMPLES = r"""
- name: Load nvidia, nvidia-peermem and gdrdrv
  gpufleet.gdrcopy.gdrcopy_load:
    chain: [nvidia, nvidia-peermem]
    params: {dbg_enabled: 0}
    mok_cert: /var/lib/gdrcopy-ansible/mok-signer.der
  register: loaded
"""

RETURN = r"""
steps:
  description: The commands run (in check mode, that would run), in order.
  returned: always
  type: list
  elements: list
refused:
  description: Why the running kernel would refuse gdrdrv; empty when it would load it.
  returned: always
  type: str
pending:
  description: gdrdrv must be reloaded but is in use; it keeps running as it is.
  returned: always
  type: bool
reload_why:
  description: Why the loaded gdrdrv is not the one wanted (its file, its options).
  returned: always
  type: list
  elements: str
device:
  description: What the device node helper said (C(created), C(ok)), or C(skipped).
  returned: always
  type: str
msg:
  description: What the role tells the user (why gdrdrv is not loaded, or left as it is); empty when all is well.
  returned: always
  type: str
smoke:
  description:
    - The smoke check (with O(smoke)) - C(ran), C(method) (C(library), or C(none) when nothing ran), C(passed),
      C(msg), C(expected), and what the helper read (C(runtime_version), C(driver_version)). The gdrcopy role
      exports it as C(gdrcopy_smoke).
  returned: when O(smoke) is set
  type: dict
  sample: {"ran": true, "method": "library", "passed": true, "msg": "gdr_open ok; runtime 2.6, driver 2.6",
           "expected": "2.6"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts as F
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_load as L
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import PATHS

ARGUMENT_SPEC = dict(
    chain=dict(type="list", elements="str", default=["nvidia"]),
    params=dict(type="dict", default={}),
    mknod=dict(type="path", default=PATHS["mknod_program"]),
    mok_cert=dict(type="path"),
    enrollment_pending=dict(type="bool", default=False),
    reboot_ok=dict(type="bool", default=False),
    smoke=dict(type="str"),
)


def read_state(h, mok_cert):
    """What decide() needs of the running host."""
    secure_boot = F.secure_boot_facts(h, mok_cert)
    facts = {"live": h.live, "kernel": F.kernel_facts(h, secure_boot["mok"]["serial"]), "secure_boot": secure_boot}
    loaded = P.parse_proc_modules(h.read("/proc/modules") or "")
    return {"loaded": dict((name, True) for name in loaded), "gdrdrv": F.gdrdrv_facts(h),
            "load_refusal": P.load_refusal(facts)}


def load(module, params, h=None):
    """The module's work: (result, error message or None)."""
    bad = [m for m in params["chain"] if not L.MODULE_NAME_RE.match(m)]
    if bad:
        return {}, "chain: %s is not a kernel module name (letters, digits, _ and -)" % ", ".join(bad)
    h = h or F.Host(module, "/")
    if not h.live:
        return {}, "gdrcopy_load loads modules into the running kernel; this is not a running host (an image root)"
    state = read_state(h, params.get("mok_cert"))
    plan = L.decide(state, params["chain"], params["params"] or {})
    result = {"changed": bool(plan["steps"]), "steps": plan["steps"], "refused": plan["refused"],
              "pending": plan["pending"], "reload_why": plan["reload_why"], "device": "skipped", "msg": ""}
    if plan["refused"]:
        result["msg"] = L.refused_message(plan["refused"], params["enrollment_pending"])
    elif plan["pending"]:
        result["msg"] = L.pending_message(state["gdrdrv"], plan["reload_why"], params["reboot_ok"])
    expect = params.get("smoke")
    if expect:
        why = ("check mode: nothing was loaded" if module.check_mode
               else "gdrdrv is not loaded: %s" % plan["refused"] if plan["refused"] else "")
        result["smoke"] = {"ran": False, "method": "none", "passed": False, "msg": why, "expected": expect}
    if module.check_mode:
        return result, None
    for argv in plan["steps"]:
        tool = h.tool(argv[0]) or argv[0]
        rc, out, err = h.run([tool] + argv[1:])
        if rc != 0:
            return result, "%s failed (exit %d): %s" % (" ".join(argv), rc, (err or out).strip() or "no output")
    if plan["mknod"]:
        rc, out, err = h.run([params["mknod"]])
        if rc != 0:
            return result, "%s failed (exit %d): %s" % (params["mknod"], rc, (err or out).strip() or "no output")
        result["device"] = out.strip() or "ok"
        if result["device"] == "created":
            result["changed"] = True
    if expect and not plan["refused"]:
        result["smoke"] = F.smoke_check(h, expect)
        if not result["smoke"].get("passed"):
            return result, "the gdrcopy smoke check failed: %s" % result["smoke"].get("msg")
    return result, None


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result, error = load(module, module.params)
    if error:
        module.fail_json(msg=error, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
