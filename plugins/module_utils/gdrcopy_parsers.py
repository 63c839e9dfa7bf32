# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Pure parsers for what a host says about gdrcopy, the NVIDIA driver and its kernels.

No I/O here: every function takes text (a file's content or a command's output) and returns plain data, so
unit tests feed them captured text from real hosts (tests/unit, tests/fixtures/hosts).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import csv
import io
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
    'Use persistent mapping: yes|no', 'dbg_enabled: 0', 'info_enabled: 0'. Lines are 'key: value'. Known keys are
    normalised: version, flavor, use_persistent_mapping, dbg_enabled,
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


KCONFIG_NAME_RE = re.compile(r"^CONFIG_\w+$")
MODULE_FILE_RE = re.compile(r"^(.+)\.ko(?:\.(?:xz|zst|gz))?$")


def modules_dep_index(text):
    """modules.dep -> {module file name without .ko and compression suffix: [paths, in file order]}: one pass over a
    file of thousands of lines, so that looking up several modules of one kernel reads and splits it once."""
    out = {}
    for line in (text or "").splitlines():
        path = line.partition(":")[0].strip()
        m = MODULE_FILE_RE.match(path.rpartition("/")[2])
        if m:
            out.setdefault(m.group(1), []).append(path)
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
        if line.startswith("CONFIG_"):
            k, eq, v = line.partition("=")
            if eq:
                out[k] = v.strip('"')
        elif line.startswith("# CONFIG_") and line.endswith(" is not set"):
            k = line[2:-len(" is not set")]
            if KCONFIG_NAME_RE.match(k):
                out[k] = "n"
    return out


def kconfig_lockdown(conf):
    """The lockdown mode a kernel config forces (CONFIG_LOCK_DOWN_KERNEL_FORCE_*): integrity, confidentiality or ''."""
    for mode in ("confidentiality", "integrity"):
        if conf.get("CONFIG_LOCK_DOWN_KERNEL_FORCE_" + mode.upper()) == "y":
            return mode
    return ""


def parse_proc_keys(text):
    """/proc/keys -> the names of the asymmetric keys the kernel holds (the CN part of each description,
    'Build time autogenerated kernel key: 9439...: X509.rsa 0134 []' -> 'Build time autogenerated kernel key').
    Only the keys the reader may view are listed."""
    names = []
    for line in (text or "").splitlines():
        fields = line.split(None, 8)
        if len(fields) == 9 and fields[7].startswith("asymmetri"):
            m = re.match(r"^(.*?): [0-9a-f]+: X509\.", fields[8])
            if m:
                names.append(m.group(1))
    return names


def parse_os_release(text):
    out = {}
    for line in (text or "").splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip().strip('"')
    return out


def parse_proc_version_release(text):
    """/proc/version ('Linux version 6.18.44-fc-v657-gpu (builder@...) ...') -> '6.18.44-fc-v657-gpu', or ''."""
    m = re.match(r"^Linux version (\S+)", (text or "").strip())
    return m.group(1) if m else ""


def load_order(proc_modules_text):
    """Every loaded module, oldest first (/proc/modules lists the newest first)."""
    names = [line.split()[0] for line in (proc_modules_text or "").splitlines() if line.strip()]
    return list(reversed(names))


def parse_modinfo(text):
    """`modinfo FILE` -> {field: value}. Continuation lines (sig_key, signature) are joined without spaces;
    a field given more than once (alias, parm, depends) keeps its values joined by newlines."""
    fields, key = {}, None
    for line in (text or "").splitlines():
        m = re.match(r"^([A-Za-z_][\w.]*):\s*(.*)$", line)
        if m:
            key, value = m.group(1), m.group(2).strip()
            fields[key] = fields[key] + "\n" + value if key in fields else value
        elif key and line[:1] in (" ", "\t"):
            fields[key] += line.strip()
    return fields


MODULE_SIGNATURE_MAGIC = b"~Module signature appended~\n"


def has_module_signature(tail):
    """The last bytes of an uncompressed .ko -> whether a module signature is appended."""
    return (tail or b"").endswith(MODULE_SIGNATURE_MAGIC)


