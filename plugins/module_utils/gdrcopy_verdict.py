# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""The verdict on a host's gdrcopy state: every blocker and concern at once, each a finding with a stable code, a
sentence about this host and a remedy that fits its class of host. Pure functions of gdrcopy_info's facts
(module_utils/gdrcopy_facts.gather); the fleet report (module_utils/gdrcopy_report) groups hosts by the codes.

A finding is {code, severity (blocker|concern), text, remedy}. CODES is the one table of the codes, with the short
title the fleet report groups under and the remedy a finding takes unless it brings its own; docs/STATUS-REPORT.md
lists it, and a unit test keeps the two the same."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P

RUN_SITE = "run site.yml"
DMABUF_WAY = "or use gdrcopy 2.6's DMA-BUF backend (gdrcopy_backend: dmabuf), which needs no kernel module but a CUDA " \
             "driver of 13.3 or later"
# code: (severity, title, remedy)
CODES = {
    # --- blockers: gdrcopy does not work on the host now --------------------------------------------------------
    "no_status": ("blocker", "no status came back",
                  "the host failed in an earlier play of this run or was unreachable: run playbooks/status.yml alone "
                  "for its full status"),
    "no_nvidia_driver": ("blocker", "no NVIDIA driver", "install the NVIDIA driver first, then " + RUN_SITE),
    "modules_disabled": ("blocker", "module loading disabled",
                         "find what writes 1 to kernel.modules_disabled (a sysctl.d file, a hardening service) and "
                         "reboot without it, " + DMABUF_WAY),
    "no_module_tree": ("blocker", "kernel without a module tree",
                       "the running kernel came from outside this host (a VM's or container host's kernel): gdrdrv "
                       "must be built and shipped with that kernel by whoever provides it, " + DMABUF_WAY),
    "no_kmod_tools": ("blocker", "no kmod tools",
                      "install kmod (modprobe, modinfo, depmod); the gdrcopy role installs it where the host's "
                      "kernel is managed from here"),
    "sig_enforced_no_efi": ("blocker", "signatures enforced without EFI",
                            "no Machine Owner Key can be enrolled without EFI: only a key built into the kernel can "
                            "sign gdrdrv, so it must come signed with the kernel (its builder's key), or boot without "
                            "enforcement where policy allows, " + DMABUF_WAY),
    "gdrdrv_not_installed": ("blocker", "gdrdrv not installed",
                             RUN_SITE + ": it builds gdrdrv for every installed kernel that has its headers"),
    "gdrdrv_not_loaded": ("blocker", "gdrdrv not loaded",
                          "modprobe gdrdrv (the role's modprobe.d line makes /dev/gdrdrv), or " + RUN_SITE),
    "no_device_node": ("blocker", "no /dev/gdrdrv",
                       "run the gdrcopy role (--tags gdrcopy): gdrdrv makes no device node itself, the role makes it "
                       "after every load"),
    "wrong_device_node": ("blocker", "stale /dev/gdrdrv",
                          "run the gdrcopy role (--tags gdrcopy): the node is from an earlier load (the major "
                          "number is dynamic)"),
    "dmabuf_unavailable": ("blocker", "no DMA-BUF path either",
                           "gdrcopy 2.6 maps GPU memory without gdrdrv only with a CUDA driver of 13.3 or later: "
                           "upgrade the NVIDIA driver, or fix the gdrdrv blockers"),
    "dmabuf_configured_unavailable": ("blocker", "DMA-BUF backend no longer possible",
                                      "run the gdrcopy role again with gdrcopy_backend: gdrdrv or auto, or bring the "
                                      "driver back to CUDA 13.3 or later"),
    "no_library": ("blocker", "libgdrapi not installed", RUN_SITE),
    "unsigned_enforced": ("blocker", "gdrdrv unsigned under enforcement",
                          "enable the mok_signing role so that gdrdrv is signed with an enrolled key"),
    "key_not_enrolled": ("blocker", "signing key not enrolled",
                         "confirm the MOK enrollment at the console (MokManager) during the next boot; the "
                         "mok_signing role imports the request again if it lapsed"),
    "key_blocked": ("blocker", "signing key blocked",
                    "the firmware or MOK denylist refuses the key: sign with another one (mok_signing_key_source)"),
    "fabric_manager_inactive": ("blocker", "GPU fabric not ready",
                                "start the NVIDIA Fabric Manager (nvidia-fabricmanager, at the driver's version): "
                                "on NVSwitch systems the GPUs cannot be used until their fabric registration "
                                "completes, and gdrcopy's tests fail"),
    "smoke_failed": ("blocker", "smoke check failed",
                     "gdr_open through the installed library failed, or its versions are not the pinned release: "
                     "read the smoke message, then " + RUN_SITE),
    "sanity_failed": ("blocker", "gdrcopy_sanity failed",
                      "gdrcopy's own tests failed on the GPU: playbooks/verify.yml names every failed test"),
    # --- concerns: gdrcopy works, something is degraded or will break later --------------------------------------
    "dmabuf_fallback": ("concern", "DMA-BUF instead of gdrdrv",
                        "nothing is needed for gdrcopy; set gdrcopy_backend: dmabuf to make it the plan, or fix "
                        "gdrdrv to use it"),
    "modules_disabled_update": ("concern", "gdrdrv cannot be updated",
                                "gdrdrv works now, but loading another one (an update) needs a reboot"),
    "gdrdrv_reload_pending": ("concern", "gdrdrv reload pending",
                              "stop what holds /dev/gdrdrv, or reboot: the installed gdrdrv replaces the loaded one"),
    "flavor_mismatch": ("concern", "gdrdrv for the other driver flavor",
                        RUN_SITE + ": a gdrdrv built for the other flavor does not load after the next boot"),
    "device_world_access": ("concern", "/dev/gdrdrv open to every user",
                            "use mode 0660 and a group (gdrcopy_device_mode, gdrcopy_device_group), or say so on "
                            "purpose with gdrcopy_device_world_access: true"),
    "version_skew": ("concern", "library and driver releases differ", RUN_SITE + " to install and load one release"),
    "release_mismatch": ("concern", "not the pinned release", RUN_SITE + " to install the pinned release"),
    "pcie_link_narrow": ("concern", "PCIe link narrower than it can be",
                         "reseat the card, check risers and the BIOS bifurcation setting: copies to and from the GPU "
                         "get slower"),
    "bar1_full": ("concern", "BAR1 nearly full",
                  "find the process that holds the mappings, or enable resizable BAR / a larger BAR1 in the BIOS"),
    "numa_no_rdma": ("concern", "GPU without an RDMA device on its NUMA node",
                     "place NICs and GPUs on the same NUMA node, or pin jobs accordingly"),
    "nvlink_inactive": ("concern", "NVLinks inactive",
                        "check the NVLink bridges or the baseboard (nvidia-smi nvlink -s); peer traffic falls back to "
                        "PCIe"),
    "nv_peer_mem_loaded": ("concern", "legacy nv_peer_mem loaded", "set nvidia_peermem_legacy_nv_peer_mem: remove"),
    "no_peer_memory_api": ("concern", "inbox RDMA stack without peer memory",
                           "nvidia-peermem needs MLNX_OFED's or DOCA-OFED's ib_core; or use DMA-BUF for GPUDirect "
                           "RDMA (open NVIDIA modules)"),
    "peermem_not_loaded": ("concern", "nvidia-peermem not loaded",
                           "run the nvidia_peermem role (nvidia_peermem_state: present)"),
    "kernel_without_gdrdrv": ("concern", "a kernel without gdrdrv",
                              "install that kernel's headers and " + RUN_SITE),
    "refused_at_next_load": ("concern", "gdrdrv refused at its next load",
                             "enable the mok_signing role, or enroll its key, before that kernel boots or gdrdrv is "
                             "loaded again"),
    "awaiting_signature": ("concern", "built, awaiting signature",
                           RUN_SITE + ": the controller signs the build and installs it"),
    "mok_pending": ("concern", "MOK enrollment pending",
                    "confirm it at the console (MokManager) during the next boot: a request lasts one boot"),
    "cert_not_enrolled": ("concern", "certificate not enrolled",
                          "run the mok_signing role (it imports the certificate) and confirm at the console"),
    "upstream_install": ("concern", "upstream's install beside ours",
                         "remove it: gdrcopy_upstream_packages: replace"),
    "duplicate_gdrdrv": ("concern", "two gdrdrv builds for one kernel",
                         "remove the one this project did not install (gdrcopy_upstream_packages: replace)"),
    "reboot_required": ("concern", "reboot required", "reboot the host to load the new gdrdrv"),
    "reload_pending": ("concern", "gdrdrv reload pending", "stop what holds /dev/gdrdrv, or reboot"),
    "mok_enrollment_pending": ("concern", "MOK enrollment pending",
                               "confirm it at the console (MokManager) during the next boot"),
    # --- a saved gdrcopy_info result from before the codes: its sentences, unclassified -------------------------
    "other_blocker": ("blocker", "other blocker", "read the sentence; run playbooks/status.yml for a coded verdict"),
    "other_concern": ("concern", "other concern", "read the sentence; run playbooks/status.yml for a coded verdict"),
}
SEVERITIES = ("blocker", "concern")


