# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""What "converged" means for a host, in pure functions (gdrcopy_info does the I/O).

A run of site.yml that finished on a host, verified it and left nothing pending writes a record there
(RECORD_PATH): the digest of the run's inputs (every role variable, the release, the project's own code; computed
on the controller) and the state the run left (state_fingerprint: kernels, gdrdrv per kernel, builds, the library,
the NVIDIA driver and source, Secure Boot and the key, the loaded chain and /dev/gdrdrv, and the content of every
file the roles manage). The next run reads the host once (gdrcopy_info) and compares (differences): equal inputs
and an equal state mean a full run would change nothing, so site.yml skips the roles for that host. Anything
volatile (reference counts, GPU memory in use, which installed kernel is running) is left out, so a reboot into
another kernel the roles built for is still converged; a new kernel, a changed file or variable is not.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import PATHS

RECORD_VERSION = 1
RECORD_PATH = PATHS["converged_record"]

# The files the roles write on a host, as globs (the prefix's stable link and the gdrdrv modules come from the
# facts). tests/unit/test_converged.py checks that every destination in the roles' tasks is covered.
MANAGED_PATHS = (
    PATHS["libexec"] + "/*",
    "/etc/modprobe.d/gdrcopy-ansible-*.conf",             # PATHS["modprobe_options"], the nvidia_peermem role's
    PATHS["unit"],
    "/etc/systemd/system/*.wants/" + os.path.basename(PATHS["unit"]),
    # the names before 0.3.0: retired by the files step, removed by the uninstall where this project wrote them
    PATHS["retired_options"],
    PATHS["retired_unit"],
    PATHS["retired_unit_link"],
    PATHS["loader_conf"],
    "/etc/kernel/postinst.d/zz-gdrcopy-ansible",
    "/etc/kernel/header_postinst.d/zz-gdrcopy-ansible",
    PATHS["config_dir"] + "/*",
    "/etc/dkms/framework.conf.d/gdrcopy-ansible.conf",
    PATHS["state_dir"] + "/mok/*",
    PATHS["state_dir"] + "/mok/.*",
    PATHS["mok_signer"],
)


def watch_globs(key_dir, host_key_paths):
    """The files that belong to the converged state where the mok_signing inputs put them: the key dir and the
    host's key pairs (mok_signing_key_dir, mok_signing_host_key_paths). Preflight reads the state with them and
    verify records it with them: one list, or a host with DKMS's pair (/var/lib/dkms/mok.key) is never converged
    (the record would lack what every read finds)."""
    out = [key_dir.rstrip("/") + "/*", key_dir.rstrip("/") + "/.*"] if key_dir else []
    pairs = host_key_paths or []
    return out + [p["key"] for p in pairs] + [p["cert"] for p in pairs]


def _module_state(mod, files):
    return {"path": mod["path"], "content": files.get(mod["path"], "absent"), "signer": mod.get("signer", ""),
            "sig_key": mod.get("sig_key", "")}


def live_state(facts):
    """The loaded chain as a run leaves it: booleans and settings, not the values that differ per kernel."""
    gdrdrv, nvidia, dev = facts["gdrdrv"], facts["nvidia"], facts["gdrdrv"]["device"]
    peermem = facts["peermem"]
    return {
        "nvidia_loaded": nvidia["loaded"],
        "gdrdrv_loaded": gdrdrv["loaded"],
        # The loaded gdrdrv is the one installed for the running kernel (a reboot into the other kernel keeps this).
        "gdrdrv_current": bool(gdrdrv["loaded"] and gdrdrv["srcversion"]
                               and gdrdrv["srcversion"] == gdrdrv["installed_srcversion"]),
        "gdrdrv_params": gdrdrv["params"],
        "device": {"ok": dev["ok"], "mode": dev["mode"], "group": dev["group"]},
        "nvidia_peermem_loaded": peermem["nvidia_peermem"]["loaded"],
        "nv_peer_mem_loaded": peermem["nv_peer_mem"]["loaded"],
        "load_order": list(facts["load_order"]),
        "modules_disabled": facts["kernel"]["modules_disabled"],
        "sig_enforce": facts["kernel"]["sig_enforce"],
    }


def state_fingerprint(facts, files):
    """What a converged host looks like, from gdrcopy_info's facts and `files` ({path: content digest, or
    'link:<target>'} for MANAGED_PATHS and every gdrdrv module). Deterministic: equal states give equal dicts."""
    mok = facts["secure_boot"]["mok"]
    src = facts["nvidia"]["source_match"]
    state = {
        "version": RECORD_VERSION,
        "live": facts["live"],
        "kernels": [{"release": k["release"], "headers": k["headers"],
                     "gdrdrv": [_module_state(m, files) for m in k["gdrdrv_modules"]]}
                    for k in facts["kernel"]["installed"]],
        "nvidia": {"version": facts["nvidia"]["version"], "flavor": facts["nvidia"]["flavor"],
                   "source": src.get("dir", ""), "source_version": src.get("version", "")},
        "builds": facts["builds"],
        "installs": facts["installs"],
        "installed_release": facts["gdrcopy"]["installed_release"],
        # CUDA decides whether the test programs are built (gdrcopy_install_tests: auto): one installed after the
        # verified run is a change.
        "cuda": {"present": facts["cuda"]["present"], "home": facts["cuda"]["home"]},
        "library": {"version": facts["library"]["version"], "paths": sorted(facts["library"]["paths"])},
        "secure_boot": {"enabled": facts["secure_boot"]["enabled"], "mok_serial": mok["serial"],
                        "mok_state": mok["state"], "pending": bool(mok["pending"])},
        "files": dict((p, d) for p, d in files.items() if not p.startswith("/lib/modules/")),
    }
    if facts["live"]:
        state["running"] = live_state(facts)
    return state