def normalize_serial(text):
    """'51:3A:0F' / 'serial=513A0F' / '0x513a0f' -> '513A0F' (leading zeros dropped), '' when not hex."""
    value = (text or "").strip()
    value = value.split("=", 1)[1] if "=" in value else value
    value = re.sub(r"^0x", "", value.replace(":", "").strip(), flags=re.I).upper().lstrip("0")
    return value if re.match(r"^[0-9A-F]+$", value) else ""


def parse_openssl_subject(text):
    """`openssl x509 -noout -subject` output -> the CN, else the whole subject, else ''."""
    m = re.search(r"subject\s*=\s*(.*)", text or "")
    if not m:
        return ""
    cn = re.search(r"CN\s*=\s*([^,/]+)", m.group(1))
    return (cn.group(1) if cn else m.group(1)).strip()


# --- nvidia-smi ---------------------------------------------------------------------------------------------

SMI_QUERY_FIELDS = ("index", "name", "pci.bus_id", "driver_version", "memory.total", "memory.used",
                    "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max")


def _smi_value(value):
    """One nvidia-smi CSV value: '143771 MiB' -> 143771, '5' -> 5, '[N/A]'/'N/A' -> None, text stays text."""
    value = value.strip()
    if value in ("", "N/A", "[N/A]", "[Not Supported]", "Not Supported"):
        return None
    m = re.match(r"^(-?\d+)(?: MiB)?$", value)
    return int(m.group(1)) if m else value


def parse_nvidia_smi_query(text):
    """`nvidia-smi --query-gpu=<SMI_QUERY_FIELDS> --format=csv` -> one dict per GPU, keyed by field name
    (units dropped from the header: 'memory.total [MiB]' -> 'memory.total')."""
    rows = [r for r in csv.reader(io.StringIO(text or ""), skipinitialspace=True) if any(v.strip() for v in r)]
    if not rows or rows[0][0].strip() != "index":
        return []
    header = [re.sub(r"\s*\[.*\]$", "", h.strip()) for h in rows[0]]
    return [dict(zip(header, (_smi_value(v) for v in values))) for values in rows[1:] if len(values) == len(header)]


