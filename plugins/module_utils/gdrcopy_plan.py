# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""The gdrcopy role's plan for one host, decided in a pure function from what gdrcopy_info read and what the package
manager answered: the kernels to build for (and those that cannot be), the kernel headers to install, the NVIDIA
source, and the blockers, each as the one sentence the run stops with. The action plugin gdrcopy_plan runs it on
the controller (no Python starts on the host for it)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_upstream as UP


# The OS families the roles have package names for (roles/gdrcopy/vars/main.yml: __gdrcopy_os_packages).
OS_FAMILIES = ("Debian", "RedHat")


class Blocked(Exception):
    """The host cannot be planned for: the message says why and what to do. Nothing was changed."""


def answered(query):
    """The items a package-manager query loop (registered results) found: rc 0."""
    return [r["item"] for r in (query or {}).get("results") or [] if r.get("rc") == 0 and "item" in r]


_FIELD = re.compile(r"^(Version|Release)\s*:\s*(\S+)\s*$")


def package_versions(text):
    """Every version a package query lists, as (version to install, upstream version): one record per version, from
    `apt-cache show` ("Version: 535.261.03-1~deb12u1": the Debian revision and any epoch are not upstream's) or from
    `dnf --showduplicates info` ("Version : 535.261.03" and "Release : 1.el9": installed as version-release)."""
    found = []
    for record in re.split(r"\n\s*\n", text or ""):
        fields = dict(m.groups() for m in map(_FIELD.match, record.splitlines()) if m)
        if "Version" not in fields:
            continue
        if "Release" in fields:
            found.append(("%s-%s" % (fields["Version"], fields["Release"]), fields["Version"]))
        else:
            full = fields["Version"]
            found.append((full, full.split(":", 1)[-1].rsplit("-", 1)[0]))
    return list(dict.fromkeys(found))


def choose_source_package(source_query, candidates, driver_version):
    """The first candidate (in the package table's order) the package manager has in the driver's version, as
    (name, version to install); ("", "") when none is known at all; Blocked when some are known, none in that
    version (installing one would build gdrdrv against the wrong nv-p2p.h)."""
    listed = dict((r["item"], package_versions(r.get("stdout", ""))) for r in (source_query or {}).get("results") or []
                  if r.get("rc") == 0 and "item" in r)
    for name in candidates:
        for full, upstream in listed.get(name, []):
            if upstream == driver_version:
                return name, full
    if not listed:
        return "", ""
    raise Blocked(
        "no NVIDIA kernel source package for driver %s: the package manager has %s. Install the driver and its source "
        "from one release (or the source package in version %s by hand), or set gdrcopy_nvidia_src_dir to the "
        "directory holding nv-p2p.h for it. Nothing was changed." % (
            driver_version, "; ".join("%s %s" % (name, ", ".join(v[0] for v in listed[name]) or "(no version read)")
                                      for name in candidates if name in listed), driver_version))


# gdrcopy_backend: what maps GPU memory for the library. gdrdrv (the kernel module this collection builds, signs
# and loads), dmabuf (gdrcopy 2.6's DMA-BUF path through the CUDA driver, 13.3+: no kernel module at all), or auto.
BACKENDS = ("auto", "gdrdrv", "dmabuf")
# Who signs gdrdrv in this run (the role's signer input): nobody, a command or the controller (gdrcopy_sign_command,
# gdrcopy_controller_signer), or the mok_signing role of this run, which signs with a Machine Owner Key.
SIGNERS = ("", "command", "mok")


def gdrdrv_cannot_load(info, mode, signer):
    """Why a gdrdrv built now could not be loaded on this host, in words; '' when it can (an image loads nothing)."""
    if mode != "host":
        return ""
    kernel = info["kernel"]
    if not kernel.get("modular", True):
        return "this kernel (%s) has no loadable module support (/proc/sys/kernel/modules_disabled is absent)" % (
            kernel.get("running"))
    if kernel.get("modules_disabled"):
        return P.MODULES_DISABLED
    boot = info.get("secure_boot") or {}
    enforced = [why for why, on in (("module.sig_enforce", kernel.get("sig_enforce")),
                                    ("Secure Boot", boot.get("enabled"))) if on]
    if enforced and not signer:
        return ("module signatures are enforced here (%s) and nothing signs gdrdrv in this run (gdrcopy_sign_command "
                "is empty and the mok_signing role is off)" % ", ".join(enforced))
    if enforced and signer == "mok" and not boot.get("efi"):
        return ("module signatures are enforced here (%s) and the host has no EFI, so no Machine Owner Key can be "
                "enrolled: only keys built into the kernel are trusted" % ", ".join(enforced))
    return ""