def finding(code, text, remedy=None):
    """A finding of CODES' code: its severity and remedy from the table unless the remedy is given."""
    severity, dummy, default = CODES[code]
    return {"code": code, "severity": severity, "text": text, "remedy": remedy or default}


def title(code):
    return CODES[code][1]


# --- the host's class: what a remedy can ask of it -----------------------------------------------------------

def managed_elsewhere(facts):
    """Whether the running kernel is provided from outside the host (no module tree for it, or no kmod tools):
    a cloud VM, a container host's kernel. Remedies that need a reboot with other settings do not fit there."""
    k = facts["kernel"]
    return facts["live"] and (not k["running_installed"] or not facts["tools"].get("modprobe"))


# --- signatures ------------------------------------------------------------------------------------------------

LOCKDOWN_ENFORCING = ("integrity", "confidentiality")


def enforcement(kernel, running_config, live):
    """What makes the running kernel refuse an unsigned module: ['module.sig_enforce=Y', 'CONFIG_MODULE_SIG_FORCE',
    'lockdown=integrity', ...]; empty when nothing does (or for an image)."""
    if not live:
        return []
    out = []
    if kernel["sig_enforce"]:
        out.append("module.sig_enforce=Y")
    if running_config.get("sig_force"):
        out.append("CONFIG_MODULE_SIG_FORCE")
    if kernel.get("lockdown") in LOCKDOWN_ENFORCING:
        out.append("lockdown=" + kernel["lockdown"])
    elif running_config.get("lockdown_force") in LOCKDOWN_ENFORCING:
        out.append("CONFIG_LOCK_DOWN_KERNEL_FORCE_" + running_config["lockdown_force"].upper())
    return out