def _walk(a, b, path, out, limit):
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a:
                out.append("%s%s is new" % (path, key))
            elif key not in b:
                out.append("%s%s is gone" % (path, key))
            else:
                _walk(a[key], b[key], "%s%s." % (path, key), out, limit)
            if len(out) >= limit:
                return
    elif a != b:
        out.append("%s changed (%s -> %s)" % (path.rstrip("."), _short(a), _short(b)))


def _short(value, width=60):
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= width else text[:width - 3] + "..."


def kernels_by_release(state):
    """The fingerprint's kernel list keyed by release, so a new kernel reads as one difference, not a shift."""
    out = dict(state)
    out["kernels"] = dict((k["release"], k) for k in state.get("kernels", []))
    return out


def differences(record, state, inputs, limit=5):
    """Why a host is not converged: [] when `record` (the JSON a verified run wrote, or None) has these `inputs`
    and this `state`; else up to `limit` sentences, the first naming what changed."""
    if not record:
        return ["no record of a verified run (%s)" % RECORD_PATH]
    if record.get("version") != RECORD_VERSION:
        return ["the record was written by another version of gdrcopy-ansible"]
    out = []
    old_inputs, new_inputs = record.get("inputs") or {}, inputs or {}
    for part in sorted(set(old_inputs) | set(new_inputs)):
        if old_inputs.get(part) != new_inputs.get(part):
            out.append("the run's inputs changed: %s" % part)
    _walk(kernels_by_release(record.get("state") or {}), kernels_by_release(state), "", out, limit)
    return out[:limit]


def new_kernels(record, state, inputs):
    """The kernels installed since the verified run that wrote `record`, when they are all that changed: the same
    inputs, every new kernel with its headers, and the state without them (and without their gdrdrv builds)
    equal to the recorded one. [] otherwise. Such a host needs gdrdrv built, signed and installed for those kernels
    alone, with the driver options of that run (the kernel hook's work; gdrcopy_build's replay), and a new record."""
    if not record or record.get("version") != RECORD_VERSION or (record.get("inputs") or {}) != (inputs or {}):
        return []
    old = record.get("state") or {}
    known = set(k.get("release") for k in old.get("kernels") or [])
    new = sorted(k["release"] for k in state.get("kernels") or [] if k["release"] not in known)
    if not new or not all(k["headers"] for k in state["kernels"] if k["release"] in new):
        return []
    old_builds = old.get("builds") or {}
    rest = dict(state, kernels=[k for k in state["kernels"] if k["release"] not in new],
                builds=dict((d, b) for d, b in (state.get("builds") or {}).items()
                            if d in old_builds or d.rstrip("/").rsplit("/", 1)[-1] not in new))
    return new if kernels_by_release(rest) == kernels_by_release(old) else []


# --- the verdict of a verified host (gdrcopy_verify, its module and its action plugin) ---------------------------

def problems(smoke, tests, gdrdrv):
    """What is wrong with a verified host, each as the sentence the playbook stops with."""
    out = []
    if smoke.get("ran") and not smoke.get("passed"):
        out.append("the gdrcopy smoke check failed: %s" % smoke.get("msg", ""))
    sanity = tests.get("sanity") or {}
    if tests.get("ran") and "sanity" in tests and not sanity.get("ok"):
        out.append("gdrcopy_sanity failed on GPU %s (%s, exit code %s): %s" % (
            tests.get("gpu_id"), " ".join(sanity.get("argv") or []), sanity.get("rc"), sanity.get("msg", "")))
    device = gdrdrv.get("device") or {}
    if gdrdrv.get("loaded") and not device.get("ok"):
        out.append("gdrdrv is loaded (major %s in /proc/devices) but /dev/gdrdrv is %s: gdrdrv makes no device node "
                   "itself. Run the gdrcopy role again (--tags gdrcopy) to make it." % (
                       gdrdrv.get("major"), "a character device with major %s" % device.get("major")
                       if device.get("is_char") else ("not a character device" if device.get("exists") else "missing")))
    return out


def from_read(read, smoke=None, tests=None):
    """The verification of a host from this run's read of it (a converged host): nothing is read again."""
    smoke = smoke if smoke is not None else read.get("smoke") or {}
    tests = tests if tests is not None else read.get("tests") or {}
    result = dict(read, smoke=smoke, tests=tests, record_written=False, reboot_flag=False, changed=False)
    result["problems"] = problems(smoke, tests, read.get("gdrdrv") or {})
    return result
