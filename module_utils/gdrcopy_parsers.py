# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Pure parsers for what a host says about gdrcopy, the NVIDIA driver and its kernels.

No I/O here: every function takes text (a file's content or a command's output) and returns plain data, so
unit tests feed them captured text from real hosts (tests/unit, ../shared/fixtures/hosts).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

NVIDIA_VERSION_RE = re.compile(r"\b(\d{3,}\.\d+(?:\.\d+)?)\b")


def version_tuple(text):
    """'535.261.03' -> (535, 261, 3); anything that is not dotted numbers -> ()."""
    if not text or not re.match(r"^\d+(\.\d+)*$", text.strip()):
        return ()
    return tuple(int(p) for p in text.strip().split("."))


def major_minor(version):
    """'2.6' / '2.4.1' / 'v2.5.2' -> '2.6' / '2.4' / '2.5'; '' when it is not a version."""
    m = re.match(r"^v?(\d+)\.(\d+)", (version or "").strip())
    return "%s.%s" % (m.group(1), m.group(2)) if m else ""


def parse_nvidia_proc_version(text):
    """/proc/driver/nvidia/version -> {'version': '580.159.04', 'flavor': 'open'|'proprietary'} or {}.

    Open:        NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...
    Proprietary: NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03  Release Build ...
    """
    for line in (text or "").splitlines():
        if line.startswith("NVRM version:"):
            m = NVIDIA_VERSION_RE.search(line.split(":", 1)[1])
            if not m:
                return {}
            flavor = "open" if "Open Kernel Module" in line else "proprietary"
            return {"version": m.group(1), "flavor": flavor}
    return {}


def flavor_from_license(license_text):
    """MODULE_LICENSE of nvidia.ko / nv-frontend.c -> flavor. The open modules are GPL-compatible."""
    if not license_text:
        return ""
    return "open" if "GPL" in license_text else "proprietary"


def parse_module_license(source_text):
    """The MODULE_LICENSE("...") string of a C source file, or ''."""
    m = re.search(r'MODULE_LICENSE\(\s*"([^"]+)"\s*\)', source_text or "")
    return m.group(1) if m else ""


def parse_dkms_conf_version(text):
    """PACKAGE_VERSION from a dkms.conf, or ''."""
    m = re.search(r'^\s*PACKAGE_VERSION\s*=\s*"?([^"\s]+)"?', text or "", re.M)
    return m.group(1) if m else ""


def nvidia_source_version_from_path(path):
    """/usr/src/nvidia-current-535.261.03/nvidia, /usr/src/nvidia-570.86.15, kernel-modules/nvidia-550.1 -> version."""
    for part in reversed((path or "").rstrip("/").split("/")):
        m = re.match(r"^nvidia(?:-[a-z]+)*-(\d{3,}\.\d+(?:\.\d+)?)$", part)
        if m:
            return m.group(1)
    return ""


def choose_nvidia_source(trees, driver_version, driver_flavor):
    """Pick the NVIDIA source tree matching the installed driver.

    trees: [{'dir': '<dir holding nv-p2p.h>', 'version': '535.261.03', 'flavor': 'proprietary'}, ...]
    Returns (tree or None, reason). Exact version and flavor wins; with no driver known, a single tree is
    taken as is; several trees and no driver is ambiguous.
    """
    if not trees:
        return None, "no NVIDIA kernel source tree (nv-p2p.h) was found"
    if driver_version:
        exact = [t for t in trees if t.get("version") == driver_version
                 and (not driver_flavor or t.get("flavor") == driver_flavor)]
        if exact:
            return sorted(exact, key=lambda t: t["dir"])[0], "matches the installed driver %s (%s)" % (
                driver_version, driver_flavor or "flavor unknown")
        return None, "no NVIDIA source tree matches the installed driver %s (%s); found: %s" % (
            driver_version, driver_flavor or "flavor unknown",
            ", ".join("%s (%s %s)" % (t["dir"], t.get("version") or "?", t.get("flavor") or "?") for t in trees))
    if len(trees) == 1:
        return trees[0], "the only NVIDIA source tree on the host (no installed driver to match)"
    return None, "several NVIDIA source trees and no installed driver to choose by: %s; set gdrcopy_nvidia_src_dir" % (
        ", ".join(t["dir"] for t in trees))