def accepted(mod, enforced, mok, keyring_names):
    """Whether the running kernel loads this gdrdrv module file as far as its signature goes -> (True|False|None,
    why). None: not known from here (signed by a key that is not ours, and the kernel's keyrings are not readable
    or do not name it)."""
    if not mod:
        return None, "no gdrdrv installed for the running kernel"
    if not enforced:
        return True, "signatures are not enforced: the kernel loads %s module" % (
            "an unsigned (tainting)" if mod["signed"] is False else "any")
    if mod["signed"] is False:
        return False, "unsigned, and signatures are enforced"
    if mod["signed"] is None:
        return None, "whether it is signed is not known here (no modinfo, a compressed module)"
    if mod.get("ours"):
        state = mok.get("state")
        if state in ("enrolled", "in_db"):
            return True, "signed by our key, which is enrolled"
        if state in ("not_enrolled", "pending", "blocked"):
            return False, "signed by our key, which is %s" % {
                "not_enrolled": "not enrolled", "pending": "only pending enrollment", "blocked": "blocked"}[state]
        return None, "signed by our key; its MOK state is unknown (%s)" % (mok.get("detail") or "no mokutil")
    signer = mod.get("signer") or ""
    if signer and signer in keyring_names:
        return True, "signed by %s, a key the kernel holds (/proc/keys)" % signer
    return None, "signed by %s, which this host cannot confirm the kernel trusts" % (signer or "an unknown key")