def parse_nvidia_smi_q(text):
    """`nvidia-smi -q [-d MEMORY]` -> {'driver_version', 'cuda_version', 'gpus': {bus_id: {section: {key: value}}}}.

    Sections are the indented headings under each 'GPU <bus id>' line ('BAR1 Memory Usage', 'Fabric'); the GPU's
    own lines ('GPU UUID') are under the section ''. Values keep nvidia-smi's text ('262144 MiB')."""
    out = {"driver_version": "", "cuda_version": "", "gpus": {}}
    gpu, section = None, None
    for line in (text or "").splitlines():
        m = re.match(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", line)
        if m:
            gpu, section = out["gpus"].setdefault(m.group(1), {}), None
            continue
        m = re.match(r"^(\s*)([^:]+?)\s*:\s*(.*)$", line)
        if m and gpu is not None and len(m.group(1)) == 4:  # a GPU's own line: 'GPU UUID', 'Minor Number'
            gpu.setdefault("", {})[m.group(2)] = m.group(3).strip()
        elif m and not m.group(1):
            key = m.group(2)
            if key == "Driver Version":
                out["driver_version"] = m.group(3).strip()
            elif key == "CUDA Version":
                out["cuda_version"] = m.group(3).strip()
        elif m and gpu is not None and section is not None and len(m.group(1)) > 4:
            gpu[section][m.group(2)] = m.group(3).strip()
        elif gpu is not None and re.match(r"^ {4}\S", line):
            section = line.strip()
            gpu.setdefault(section, {})
    return out


def mib(value):
    """'262144 MiB' -> 262144; anything else -> None."""
    m = re.match(r"^(\d+)\s*MiB$", (value or "").strip())
    return int(m.group(1)) if m else None


def smi_bus_to_sysfs(bus_id):
    """'00000000:00:06.0' (nvidia-smi) -> '0000:00:06.0' (sysfs)."""
    m = re.match(r"^([0-9A-Fa-f]+):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])$", (bus_id or "").strip())
    if not m:
        return ""
    return "%04x:%s:%s.%s" % (int(m.group(1), 16), m.group(2).lower(), m.group(3).lower(), m.group(4))


def parse_pci_bar1_mib(text):
    """sysfs `resource` of an NVIDIA GPU -> the size of BAR1 (the frame buffer aperture) in MiB, or None. BAR1 is the
    second memory region: BAR0 (registers) comes first and takes one or two slots (32 or 64 bit), so the second
    non-empty line among the six BARs is BAR1 whatever BAR0's width."""
    regions = []
    for line in (text or "").splitlines()[:6]:
        parts = line.split()
        if len(parts) == 3:
            try:
                start, end = int(parts[0], 16), int(parts[1], 16)
            except ValueError:
                continue
            if end > start:
                regions.append(end - start + 1)
    return regions[1] // (1024 * 1024) if len(regions) > 1 else None


ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


def _topo_cells(line):
    """The cells of one line of `nvidia-smi topo -m`: tab-separated, or runs of spaces where it was copied."""
    return [c.strip() for c in re.split(r"\t+| {2,}", line.strip("\n"))]


def parse_nvidia_smi_topo(text):
    """`nvidia-smi topo -m` -> {'GPU0': {'nvlink': {'GPU1': 18, ...}, 'cpu_affinity': '0-23', 'numa_affinity': '0'}}.
    The matrix's cells are separated by tabs (or runs of spaces where it was copied); NV<n> is a bonded set of n
    NVLinks, other cells (PIX, SYS, ...) are PCIe paths."""
    rows = [ANSI_RE.sub("", line) for line in (text or "").splitlines()]
    # the header row starts with an empty cell, the GPU rows with their name
    header = next((_topo_cells(r) for r in rows if re.search(r"\bGPU0\b", r) and r[:1] in ("\t", " ")), None)
    if not header:
        return {}
    header = [c for c in header if c]
    out = {}
    for line in rows:
        cells = [c for c in _topo_cells(line) if c != ""]
        if not cells or not re.match(r"^GPU\d+$", cells[0]) or len(cells) < len(header) + 1:
            continue
        row = dict(zip(header, cells[1:]))
        out[cells[0]] = {
            "nvlink": dict((col, int(v[2:])) for col, v in row.items() if col.startswith("GPU") and re.match(r"^NV\d+$", v)),
            "cpu_affinity": row.get("CPU Affinity", ""), "numa_affinity": row.get("NUMA Affinity", "")}
    return out


def parse_nvidia_smi_nvlink(text):
    """`nvidia-smi nvlink -s` -> {gpu index: {'active': n, 'inactive': n}} ('Link 3: <inactive>' is inactive, a
    speed is active)."""
    out, gpu = {}, None
    for line in (text or "").splitlines():
        m = re.match(r"^GPU (\d+):", line)
        if m:
            gpu = out.setdefault(int(m.group(1)), {"active": 0, "inactive": 0})
            continue
        m = re.match(r"^\s+Link \d+:\s*(.*)$", line)
        if m and gpu is not None:
            gpu["inactive" if "inactive" in m.group(1).lower() else "active"] += 1
    return out


def parse_link_speed(text):
    """sysfs current_link_speed '32.0 GT/s PCIe' -> 32.0; 'Unknown' or '' -> None."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*GT/s", text or "")
    return float(m.group(1)) if m else None


PCIE_GEN_BY_SPEED = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def pcie_generation(speed):
    """32.0 (GT/s) -> 5; unknown speed -> None."""
    return PCIE_GEN_BY_SPEED.get(speed)


def parse_int(text, default=None):
    """'16\\n' -> 16, '-1' -> -1; anything else -> default."""
    m = re.match(r"^\s*(-?\d+)\s*$", text or "")
    return int(m.group(1)) if m else default


def parse_nvidia_gpu_information(text):
    """/proc/driver/nvidia/gpus/<bdf>/information -> {'Model': 'NVIDIA H200', 'Bus Location': ..., ...}."""
    out = {}
    for line in (text or "").splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip()
    return out


# --- Secure Boot and MOK --------------------------------------------------------------------------------------

def parse_mokutil_sb_state(text):
    """`mokutil --sb-state` -> {'enabled': True|False|None, 'setup_mode': bool}."""
    text = text or ""
    enabled = True if "SecureBoot enabled" in text else (False if "SecureBoot disabled" in text else None)
    return {"enabled": enabled, "setup_mode": "Setup Mode" in text}


def parse_efivar_secure_boot(data):
    """The efivarfs SecureBoot-<guid> file: 4 attribute bytes, then 1 data byte (1 = on). None when malformed."""
    if not data or len(data) < 5:
        return None
    return data[4] == 1


MOK_STATES = (  # `mokutil --test-key` text -> state; the exit code means different things across versions
    ("is blocked in", "blocked"),  # "... is blocked in dbx" / "... is blocked in MokListX": never trusted
    ("is already in the enrollment request", "pending"),
    ("is already in db", "in_db"),
    ("is already enrolled", "enrolled"),
    ("is not enrolled", "not_enrolled"),
)


def parse_mokutil_test_key(text):
    """`mokutil --test-key CERT` output -> enrolled | pending | in_db | blocked | not_enrolled | unknown. The text,
    never the exit code: mokutil up to 0.7.2 exits 0 for "not enrolled" and 1 for the rest, later ones the reverse."""
    for needle, state in MOK_STATES:
        if needle in (text or ""):
            return state
    return "unknown"


def parse_mokutil_list_new(text):
    """`mokutil --list-new` -> the subjects (or '[key N]' labels) of keys waiting for enrollment; [] when empty."""
    keys, current = [], None
    for line in (text or "").splitlines():
        m = re.match(r"^\[key (\d+)\]", line.strip())
        if m:
            current = "key %s" % m.group(1)
            keys.append(current)
            continue
        m = re.search(r"Subject:\s*(.+)$", line)
        if m and current and keys[-1] == current:
            cn = re.search(r"CN\s*=\s*([^,/]+)", m.group(1))
            keys[-1] = (cn.group(1) if cn else m.group(1)).strip()
    return keys


# --- versions and the DMA-BUF backend -------------------------------------------------------------------------

DMABUF_MIN_CUDA = (13, 3)
DMABUF_MIN_GDRCOPY = (2, 6)


def _vt(text):
    return version_tuple(major_minor(text)) if text else ()


def dmabuf_availability(cuda_driver_version, gdrcopy_version):
    """Whether gdrcopy 2.6's DMA-BUF mmap path (no gdrdrv needed) can work -> (bool, why in words)."""
    problems = []
    cuda = _vt(cuda_driver_version)
    if not cuda:
        problems.append("CUDA driver version unknown (nvidia-smi gave none; 13.3+ needed)")
    elif cuda < DMABUF_MIN_CUDA:
        problems.append("CUDA driver %s < 13.3" % cuda_driver_version)
    lib = _vt(gdrcopy_version)
    if not lib:
        problems.append("no gdrcopy release installed or pinned (2.6+ needed)")
    elif lib < DMABUF_MIN_GDRCOPY:
        problems.append("gdrcopy %s < 2.6" % gdrcopy_version)
    if problems:
        return False, "; ".join(problems)
    return True, "CUDA driver %s >= 13.3 and gdrcopy %s >= 2.6" % (cuda_driver_version, gdrcopy_version)


# --- gdrcopy's own test programs ------------------------------------------------------------------------------

SANITY_SUMMARY_RE = re.compile(r"^Total: (\d+), Passed: (\d+), Failed: (\d+), Waived: (\d+)\s*$", re.M)
LIBCHECK_SUMMARY_RE = re.compile(r"^\d+%: Checks: (\d+), Failures: (\d+), Errors: (\d+)\s*$", re.M)
LIBCHECK_FAILURE_RE = re.compile(r"^[^:\s]+:\d+:[FE]:[^:]*:([^:]+):", re.M)


def _name_list(text, heading):
    """The indented names under 'List of <heading> tests:' (gdrcopy_sanity's summary)."""
    m = re.search(r"^List of %s tests:\n((?:[ \t]+\S+\n?)*)" % heading, text, re.M)
    return m.group(1).split() if m else []


def parse_sanity(text, rc):
    """gdrcopy_sanity (2.4+: 'Total: N, Passed: P, Failed: F, Waived: W') or sanity (2.3, libcheck:
    '100%: Checks: N, Failures: F, Errors: E') output and exit code -> counts, failed test names and ok."""
    text = text or ""
    m = SANITY_SUMMARY_RE.search(text)
    if m:
        total, passed, failed, waived = (int(g) for g in m.groups())
        out = {"format": "gdrcopy", "total": total, "passed": passed, "failed": failed, "waived": waived,
               "failed_tests": _name_list(text, "failed"), "waived_tests": _name_list(text, "waived")}
    else:
        m = LIBCHECK_SUMMARY_RE.search(text)
        if not m:
            return {"format": "", "total": 0, "passed": 0, "failed": 0, "waived": 0, "failed_tests": [],
                    "waived_tests": [], "rc": rc, "ok": False,
                    "msg": "gdrcopy_sanity printed no summary line (exit code %s)" % rc}
        total, failures, errors = (int(g) for g in m.groups())
        out = {"format": "libcheck", "total": total, "passed": total - failures - errors,
               "failed": failures + errors, "waived": 0,
               "failed_tests": sorted(set(LIBCHECK_FAILURE_RE.findall(text))), "waived_tests": []}
    out["rc"] = rc
    out["ok"] = rc == 0 and out["failed"] == 0
    out["msg"] = _sanity_msg(out)
    return out


def _sanity_msg(r):
    if r["ok"]:
        return "%d of %d tests passed, %d waived" % (r["passed"], r["total"], r["waived"])
    names = ", ".join(r["failed_tests"]) or "names not printed"
    if r["failed"] == 0:
        return "exit code %s although no test failed" % r["rc"]
    return "%d of %d tests failed: %s" % (r["failed"], r["total"], names)


BENCH_ERROR_RE = re.compile(r"^(.*(?:error|Error|ERROR|failed|FAILED).*)$", re.M)


def _bench_error(text, rc):
    if rc == 0:
        return ""
    errors = BENCH_ERROR_RE.findall(text or "")
    return errors[-1].strip() if errors else "exit code %s" % rc


def parse_copybw(text, rc):
    """gdrcopy_copybw output -> {'results': [{'size', 'write_MBps', 'read_MBps'}], 'ok', 'error'}."""
    results, size = [], None
    for line in (text or "").splitlines():
        m = re.match(r"^(writing|reading) test, size=(\d+)", line)
        if m:
            size = int(m.group(2))
            if m.group(1) == "writing":
                results.append({"size": size, "write_MBps": None, "read_MBps": None})
            continue
        m = re.match(r"^(write|read) BW: ([\d.]+)\s*MB/s", line)
        if m and results:
            results[-1]["%s_MBps" % m.group(1)] = float(m.group(2))
    ok = rc == 0 and bool(results) and all(r["write_MBps"] is not None and r["read_MBps"] is not None
                                           for r in results)
    return {"rc": rc, "ok": ok, "results": results, "error": "" if ok else _bench_error(text, rc) or
            "no bandwidth figures in the output"}


COPYLAT_ROW_RE = re.compile(r"^(gdr_copy_to_mapping|gdr_copy_from_mapping|cuMemcpy_H2D|cuMemcpy_D2H)"
                            r"\s+(\d+)\s+([\d.]+)(?:\s+([\d.]+))?\s*$")


def parse_copylat(text, rc):
    """gdrcopy_copylat output -> {'statistic': 'median'|'average', 'results': {test: [{'size', 'us', 'min_us'}]}}.

    2.6 prints 'Median Time(us)' and 'Min. Time(us)' per size; 2.3-2.5 print one 'Avg.Time(us)'."""
    results, statistic = {}, ""
    for line in (text or "").splitlines():
        if line.startswith("Test") and "Time(us)" in line:
            statistic = "median" if "Median" in line else "average"
        m = COPYLAT_ROW_RE.match(line)
        if m:
            row = {"size": int(m.group(2)), "us": float(m.group(3)),
                   "min_us": float(m.group(4)) if m.group(4) else None}
            results.setdefault(m.group(1), []).append(row)
    ok = rc == 0 and "gdr_copy_to_mapping" in results and "gdr_copy_from_mapping" in results
    return {"rc": rc, "ok": ok, "statistic": statistic, "results": results,
            "error": "" if ok else _bench_error(text, rc) or "no latency figures in the output"}


# --- what the verdict (module_utils/gdrcopy_verdict) and the plan share: the backend, the load refusal -----------


def choose_backend(problem, dmabuf_ok, dmabuf_why, configured=""):
    """-> {'active': 'gdrdrv'|'dmabuf'|'none', 'reason': words}. gdrdrv wins whenever it works (the 2.6 library
    tries the DMA-BUF path only after gdrdrv fails to open). configured: gdrcopy_backend as the last install
    recorded it; with dmabuf, no gdrdrv is the plan, not a problem."""
    if not problem:
        return {"active": "gdrdrv", "reason": "gdrdrv is loaded and /dev/gdrdrv is usable" + (
            " (gdrcopy's library prefers it to the DMA-BUF backend the last install chose, until it is unloaded)"
            if configured == "dmabuf" else "")}
    if configured == "dmabuf":
        if dmabuf_ok:
            return {"active": "dmabuf", "reason": "gdrcopy_backend chose DMA-BUF (%s): no gdrdrv" % dmabuf_why}
        return {"active": "none", "reason": "gdrcopy_backend chose DMA-BUF, which cannot work here now (%s), and no "
                                            "gdrdrv is installed" % dmabuf_why}
    if dmabuf_ok:
        return {"active": "dmabuf", "reason": "%s; the DMA-BUF path works instead (%s)" % (problem, dmabuf_why)}
    return {"active": "none", "reason": "%s; the DMA-BUF path is not available either (%s)" % (problem, dmabuf_why)}


# The start of every sentence about kernel.modules_disabled=1 (the plan's blocker, the status report).
MODULES_DISABLED = "module loading is disabled on this host (kernel.modules_disabled=1)"


def open_to_others(mode):
    """Whether a /dev/gdrdrv mode (an int) gives users outside its owner and group any access. Read alone is enough:
    gdrdrv's ioctls pin and map GPU memory for any open handle. The one rule for the role's inputs
    (module_utils/gdrcopy_inputs) and the status report."""
    return bool(mode & 0o007)


def numa_mismatches(gpus, rdma):
    """GPUs on a known NUMA node that no RDMA device shares, when the host has RDMA devices on known nodes."""
    nodes = set(d["numa_node"] for d in rdma if d["numa_node"] >= 0)
    if not nodes:
        return []
    where = ", ".join("%s: node %d" % (d["name"], d["numa_node"]) for d in rdma if d["numa_node"] >= 0)
    return [{"gpu": "GPU %s (%s)" % (g["index"], g["bus_id"]), "numa_node": g["numa_node"], "rdma": where}
            for g in gpus if g["numa_node"] >= 0 and g["numa_node"] not in nodes]


PEERMEM_STATES = ("auto", "present", "required", "absent")


def dmabuf_rdma_note(nvidia, kernel_release):
    """Whether GPUDirect RDMA can use DMA-BUF instead of nvidia-peermem: NVIDIA's open kernel modules and a
    kernel of 5.12 or later (the NIC driver and the RDMA library must support dma-buf too)."""
    kv = version_tuple(kernel_release.split("-")[0]) if kernel_release else ()
    if nvidia.get("flavor") == "open" and kv >= (5, 12):
        return ("DMA-BUF is the alternative here: the NVIDIA open kernel modules and kernel %s support it "
                "(the NIC driver and rdma-core must too)" % kernel_release)
    why = []
    if nvidia.get("flavor") != "open":
        why.append("the %s NVIDIA driver is not the open kernel module flavor" % (nvidia.get("flavor") or "installed"))
    if kv and kv < (5, 12):
        why.append("kernel %s is older than 5.12" % kernel_release)
    return "DMA-BUF is no alternative here: " + ("; ".join(why) or "the kernel version is unknown")


def peermem_plan(state, facts):
    """What the nvidia_peermem role does with nvidia-peermem for a nvidia_peermem_state, from gdrcopy_info facts:
    {action: load|unload|none, boot: bool (load at every boot), fail: bool (required and impossible),
     reason: one sentence, dmabuf: the DMA-BUF note}. Pure, so every branch has a unit test."""
    pm, k = facts["peermem"], facts["kernel"]
    mod, ib = pm["nvidia_peermem"], pm["ib_core"]
    release = k["running"] or ([x["release"] for x in k["installed"]] or [""])[-1]
    out = {"action": "none", "boot": False, "fail": False, "reason": "",
           "dmabuf": dmabuf_rdma_note(facts["nvidia"], release)}
    if state == "absent":
        out["action"] = "unload" if mod["loaded"] else "none"
        out["reason"] = "nvidia_peermem_state is absent: nvidia-peermem is %s and does not load at boot" % (
            "unloaded" if mod["loaded"] else "not loaded")
        return out
    if not (mod["available"] or mod["loaded"]):
        out["fail"] = state == "required"
        out["reason"] = ("the NVIDIA driver%s ships no nvidia-peermem for kernel %s, so RDMA NICs cannot register "
                         "GPU memory through it (gdrcopy itself does not need it); %s" % (
                             " " + facts["nvidia"]["version"] if facts["nvidia"].get("version") else "", release,
                             out["dmabuf"]))
        return out
    api = ib["peer_memory_api"]
    if state == "auto" and api is not True and not mod["loaded"]:
        out["reason"] = ("nvidia_peermem_state is auto and ib_core offers no peer-memory API (%s): it needs MLNX_OFED "
                         "or DOCA-OFED, so nvidia-peermem is left unloaded; set nvidia_peermem_state: present to load "
                         "it anyway; %s" % (ib["evidence"] or "unknown", out["dmabuf"]))
        return out
    out["action"] = "none" if mod["loaded"] else "load"
    out["boot"] = True
    out["reason"] = "nvidia-peermem %s after nvidia and loads at every boot, before gdrdrv" % (
        "is loaded" if mod["loaded"] else "loads")
    if api is False:
        out["reason"] += ("; ib_core offers no peer-memory API (%s), so the module may refuse to load or NICs may not "
                          "use it" % ib["evidence"])
    return out


def load_refusal(facts):
    """Why the running kernel would refuse the gdrdrv installed for it ('' when it would load it): signatures are
    enforced and the module is unsigned, or signed by our key while that key is not (yet) enrolled."""
    k = facts["kernel"]
    if not facts["live"]:
        return ""
    for kern in k["installed"]:
        if kern["release"] != k["running"] or not (k["sig_enforce"] or kern["sig_force"]):
            continue
        for mod in kern["gdrdrv_modules"]:
            problem = signature_problem(mod, facts["secure_boot"]["mok"])
            if problem:
                return "module signatures are enforced on %s and gdrdrv (%s) %s" % (
                    kern["release"], mod["path"], problem)
    return ""


def signature_problem(mod, mok):
    if mod["signed"] is False:
        return "is not signed: the kernel refuses it"
    if mod["ours"] and mok["state"] == "blocked":
        return "is signed by %s, whose key is blocked (dbx or MokListX): the kernel never accepts it" % (
            mod["signer"] or "our key")
    if mod["ours"] and mok["state"] in ("not_enrolled", "pending"):
        return "is signed by %s, whose key is %s: the kernel refuses it until the key is enrolled" % (
            mod["signer"] or "our key", "not enrolled" if mok["state"] == "not_enrolled" else "only pending enrollment")
    return ""


# What upstream's own packaging and install leave on a host (docs/UPSTREAM-GDRCOPY.md: "What each of upstream's
# packages leaves on a host"): its debs and rpms, its DKMS module, init scripts, unit, modprobe.d file and udev rules.
UPSTREAM_PACKAGES = ("gdrdrv-dkms", "libgdrapi", "gdrcopy-tests", "gdrcopy", "gdrcopy-kmod", "gdrcopy-devel")
UPSTREAM_FILES = ("/etc/init.d/gdrdrv", "/etc/init.d/gdrcopy", "/usr/lib/systemd/system/gdrcopy.service",
                  "/lib/systemd/system/gdrcopy.service", "/usr/libexec/gdrcopy/gdrcopy", "/etc/modprobe.d/50-gdrdrv.conf")
UPSTREAM_GLOBS = ("/etc/udev/rules.d/*gdrdrv*.rules", "/etc/udev/rules.d/*gdrcopy*.rules",
                  "/usr/lib/udev/rules.d/*gdrdrv*.rules", "/usr/lib/udev/rules.d/*gdrcopy*.rules",
                  "/lib/udev/rules.d/*gdrdrv*.rules", "/lib/udev/rules.d/*gdrcopy*.rules",
                  "/usr/lib/*/libgdrapi.so*", "/usr/lib64/libgdrapi.so*", "/usr/local/lib/libgdrapi.so*",
                  "/usr/local/lib64/libgdrapi.so*")


def parse_dpkg_versions(text, names):
    """{name: version} of the installed packages among names, from dpkg's status file."""
    out = {}
    for stanza in re.split(r"\n[ \t]*\n", text):
        name = re.search(r"^Package:[ \t]*(\S+)", stanza, re.M)
        if name and name.group(1) in names and re.search(r"^Status:[ \t]*\S+ ok installed[ \t]*$", stanza, re.M):
            version = re.search(r"^Version:[ \t]*(\S+)", stanza, re.M)
            out[name.group(1)] = version.group(1) if version else ""
    return out


def parse_rpm_versions(text):
    """{name: version-release} from `rpm -q --queryformat 'installed %{NAME} %{VERSION}-%{RELEASE}\\n' NAME...`."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "installed":
            out[parts[1]] = parts[2]
    return out


def upstream_summary(upstream):
    """One line naming what of upstream's install a host has ('' when none)."""
    parts = ["%s %s" % (p["name"], p["version"]) for p in upstream.get("packages") or []]
    parts += ["DKMS gdrdrv/%s%s" % (d["version"], " (%s)" % ", ".join(d["kernels"]) if d["kernels"] else "")
              for d in upstream.get("dkms") or []]
    parts += upstream.get("files") or []
    parts += upstream.get("modules") or []
    return ", ".join(parts)


def mountinfo_has_root(text):
    """Whether /proc/self/mountinfo text has a mount on "/" (field 5, the mount point)."""
    return any(len(f) > 4 and f[4] == "/" for f in (line.split() for line in text.splitlines()))


def parse_group_names(text):
    """The group names of an /etc/group file (name:password:gid:members a line)."""
    return set(line.split(":", 1)[0] for line in text.splitlines() if line.strip() and not line.startswith("#"))


def parse_dpkg_status(text):
    """The names of the packages that dpkg's status file (/var/lib/dpkg/status) says are installed: a stanza's
    Status "<want> ok installed" (not config-files, half-installed or unpacked)."""
    names = set()
    for stanza in re.split(r"\n[ \t]*\n", text):
        name = re.search(r"^Package:[ \t]*(\S+)", stanza, re.M)
        if name and re.search(r"^Status:[ \t]*\S+ ok installed[ \t]*$", stanza, re.M):
            names.add(name.group(1))
    return names


def parse_rpm_installed(text):
    """The names `rpm -q --queryformat 'installed %{NAME}\\n' NAME...` printed as installed."""
    return set(line.split(" ", 1)[1].strip() for line in text.splitlines() if line.startswith("installed "))