def choose_backend(requested, info, mode, version, signer):
    """gdrcopy_backend resolved for this host -> {name: gdrdrv|dmabuf, reason, cannot_load, dmabuf (why it can or
    cannot work)}; Blocked when dmabuf is asked for where it cannot work. auto takes DMA-BUF only where gdrdrv cannot
    be loaded and the driver allows it: the library prefers gdrdrv wherever it is there."""
    cuda = (info.get("cuda") or {}).get("driver_version") or ""
    dmabuf_ok, dmabuf_why = P.dmabuf_availability(cuda, version)
    cannot = gdrdrv_cannot_load(info, mode, signer) if requested == "auto" else ""
    if requested == "dmabuf" or (cannot and dmabuf_ok):
        if not dmabuf_ok:
            raise Blocked(
                "gdrcopy_backend is dmabuf, but gdrcopy's DMA-BUF path cannot work on this host: %s. It needs gdrcopy "
                "2.6 or later and an NVIDIA driver of CUDA 13.3 or later, read from nvidia-smi on the host (an image "
                "has none running). Set gdrcopy_backend: gdrdrv or auto. Nothing was changed." % dmabuf_why)
        return {"name": "dmabuf", "cannot_load": cannot, "dmabuf": dmabuf_why, "reason": (
            "%s; gdrcopy maps GPU memory through DMA-BUF instead (%s)" % (cannot, dmabuf_why) if cannot else
            "gdrcopy_backend: dmabuf (%s)" % dmabuf_why)}
    if requested == "gdrdrv":
        reason = "gdrcopy_backend: gdrdrv"
    elif cannot:
        reason = "gdrdrv, though %s; the DMA-BUF path is not available either (%s)" % (cannot, dmabuf_why)
    else:
        reason = "gdrdrv can be loaded here, and gdrcopy's library prefers it (auto)"
    return {"name": "gdrdrv", "cannot_load": cannot, "dmabuf": dmabuf_why, "reason": reason}


def dmabuf_plan(backend, upstream, notes):
    """The plan of a DMA-BUF host: the library (and its tests) only. No kernel, headers, NVIDIA source or device
    group is needed; nothing is built, signed or loaded for the kernel."""
    return {"kernels": [], "kernels_skipped": [], "headers_to_install": [],
            "nvidia": {"dir": "", "reason": "not needed: no gdrdrv is built for the DMA-BUF backend"},
            "nvidia_source_package": "", "nvidia_source_version": "", "upstream_remove": UP.found(upstream),
            "notes": notes, "backend": backend, "planned": True}


def refuse_upstream(upstream, upstream_packages):
    """Blocked on a host with upstream's own install, unless gdrcopy_upstream_packages is replace."""
    if upstream_packages != "replace" and UP.refusal(upstream):
        raise Blocked(UP.refusal(upstream))