def signing_state(facts, keyring_names=()):
    """The running kernel's signature policy and the gdrdrv it would load: {enforced, enforced_by, hash, efi,
    secure_boot, lockdown, gdrdrv: {path, signer, sig_key, hash, ours, accepted, why}}."""
    k = facts["kernel"]
    conf = k.get("running_config") or {}
    by = enforcement(k, conf, facts["live"])
    mod = running_gdrdrv(facts)
    ok, why = accepted(mod, bool(by), facts["secure_boot"]["mok"], set(keyring_names))
    return {"enforced": bool(by), "enforced_by": by, "hash": conf.get("sig_hash", ""), "efi": k["efi"],
            "secure_boot": facts["secure_boot"]["enabled"], "lockdown": k.get("lockdown", ""),
            "gdrdrv": {"path": mod.get("path", ""), "signer": mod.get("signer", ""), "sig_key": mod.get("sig_key", ""),
                       "hash": mod.get("sig_hashalgo", ""), "ours": mod.get("ours"), "accepted": ok, "why": why}}


def running_gdrdrv(facts):
    """The gdrdrv module file of the running kernel (or, for an image, of its newest kernel), or {}."""
    kernel = facts.get("kernel", {})
    installed = kernel.get("installed", [])
    match = [k for k in installed if k["release"] == kernel.get("running")] or installed[-1:]
    modules = match[0].get("gdrdrv_modules", []) if match else []
    return modules[0] if modules else {}


# --- gdrdrv on the running host --------------------------------------------------------------------------------

def gdrdrv_problems(facts):
    """Every reason gdrdrv cannot serve gdr_open on a live host right now, as blocker findings ([] when it can).
    All of them at once: on a host with module loading disabled, the missing module tree, the missing kmod tools and
    an enforcement without EFI are as much in the way."""
    k, g = facts["kernel"], facts["gdrdrv"]
    dev = g["device"]
    out = []
    if g["loaded"]:
        if not dev["exists"]:
            out.append(finding("no_device_node", "gdrdrv is loaded but /dev/gdrdrv does not exist (gdrdrv makes no "
                                                 "device node itself)"))
        elif not dev["ok"]:
            out.append(finding("wrong_device_node", "/dev/gdrdrv is not gdrdrv's device: it is %s %d:%d, "
                                                    "/proc/devices gives gdrdrv major %d" % (
                                                        "char" if dev["is_char"] else "not a char device,",
                                                        dev["major"], dev["minor"], g["major"])))
        return out
    elsewhere = managed_elsewhere(facts)
    if k["modules_disabled"]:
        out.append(finding("modules_disabled", P.MODULES_DISABLED + ": gdrdrv cannot be loaded until reboot",
                           CODES["no_module_tree"][2] if elsewhere else None))
    if not k["running_installed"]:
        out.append(finding("no_module_tree", "gdrdrv is not loaded, and the running kernel %s has no module tree "
                                             "under /lib/modules to install it in" % k["running"]))
    if not facts["tools"].get("modprobe"):
        out.append(finding("no_kmod_tools", "no kmod tools (modprobe, modinfo, depmod) on this host: nothing can "
                                            "install or load gdrdrv", CODES["no_module_tree"][2] if not
                           k["running_installed"] else None))
    sign = facts.get("signing") or {}
    if sign.get("enforced") and not k["efi"] and sign["gdrdrv"]["accepted"] is not True:
        out.append(finding("sig_enforced_no_efi", "module signatures are enforced on %s (%s) and the host has no "
                                                  "EFI: no Machine Owner Key can be enrolled, so only a key built "
                                                  "into that kernel can sign gdrdrv" % (
                                                      k["running"], ", ".join(sign["enforced_by"]))))
    if out:
        return out
    running = [x for x in k["installed"] if x["release"] == k["running"]]
    if running and not running[0]["gdrdrv"]:
        return [finding("gdrdrv_not_installed", "gdrdrv is not installed for the running kernel %s" % k["running"])]
    return [finding("gdrdrv_not_loaded", "gdrdrv is installed for the running kernel %s but not loaded" % k["running"])]