def parse_proc_devices(text):
    """/proc/devices -> {'char': {name: major}, 'block': {name: major}} (first major wins for a name)."""
    out = {"char": {}, "block": {}}
    section = None
    for line in (text or "").splitlines():
        if line.startswith("Character devices"):
            section = "char"
        elif line.startswith("Block devices"):
            section = "block"
        elif section:
            parts = line.split(None, 1)
            if len(parts) == 2 and parts[0].isdigit():
                out[section].setdefault(parts[1].strip(), int(parts[0]))
    return out


def parse_proc_modules(text):
    """/proc/modules -> {name: {'size': int, 'refcount': int, 'used_by': [..], 'state': 'Live', 'taints': ''}}."""
    mods = {}
    for line in (text or "").splitlines():
        f = line.split()
        if len(f) < 5:
            continue
        used_by = [u for u in f[3].rstrip(",").split(",") if u and u != "-"]
        taints = f[6].strip("()") if len(f) > 6 and f[6].startswith("(") else ""
        mods[f[0]] = {"size": int(f[1]), "refcount": int(f[2]) if f[2].lstrip("-").isdigit() else -1,
                      "used_by": used_by, "state": f[4], "taints": taints}
    return mods


def parse_gdrdrv_params(text):
    """/proc/driver/gdrdrv/params (gdrdrv 2.5+) -> normalised dict.

    Upstream 2.6 prints: 'Version: 2.6', 'Built for NVIDIA driver flavor: opensource|proprietary',
    'Use persistent mapping: yes|no', 'dbg_enabled: 0', 'info_enabled: 0'. Lines are 'key: value'. Known keys are normalised: version, flavor, use_persistent_mapping, dbg_enabled,
    info_enabled; every line is also kept under 'raw'.
    """
    raw = {}
    for line in (text or "").splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            raw[k.strip()] = v.strip()
    out = {"raw": raw}
    for k, v in raw.items():
        key = k.lower()
        if key == "version":
            out["version"] = v
        elif "flavor" in key:
            out["flavor"] = "open" if "open" in v.lower() else ("proprietary" if v else "")
        elif "persistent" in key:
            out["use_persistent_mapping"] = _int_or_none(v)
        elif key.startswith("dbg"):
            out["dbg_enabled"] = _int_or_none(v)
        elif key.startswith("info"):
            out["info_enabled"] = _int_or_none(v)
    return out


def _int_or_none(v):
    """'1' -> 1, 'yes' -> 1, 'no' -> 0 (upstream prints 'Use persistent mapping: yes'), else None."""
    v = (v or "").strip().lower()
    if v in ("yes", "y", "true", "on"):
        return 1
    if v in ("no", "n", "false", "off"):
        return 0
    m = re.match(r"^(-?\d+)", v)
    return int(m.group(1)) if m else None


def modules_dep_paths(text, name):
    """Paths (relative to /lib/modules/<kernel>) that modules.dep lists for module `name` (gdrdrv.ko, .ko.xz...)."""
    out = []
    for line in (text or "").splitlines():
        path = line.split(":", 1)[0].strip()
        base = path.rsplit("/", 1)[-1]
        if re.match(r"^%s\.ko(\.(xz|zst|gz))?$" % re.escape(name), base):
            out.append(path)
    return out


def parse_kernel_release_dirs(names):
    """Names under /lib/modules that look like kernel releases, sorted oldest -> newest."""
    rel = [n for n in names if re.match(r"^\d+\.\d+", n)]
    return sorted(rel, key=_release_key)


def _release_key(release):
    return [int(p) if p.isdigit() else p for p in re.split(r"[.\-+_~]", release)]


def parse_kconfig(text):
    """A kernel .config -> {'CONFIG_X': 'y'|'m'|'"str"'|'n'} ('# CONFIG_X is not set' -> 'n')."""
    out = {}
    for line in (text or "").splitlines():
        line = line.strip()
        m = re.match(r"^# (CONFIG_\w+) is not set$", line)
        if m:
            out[m.group(1)] = "n"
        elif line.startswith("CONFIG_") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v.strip('"')
    return out


def parse_os_release(text):
    out = {}
    for line in (text or "").splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip().strip('"')
    return out