def plan(info, kernels, mode, group, group_create, headers_query, source_query, source_candidates, headers_package,
         upstream_packages="refuse", backend="auto", version="", signer=""):
    """-> {kernels, kernels_skipped, headers_to_install, nvidia, nvidia_source_package, nvidia_source_version,
    upstream_remove, notes, backend}; Blocked otherwise."""
    notes = []
    system = info.get("os") or {}
    if system and system.get("os_family") not in OS_FAMILIES:
        raise Blocked(
            "%s %s (OS family %s) is not supported: gdrcopy-ansible has package tables for the Debian family (proven "
            "on Debian 12 and 13; Ubuntu 22.04/24.04 unit-tested) and the RedHat family (EL 8/9, unit-tested), "
            "README: Platforms. Leave this host out of the run (--limit). Nothing was changed."
            % (system.get("distribution") or "this OS", system.get("distribution_version") or "",
               system.get("os_family") or "unknown"))
    chosen_backend = choose_backend(backend, info, mode, version, signer)
    upstream = info.get("upstream") or {}
    if chosen_backend["name"] == "dmabuf":
        refuse_upstream(upstream, upstream_packages)  # its libgdrapi would shadow ours, whatever the backend
        return dmabuf_plan(chosen_backend, upstream, notes)
    no_dmabuf = "" if backend == "gdrdrv" else (
        " Nor can gdrcopy's DMA-BUF path replace gdrdrv here (%s)." % chosen_backend["dmabuf"])
    kernel = info["kernel"]
    if mode == "host" and not kernel.get("modular", True):
        raise Blocked(
            "this kernel (%s) has no loadable module support (/proc/sys/kernel/modules_disabled is absent): gdrdrv "
            "cannot be loaded here. Run against a host with a modular kernel, or set gdrcopy_mode: image to build and "
            "install for the kernels installed on this system without loading anything.%s" % (
                kernel.get("running"), no_dmabuf))
    if mode == "host" and kernel.get("modules_disabled"):
        raise Blocked(
            P.MODULES_DISABLED + ": gdrdrv cannot be loaded until reboot; find what sets it (sysctl.d, a hardening "
            "service) and boot without it, or set gdrcopy_mode: image to build and install now and load at the next "
            "boot." + no_dmabuf)
    if not (group_create or (info.get("groups") or {}).get(group)):
        raise Blocked(
            'gdrcopy_device_group "%s" does not exist on this host and gdrcopy_device_group_create is false: create '
            "the group first (groupadd --system %s), name an existing one, or set gdrcopy_device_group_create: true. "
            "Nothing was changed." % (group, group))
    refuse_upstream(upstream, upstream_packages)
    if UP.found(upstream):
        notes.append("upstream's gdrcopy install is removed first (gdrcopy_upstream_packages: replace): %s"
                     % P.upstream_summary(upstream))
    hook = info.get("kernel_hook") or {}
    if not hook.get("ok", True):
        notes.append("the kernel hook failed for %s at %s: %s. This run builds what is missing." % (
            hook.get("kernel"), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(hook.get("time") or 0)),
            hook.get("msg")))
    installed = [k["release"] for k in kernel["installed"]]
    missing = [k for k in kernels if k not in installed]
    if missing:
        raise Blocked(
            "gdrcopy_kernels lists %s, not installed on this host (installed: %s). Install the kernel first, or leave "
            "gdrcopy_kernels empty to build for every installed kernel." % (
                ", ".join(missing), ", ".join(installed) or "none"))
    targets = kernels or installed
    with_headers = [k["release"] for k in kernel["installed"] if k.get("headers")]
    installable = answered(headers_query)
    buildable = with_headers + installable
    chosen = [k for k in targets if k in buildable]
    skipped = [k for k in targets if k not in buildable]
    if skipped:
        one = len(skipped) == 1
        notes.append(
            "no headers for %s, and the package manager has none to install (%s): gdrdrv is not built for %s, and "
            "will not load when the host boots %s. Install the headers by hand, or remove the kernel." % (
                ", ".join(skipped), headers_package, "it" if one else "them", "it" if one else "one of them"))
    if (kernels and skipped) or not chosen:
        raise Blocked(
            "no kernel to build gdrdrv for: %s has no headers and none can be installed (%s). Install the kernel "
            "headers, then run again." % (", ".join(skipped) or "no kernel is installed", headers_package))
    nvidia = info["nvidia"]
    match = nvidia.get("source_match") or {}
    package, package_version = ("", "") if "dir" in match else choose_source_package(
        source_query, source_candidates, nvidia.get("version") or "")
    if "dir" not in match and not package:
        raise Blocked(
            "%s%s. gdrdrv is built against the NVIDIA kernel source of the installed driver: install the "
            "distribution's source package (%s) or the driver's DKMS source, or set gdrcopy_nvidia_src_dir to the "
            "directory holding nv-p2p.h." % (
                match.get("reason", "no NVIDIA kernel source found"),
                "" if nvidia.get("version") else
                " (no NVIDIA driver found: nothing is loaded and modinfo finds no nvidia module)",
                " or ".join(source_candidates) or "none is known for this driver"))
    if mode == "host" and not nvidia.get("version"):
        raise Blocked(
            "no NVIDIA driver on this host (no nvidia module loaded, and modinfo finds none for the installed "
            "kernels): gdrdrv needs nvidia.ko to load. Install the NVIDIA driver first, or set gdrcopy_mode: image "
            "to build without loading.")
    return {"kernels": chosen, "kernels_skipped": skipped, "headers_to_install": installable, "nvidia": match,
            "nvidia_source_package": package, "nvidia_source_version": package_version,
            "upstream_remove": UP.found(upstream), "notes": notes, "backend": chosen_backend, "planned": True}