def gdrdrv_problem(facts):
    """The first reason gdrdrv cannot serve gdr_open, in words ('' when it can): the backend's reason."""
    problems = gdrdrv_problems(facts)
    return problems[0]["text"] if problems else ""


def runtime_findings(facts):
    """NVIDIA driver, gdrdrv, device node, library, backend."""
    out = []
    problems, backend = gdrdrv_problems(facts), facts["backend"]
    if not facts["nvidia"]["version"]:
        out.append(finding("no_nvidia_driver", "no NVIDIA driver is loaded or installed: gdrcopy needs it (gdrdrv "
                                               "needs nvidia.ko)"))
    elif backend.get("configured") == "dmabuf" and problems:
        if backend["active"] != "dmabuf":  # the driver went below 13.3, or the library below 2.6, since the install
            out.append(finding("dmabuf_configured_unavailable", "gdrcopy_backend is dmabuf, but the DMA-BUF path "
                                                                "cannot work here now: %s" % backend["dmabuf"]["reason"]))
    elif problems and backend["active"] == "dmabuf":
        out.append(finding("dmabuf_fallback", "%s; gdrcopy uses its DMA-BUF path instead (%s)" % (
            problems[0]["text"], backend["dmabuf"]["reason"])))
    elif problems:
        out.extend(problems)
        out.append(finding("dmabuf_unavailable", "the 2.6 DMA-BUF path cannot replace gdrdrv here: "
                           + backend["dmabuf"]["reason"]))
    if facts["tools"].get("ldconfig") and not facts["library"]["version"]:
        out.append(finding("no_library", "libgdrapi is not installed (ldconfig knows no libgdrapi.so.2)"))
    out.extend(gdrdrv_concerns(facts))
    out.extend(version_concerns(facts))
    return out


def gdrdrv_concerns(facts):
    g, k, nv = facts["gdrdrv"], facts["kernel"], facts["nvidia"]
    out = []
    if not g["loaded"]:
        return out
    if k["modules_disabled"]:
        out.append(finding("modules_disabled_update", P.MODULES_DISABLED + ": gdrdrv cannot be reloaded or updated "
                                                                           "until reboot"))
    if g["srcversion"] and g["installed_srcversion"] and g["srcversion"] != g["installed_srcversion"]:
        out.append(finding("gdrdrv_reload_pending", "the loaded gdrdrv (srcversion %s) is not the installed one (%s): "
                                                    "a reload or reboot is pending" % (
                                                        g["srcversion"], g["installed_srcversion"])))
    flavor = g["params"].get("flavor")
    if flavor and nv["flavor"] and flavor != nv["flavor"]:
        out.append(finding("flavor_mismatch", "gdrdrv was built for the %s NVIDIA driver but the %s one is loaded"
                           % (flavor, nv["flavor"])))
    text = device_access_concern(g["device"]["mode"])
    if text:
        out.append(finding("device_world_access", text))
    return out


def device_access_concern(mode):
    """The sentence for the mode of the node as found (octal text, "" when there is no node) when it is open to
    others, else ""."""
    if not mode or not P.open_to_others(int(mode, 8)):
        return ""
    return ("/dev/gdrdrv gives every local user access (mode %s): read access alone lets them pin and map GPU "
            "memory" % mode)


def version_concerns(facts):
    gc = facts["gdrcopy"]
    out = []
    if gc["skew"]:
        out.append(finding("version_skew", "libgdrapi %s and the loaded gdrdrv %s are different releases" % (
            gc["library_version"], gc["driver_version"])))
    pinned = P.major_minor(gc["release"])
    if pinned and gc["library_version"] and pinned != P.major_minor(gc["library_version"]):
        out.append(finding("release_mismatch", "libgdrapi %s is installed but the pinned release is %s" % (
            gc["library_version"], gc["release"])))
    return out


BAR1_WARN_PCT = 90
FABRIC_DONE = ("completed", "n/a", "")
FABRIC_OK = ("success", "n/a", "")


def gpu_findings(gpus, rdma):
    """A PCIe link narrower than it can be, BAR1 nearly full, no RDMA NIC on a GPU's NUMA node, inactive NVLinks, a
    GPU fabric not registered (blocker). A lower link *speed* is not flagged: GPUs slow their link down when idle."""
    out = []
    for gpu in gpus:
        name = "GPU %s (%s)" % (gpu["index"], gpu["bus_id"])
        width, max_width = gpu["link"]["width"], gpu["link"]["max_width"]
        if width and max_width and width < max_width:
            out.append(finding("pcie_link_narrow", "%s runs its PCIe link at x%d of x%d" % (name, width, max_width)))
        pct = gpu["bar1_used_pct"]
        if pct is not None and pct >= BAR1_WARN_PCT:
            out.append(finding("bar1_full", "BAR1 of GPU %s is %d%% used (%d of %d MiB): gdrcopy cannot pin more GPU "
                                            "memory once it is full" % (gpu["index"], pct, gpu["bar1_used_mib"],
                                                                        gpu["bar1_total_mib"])))
        fabric = gpu.get("fabric") or {}
        state, status = (fabric.get("state") or "").lower(), (fabric.get("status") or "").lower()
        if state not in FABRIC_DONE or status not in FABRIC_OK:
            out.append(finding("fabric_manager_inactive", "the fabric of %s is not ready (state %s, status %s)" % (
                name, fabric.get("state") or "-", fabric.get("status") or "-")))
        links = gpu.get("nvlink") or {}
        if links.get("inactive"):
            out.append(finding("nvlink_inactive", "%s has %d of %d NVLinks inactive" % (
                name, links["inactive"], links["inactive"] + links["active"])))
    out.extend(finding("numa_no_rdma", "%s is on NUMA node %d but no RDMA device is (%s): GPUDirect RDMA traffic "
                                       "crosses the CPU interconnect" % (m["gpu"], m["numa_node"], m["rdma"]))
               for m in P.numa_mismatches(gpus, rdma))
    return out


def peermem_findings(facts):
    """The legacy nv_peer_mem, nvidia-peermem missing where it is useful."""
    pm = facts["peermem"]
    out = []
    if pm["nv_peer_mem"]["loaded"]:
        out.append(finding("nv_peer_mem_loaded", "the deprecated nv_peer_mem is loaded: it conflicts with "
                                                 "nvidia-peermem"))
    if not facts["rdma"] or pm["nvidia_peermem"]["loaded"]:
        return out
    if pm["ib_core"]["peer_memory_api"] is False:
        out.append(finding("no_peer_memory_api", "RDMA devices are present but ib_core has no peer-memory API (inbox "
                                                 "RDMA stack): nvidia-peermem cannot load, so NICs cannot register GPU "
                                                 "memory (gdrcopy itself does not need it)"))
    elif not pm["nv_peer_mem"]["loaded"]:
        out.append(finding("peermem_not_loaded", "nvidia-peermem is not loaded: RDMA NICs cannot register GPU memory "
                                                 "(gdrcopy itself does not need it)"))
    return out


def kernel_findings(facts):
    """Installed kernels that would boot without a usable gdrdrv."""
    kernels = facts["kernel"]["installed"]
    if not any(k["gdrdrv"] for k in kernels):
        return []  # gdrcopy is not installed at all: nothing to compare against
    return [finding("kernel_without_gdrdrv", "kernel %s has no gdrdrv%s: gdrcopy has no driver after booting it" % (
        k["release"], "" if k["headers"] else " (its headers are not installed)")) for k in kernels if not k["gdrdrv"]]


def signing_findings(facts):
    """Module signatures, Secure Boot and the MOK."""
    out = []
    k, sb = facts["kernel"], facts["secure_boot"]
    mok = sb["mok"]
    for kern in k["installed"]:
        enforced = kern["sig_force"] or (facts["live"] and kern["release"] == k["running"] and k["sig_enforce"])
        if not enforced:
            continue
        for mod in kern["gdrdrv_modules"]:
            problem = P.signature_problem(mod, mok)
            if not problem:
                continue
            sentence = "module signatures are enforced on %s and gdrdrv (%s) %s" % (kern["release"], mod["path"],
                                                                                    problem)
            if not (facts["live"] and kern["release"] == k["running"] and not facts["gdrdrv"]["loaded"]):
                out.append(finding("refused_at_next_load", sentence))
            elif mod["signed"] is False:
                out.append(finding("unsigned_enforced", sentence))
            else:
                out.append(finding("key_blocked" if mok["state"] == "blocked" else "key_not_enrolled", sentence))
    for release in facts.get("awaiting_signature") or []:
        out.append(finding("awaiting_signature", "gdrdrv for %s is built, awaiting signature: the controller signs "
                                                 "(mok_signing_sign_on_controller) and installs it at the next run of "
                                                 "site.yml; until then %s boots without it" % (release, release)))
    if mok["pending"]:
        out.append(finding("mok_pending", "a MOK enrollment is pending (%s): confirm it at the console (MokManager) "
                                          "during the next boot" % ", ".join(mok["pending"])))
    if mok["state"] == "blocked":
        out.append(finding("key_blocked", "the certificate %s is blocked by the firmware or MOK denylist (%s): modules "
                                          "it signs never load under Secure Boot" % (
                                              mok["cert"], mok.get("detail", "").strip())))
    if sb["enabled"] and mok["state"] == "not_enrolled":
        out.append(finding("cert_not_enrolled", "Secure Boot is on and the certificate %s is not enrolled: modules it "
                                                "signs will not load" % mok["cert"]))
    return out


def upstream_findings(facts):
    """Upstream's gdrcopy install beside this project's, and two gdrdrv builds for one kernel."""
    out = []
    found = P.upstream_summary(facts.get("upstream") or {})
    if found:
        out.append(finding("upstream_install", "upstream's gdrcopy install is on this host (%s): its gdrdrv, init "
                                               "script or unit can load another gdrdrv or make /dev/gdrdrv "
                                               "world-writable (mknod -m 666)" % found))
    for k in facts["kernel"]["installed"]:
        if len(k["gdrdrv"]) > 1:
            out.append(finding("duplicate_gdrdrv", "kernel %s has %d gdrdrv builds installed (%s): which one modprobe "
                                                   "loads depends on depmod's order" % (
                                                       k["release"], len(k["gdrdrv"]), ", ".join(k["gdrdrv"]))))
    return out


def assess(facts):
    """-> (findings, blockers, concerns, health) for gathered facts: a live host is judged on what runs now, an
    image on what it will boot with. blockers and concerns are the findings' sentences."""
    found = upstream_findings(facts)
    if facts["live"]:
        found += runtime_findings(facts)
        found += gpu_findings(facts["gpus"], facts["rdma"])
        found += peermem_findings(facts)
    found += kernel_findings(facts)
    found += signing_findings(facts)
    found = unique(found)
    blockers = [f["text"] for f in found if f["severity"] == "blocker"]
    concerns = [f["text"] for f in found if f["severity"] == "concern"]
    return found, blockers, concerns, health(found)


def unique(found):
    seen, out = set(), []
    for f in found:
        if (f["code"], f["text"]) not in seen:
            seen.add((f["code"], f["text"]))
            out.append(f)
    return out


def remedies_once(found):
    """[(finding, remedy)] with a remedy said before in the list left empty: on a host whose kernel comes from
    elsewhere, three blockers share one remedy, said once."""
    seen, out = set(), []
    for f in found:
        out.append((f, "" if f["remedy"] in seen else f["remedy"]))
        seen.add(f["remedy"])
    return out


def health(found):
    severities = set(f["severity"] for f in found)
    return "red" if "blocker" in severities else ("amber" if severities else "green")
