# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""What a host (or an image root) has, read only: the gathering behind the gdrcopy_info module, shared with the
modules that act on what it reads (gdrcopy_load). Commands run through the AnsibleModule given to Host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import grp
import gzip
import hashlib
import json
import os
import re
import stat

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_peermem as PM
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_converged as C
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_pipeline as PIPE
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_smoke as SMOKE
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_verdict as V
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import PATHS

TOOLS = ("modprobe", "modinfo", "depmod", "ldconfig", "mokutil", "nvidia-smi", "openssl", "timeout", "dkms",
         "make", "gcc")
# Where tools live besides PATH: root's sbin dirs, and the NVIDIA container toolkit's driver mount.
TOOL_DIRS = ["/sbin", "/usr/sbin", "/usr/local/sbin", "/usr/local/nvidia/bin"]
SECURE_BOOT_EFIVAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
# Modules whose load order matters to gdrcopy and GPUDirect RDMA (every nvidia* module is kept too).
ORDER_MODULES = ("gdrdrv", "nv_peer_mem", "ib_core", "ib_uverbs", "mlx5_core", "mlx5_ib")
TEST_PROGRAMS = {"sanity": ("gdrcopy_sanity", "sanity"), "copybw": ("gdrcopy_copybw", "copybw"),
                 "copylat": ("gdrcopy_copylat", "copylat")}


RUNTIME_DIRS = ("/proc", "/sys", "/dev", "/run")


def in_chroot():
    """True inside a chroot: the root of PID 1 is not our root. Where /proc/1/root may not be read (a container
    without ptrace rights), our root is a chroot when it is no mount point: /proc/self/mountinfo lists only the
    mounts reachable from our root, so a chroot into a plain directory has no "/" entry. Without /proc there is
    no running system to describe either, so that counts as a chroot too."""
    try:
        ours, init = os.stat("/"), os.stat("/proc/1/root/")
        return (ours.st_dev, ours.st_ino) != (init.st_dev, init.st_ino)
    except OSError:
        pass
    try:
        with open("/proc/self/mountinfo") as f:
            return not P.mountinfo_has_root(f.read())
    except (IOError, OSError):
        return True


# What setup's min subset says of the OS and its package manager that the roles read (ansible_facts).
OS_FACT_KEYS = ("distribution", "distribution_version", "distribution_major_version", "distribution_release",
                "os_family", "pkg_mgr")


def os_facts(module, h):
    """The OS facts of OS_FACT_KEYS, from Ansible's own collectors, for the system the module runs on (the host, or
    the image root through a chroot connection); {} for a captured tree. The modules that read the host return them
    as ansible_facts, so that no setup task has to start Python on the host for them."""
    if h.root != "/":
        return {}
    # Imported here, not at the top: ansible.module_utils.facts loads its ~80 collector modules, which every module
    # start compiles from source (AnsiballZ ships no bytecode): about 0.1 s of CPU that only the reads need.
    from ansible.module_utils.facts.system.distribution import DistributionFactCollector
    from ansible.module_utils.facts.system.pkg_mgr import PkgMgrFactCollector

    facts = DistributionFactCollector().collect(module=module)
    facts.update(PkgMgrFactCollector().collect(
        module=module, collected_facts=dict(("ansible_" + k, v) for k, v in facts.items())))
    return dict((k, facts.get(k) or "") for k in OS_FACT_KEYS)


def complete_os_facts(facts):
    """The OS facts of OS_FACT_KEYS from facts (ansible_facts, or what an earlier read returned) when they hold what
    the roles decide with (os_family, pkg_mgr); else None. The one rule for reusing them: gdrcopy_verify's action
    plugin passes them on with it, and gather() uses what it was passed only when it holds."""
    if not isinstance(facts, dict) or not (facts.get("os_family") and facts.get("pkg_mgr")):
        return None
    return dict((k, facts.get(k) or "") for k in OS_FACT_KEYS)


class Host:
    """File access relative to a root, and commands through AnsibleModule.run_command.

    live: the root is the running system, so /proc, /sys and commands describe it: root / outside a chroot, and
    not forced to be an image. Unit tests set it for a captured file tree whose commands they answer themselves.
    A root that is not live never shows its /proc, /sys, /dev or /run: in a chroot those are the build host's
    (Packer's chroot builder, `wwctl container exec` and Ansible's chroot connection mount them), never the image's."""

    def __init__(self, module, root, live=None, image=False):
        self.module = module
        self.root = root.rstrip("/") or "/"
        self.live = (self.root == "/" and not image and not in_chroot()) if live is None else live
        self._memo = {}

    def memo(self, kind, key, compute):
        """compute() once per (kind, key) for this Host: a parsed file that several facts consult in one read. A Host
        is one read: code that changes such a file (depmod) and reads again makes a new Host."""
        if (kind, key) not in self._memo:
            self._memo[(kind, key)] = compute()
        return self._memo[(kind, key)]

    def path(self, p):
        return p if self.root == "/" else os.path.join(self.root, p.lstrip("/"))

    def hidden(self, p):
        """A runtime path of another system (see the class): read as absent."""
        return not self.live and any(p == d or p.startswith(d + "/") for d in RUNTIME_DIRS)

    def read(self, p):
        if self.hidden(p):
            return None
        try:
            with open(self.path(p), "r", errors="replace") as f:
                return f.read()
        except (IOError, OSError):
            return None

    def read_bytes(self, p, tail=None):
        """The file's bytes (only its last `tail` bytes when given), or None."""
        if self.hidden(p):
            return None
        try:
            with open(self.path(p), "rb") as f:
                if tail:
                    f.seek(max(0, os.fstat(f.fileno()).st_size - tail))
                return f.read()
        except (IOError, OSError):
            return None

    def exists(self, p):
        return not self.hidden(p) and os.path.exists(self.resolve(p))

    def stat(self, p):
        """os.stat of the path, or None."""
        if self.hidden(p):
            return None
        try:
            return os.stat(self.path(p))
        except OSError:
            return None

    def isdir(self, p):
        return not self.hidden(p) and os.path.isdir(self.path(p))

    def resolve(self, p):
        """Follow symlinks inside the root (an image's absolute links point into the image, not the host)."""
        if self.root == "/":
            return p
        parts, seen, cur = p.strip("/").split("/"), 0, ""
        while parts and seen < 40:
            cur = cur + "/" + parts.pop(0)
            full = self.path(cur)
            if os.path.islink(full):
                seen += 1
                target = os.readlink(full)
                base = "" if target.startswith("/") else os.path.dirname(cur)
                parts = (base + "/" + target).strip("/").split("/") + parts
                cur = ""
        return self.path(cur)

    def readlink(self, p):
        try:
            return os.readlink(self.path(p))
        except OSError:
            return ""

    def listdir(self, p):
        if self.hidden(p):
            return []
        try:
            return sorted(os.listdir(self.path(p)))
        except OSError:
            return []

    def glob(self, pattern):
        """Paths matching pattern (** recurses), as seen from inside the root."""
        if self.hidden(pattern):
            return []
        found = glob.glob(self.path(pattern), recursive=True)
        if self.root == "/":
            return sorted(found)
        return sorted("/" + os.path.relpath(g, self.root) for g in found)

    def tool(self, name):
        return self.module.get_bin_path(name, opt_dirs=TOOL_DIRS) or ""

    def live_tool(self, name):
        """A tool whose answer describes the running system: only when the root is live."""
        return self.tool(name) if self.live else ""

    def run(self, argv):
        rc, out, err = self.module.run_command(argv, environ_update={"LC_ALL": "C"})
        return rc, out, err

    def smoke(self, expect, dmabuf=False):
        """The smoke check (gdr_open through the installed library) in a child of this process, as the gdrcopy-smoke
        helper runs it (module_utils/gdrcopy_smoke.py is both): (exit code, JSON, error), without an interpreter
        start. Only on a live host."""
        return SMOKE.in_child(SMOKE.check, (SMOKE.LIBRARY, expect, dmabuf), SMOKE_TIMEOUT)


# --- kernel ---------------------------------------------------------------------------------------------------

def module_files(h, release, name):
    """Files of module `name` for a kernel: what modules.dep lists (what modprobe loads), plus any copy under
    updates/ or extra/ that depmod has not seen yet. Cheaper than walking the whole module tree; modules.dep (some
    5000 lines) is read and indexed once per kernel for all the modules a read looks up."""
    base = "/lib/modules/%s" % release
    index = h.memo("modules.dep", release, lambda: P.modules_dep_index(h.read(base + "/modules.dep") or ""))
    found = set(base + "/" + rel for rel in index.get(name, []))
    for sub in ("updates", "extra"):
        found.update(h.glob("%s/%s/**/%s.ko*" % (base, sub, name)))
    return sorted(found)


def module_signature(h, path, mok_serial):
    """Version and signature of one module file: from its trailer (uncompressed .ko) and `modinfo FILE`."""
    out = {"path": path, "signed": None, "signer": "", "sig_key": "", "sig_hashalgo": "", "version": "",
           "srcversion": "", "vermagic": "", "ours": None}
    if path.endswith(".ko"):
        out["signed"] = P.has_module_signature(h.read_bytes(path, tail=len(P.MODULE_SIGNATURE_MAGIC)))
    modinfo = h.tool("modinfo")
    if modinfo:
        rc, text, dummy = h.run([modinfo, h.path(path)])
        fields = P.parse_modinfo(text) if rc == 0 else {}
        for key in ("signer", "sig_key", "sig_hashalgo", "version", "srcversion", "vermagic"):
            out[key] = fields.get(key, "")
        if rc == 0:
            out["signed"] = bool(out["signer"] or out["sig_key"])
    if mok_serial and out["sig_key"]:
        out["ours"] = P.normalize_serial(out["sig_key"]) == mok_serial
    return out


def running_release(h):
    if not h.live:
        return ""
    text = (h.read("/proc/sys/kernel/osrelease") or "").strip()
    return text or P.parse_proc_version_release(h.read("/proc/version") or "")


def installed_releases(h):
    """The installed kernels, oldest first: a module tree with its kernel/ dir and an image. Leftovers of a removed
    kernel (only updates/ or extra/ remain) are not kernels."""
    return [rel for rel in P.parse_kernel_release_dirs(h.listdir("/lib/modules"))
            if (h.exists("/boot/vmlinuz-%s" % rel) or h.exists("/lib/modules/%s/vmlinuz" % rel))
            and h.isdir("/lib/modules/%s/kernel" % rel)]


def kernel_facts(h, mok_serial):
    installed = []
    for rel in installed_releases(h):
        build = "/lib/modules/%s/build" % rel
        kconf = P.parse_kconfig(h.read("/boot/config-%s" % rel) or h.read(build + "/.config") or "")
        gdrdrv = module_files(h, rel, "gdrdrv")
        installed.append({
            "release": rel,
            "headers": h.exists(build + "/Makefile"),
            "build_dir": build,
            "sig_hash": kconf.get("CONFIG_MODULE_SIG_HASH", ""),
            "sig_force": kconf.get("CONFIG_MODULE_SIG_FORCE") == "y",
            "lockdown_force": P.kconfig_lockdown(kconf),
            "gdrdrv": gdrdrv,
            "gdrdrv_modules": [module_signature(h, path, mok_serial) for path in gdrdrv],
        })
    running = running_release(h)
    m = re.search(r"\[(\w+)\]", h.read("/sys/kernel/security/lockdown") or "")
    return {
        "running": running,
        "running_installed": h.live and any(k["release"] == running for k in installed),
        "running_config": running_config(h, running, installed),
        "installed": installed,
        # Without loadable module support the kernel has no modules_disabled switch; an image root is not asked.
        "modular": h.exists("/proc/sys/kernel/modules_disabled") if h.live else True,
        "modules_disabled": (h.read("/proc/sys/kernel/modules_disabled") or "0").strip() == "1",
        "sig_enforce": (h.read("/sys/module/module/parameters/sig_enforce") or "").strip() == "Y",
        "lockdown": m.group(1) if m else "",
        "efi": h.isdir("/sys/firmware/efi"),
    }


def running_config(h, running, installed):
    """What the running kernel's config says about module signatures: {sig_force, sig_hash, lockdown_force,
    source}. From its installed config, else /proc/config.gz (a kernel from elsewhere, CONFIG_IKCONFIG_PROC)."""
    kern = [k for k in installed if k["release"] == running]
    if kern and kern[0]["sig_hash"]:
        return {"sig_force": kern[0]["sig_force"], "sig_hash": kern[0]["sig_hash"],
                "lockdown_force": kern[0].get("lockdown_force", ""), "source": "/boot/config-" + running}
    data = h.read_bytes("/proc/config.gz") if h.live else None
    try:
        conf = P.parse_kconfig(gzip.decompress(data).decode("utf-8", "replace")) if data else {}
    except (IOError, OSError, EOFError):
        conf = {}
    if not conf:
        return {"sig_force": False, "sig_hash": "", "lockdown_force": "", "source": ""}
    return {"sig_force": conf.get("CONFIG_MODULE_SIG_FORCE") == "y", "sig_hash": conf.get("CONFIG_MODULE_SIG_HASH", ""),
            "lockdown_force": P.kconfig_lockdown(conf), "source": "/proc/config.gz"}


# --- Secure Boot and the MOK ----------------------------------------------------------------------------------

def certificate_facts(h, cert):
    """Serial and subject CN of a certificate (DER or PEM) through openssl, or empty strings."""
    openssl = h.tool("openssl")
    for form in ("DER", "PEM"):
        if not openssl:
            break
        rc, text, dummy = h.run([openssl, "x509", "-inform", form, "-in", h.path(cert), "-noout", "-serial", "-subject"])
        if rc == 0:
            return P.normalize_serial(text.splitlines()[0]), P.parse_openssl_subject(text)
    return "", ""


def cert_mok_state(h, cert, efi):
    """What the MOK list says of one certificate file: its serial, subject, state (mokutil --test-key text) and
    detail (that text, or why there is no state)."""
    out = {"cert": cert or "", "exists": bool(cert) and h.exists(cert), "serial": "", "subject": "",
           "state": "unknown", "detail": ""}
    if out["exists"]:
        out["serial"], out["subject"] = certificate_facts(h, cert)
    mokutil = h.live_tool("mokutil")
    if not efi:
        out["detail"] = "not an EFI system"
    elif not mokutil:
        out["detail"] = "mokutil is not installed" if h.live else "not inspected in an image"
    elif not cert:
        out["detail"] = "no certificate given (mok_cert)"
    elif not out["exists"]:
        out["detail"] = "%s does not exist" % cert
    else:
        rc, text, err = h.run([mokutil, "--test-key", h.path(cert)])
        out["state"], out["detail"] = P.parse_mokutil_test_key(text + err), (text + err).strip()
    return out


def mok_facts(h, cert, efi):
    out = cert_mok_state(h, cert, efi)
    del out["exists"]
    out["pending"] = []
    mokutil = h.live_tool("mokutil")
    if mokutil and efi:
        rc, text, err = h.run([mokutil, "--list-new"])
        out["pending"] = P.parse_mokutil_list_new(text)
    return out


def secure_boot_facts(h, mok_cert, candidates=()):
    efi = h.isdir("/sys/firmware/efi")
    out = {"efi": efi, "enabled": False if not efi else None, "setup_mode": False,
           "source": "no EFI (Secure Boot does not apply)" if not efi else "", "mok": mok_facts(h, mok_cert, efi),
           "candidates": [cert_mok_state(h, c, efi) for c in candidates or ()]}
    mokutil = h.live_tool("mokutil")
    if efi and mokutil:
        rc, text, err = h.run([mokutil, "--sb-state"])
        state = P.parse_mokutil_sb_state(text + err)
        if state["enabled"] is not None:
            out.update(state, source="mokutil --sb-state")
            return out
    if efi:
        enabled = P.parse_efivar_secure_boot(h.read_bytes(SECURE_BOOT_EFIVAR))
        if enabled is not None:
            out.update(enabled=enabled, source="efivarfs SecureBoot variable")
    return out


# --- NVIDIA ---------------------------------------------------------------------------------------------------

def nvidia_source_trees(h):
    trees = []
    seen = set()
    patterns = ("/usr/src/nvidia-*/nvidia/nv-p2p.h", "/usr/src/kernel-modules/nvidia-*/nvidia/nv-p2p.h",
                "/usr/src/nvidia-*/nv-p2p.h")
    for pattern in patterns:
        for header in h.glob(pattern):
            d = os.path.dirname(header)
            if d in seen:
                continue
            seen.add(d)
            trees.append(describe_tree(h, d))
    return trees


def describe_tree(h, d):
    d = d.rstrip("/")
    top = d[:-len("/nvidia")] if d.endswith("/nvidia") else d
    version = P.parse_dkms_conf_version(h.read(top + "/dkms.conf") or "") or P.nvidia_source_version_from_path(d)
    lic = P.parse_module_license(h.read(d + "/nv-frontend.c") or h.read(d + "/nv.c") or "")
    return {"dir": d, "version": version, "flavor": P.flavor_from_license(lic), "license": lic}


def nvidia_facts(h, kernels, src_override=None):
    out = {"loaded": h.isdir("/sys/module/nvidia"), "version": "", "flavor": "", "version_source": ""}
    if out["loaded"]:
        proc = P.parse_nvidia_proc_version(h.read("/proc/driver/nvidia/version") or "")
        out["version"] = (h.read("/sys/module/nvidia/version") or "").strip() or proc.get("version", "")
        out["flavor"] = proc.get("flavor", "")
        out["version_source"] = "/sys/module/nvidia/version"
    modinfo = h.tool("modinfo")
    if modinfo and (not out["version"] or not out["flavor"]):
        # The installed module of the newest kernel that has one (what the next boot loads).
        for k in reversed([k["release"] for k in kernels["installed"]]):
            argv = [modinfo, "-k", k, "-F", "version", "nvidia"]
            lic_argv = [modinfo, "-k", k, "-F", "license", "nvidia"]
            if h.root != "/":
                argv[1:1], lic_argv[1:1] = ["-b", h.root], ["-b", h.root]
            rc, ver, dummy = h.run(argv)
            if rc == 0 and ver.strip():
                rc2, lic, dummy = h.run(lic_argv)
                out["version"] = out["version"] or ver.strip()
                out["flavor"] = out["flavor"] or P.flavor_from_license(lic.strip())
                out["version_source"] = out["version_source"] or "modinfo -k %s nvidia" % k
                break
    out["source_trees"] = nvidia_source_trees(h)
    if src_override:
        if h.exists(src_override.rstrip("/") + "/nv-p2p.h"):
            tree, reason = describe_tree(h, src_override), "set by the user (gdrcopy_nvidia_src_dir)"
        else:
            tree, reason = None, "%s (gdrcopy_nvidia_src_dir) holds no nv-p2p.h" % src_override
    else:
        tree, reason = P.choose_nvidia_source(out["source_trees"], out["version"], out["flavor"])
    out["source_match"] = dict(tree or {}, reason=reason)
    return out


def nvidia_smi(h):
    """What nvidia-smi says: per-GPU query rows (CSV), the -q sections (BAR1, fabric, UUID) and the CUDA driver
    version; with two GPUs or more, the topology matrix (NVLink peers) and the NVLink states."""
    smi = h.live_tool("nvidia-smi")
    out = {"rows": [], "q": {"gpus": {}, "cuda_version": ""}, "topo": {}, "nvlink": {}, "ran": bool(smi)}
    if not smi:
        return out
    rc, text, dummy = h.run([smi, "--query-gpu=" + ",".join(P.SMI_QUERY_FIELDS), "--format=csv"])
    out["rows"] = P.parse_nvidia_smi_query(text) if rc == 0 else []
    rc, text, dummy = h.run([smi, "-q"])
    out["q"] = P.parse_nvidia_smi_q(text if rc == 0 else "")
    if len(out["rows"]) > 1:
        rc, text, dummy = h.run([smi, "topo", "-m"])
        out["topo"] = P.parse_nvidia_smi_topo(text) if rc == 0 else {}
        rc, text, dummy = h.run([smi, "nvlink", "-s"])
        out["nvlink"] = P.parse_nvidia_smi_nvlink(text) if rc == 0 else {}
    return out


def pci_gpus(h):
    """Bus ids (sysfs form) of NVIDIA display/3D controllers under /sys/bus/pci/devices."""
    found = []
    for bdf in h.listdir("/sys/bus/pci/devices"):
        base = "/sys/bus/pci/devices/" + bdf
        vendor = (h.read(base + "/vendor") or "").strip()
        klass = (h.read(base + "/class") or "").strip()
        if vendor == "0x10de" and klass[:6] in ("0x0300", "0x0302"):
            found.append(bdf)
    return found


def pci_link(h, bdf):
    base = "/sys/bus/pci/devices/%s/" % bdf
    speed = P.parse_link_speed(h.read(base + "current_link_speed"))
    max_speed = P.parse_link_speed(h.read(base + "max_link_speed"))
    return {"speed": speed, "max_speed": max_speed, "gen": P.pcie_generation(speed),
            "max_gen": P.pcie_generation(max_speed), "width": P.parse_int(h.read(base + "current_link_width")),
            "max_width": P.parse_int(h.read(base + "max_link_width"))}


def describe_gpu(h, bdf, row, q):
    """One GPU in one schema whether nvidia-smi is there or not: nvidia-smi's query row and -q sections when it
    is, else /proc/driver/nvidia and sysfs; the link, NUMA node, CPU affinity and BAR1 size always from sysfs
    when nvidia-smi does not say (the same types either way: ints or None, strings or '')."""
    base = "/sys/bus/pci/devices/%s/" % bdf
    bar1 = q.get("BAR1 Memory Usage", {})
    total = P.mib(bar1.get("Total")) or P.parse_pci_bar1_mib(h.read(base + "resource"))
    used = P.mib(bar1.get("Used"))
    info = P.parse_nvidia_gpu_information(h.read("/proc/driver/nvidia/gpus/%s/information" % bdf) or "")
    index = row.get("index")
    fabric = q.get("Fabric", {})
    return {
        "index": index if isinstance(index, int) else P.parse_int(info.get("Device Minor")),
        "name": row.get("name") or info.get("Model", ""),
        "uuid": q.get("", {}).get("GPU UUID") or info.get("GPU UUID", ""),
        "bus_id": bdf,
        "driver_version": row.get("driver_version") or (h.read("/sys/module/nvidia/version") or "").strip(),
        "memory_total_mib": row.get("memory.total"),
        "memory_used_mib": row.get("memory.used"),
        "bar1_total_mib": total,
        "bar1_used_mib": used,
        "bar1_used_pct": int(round(100.0 * used / total)) if total and used is not None else None,
        "numa_node": P.parse_int(h.read(base + "numa_node"), -1),
        "cpu_affinity": (h.read(base + "local_cpulist") or "").strip(),
        "link": pci_link(h, bdf),
        "fabric": {"state": fabric.get("State", ""), "status": fabric.get("Status", "")},
        "nvlink": {"active": 0, "inactive": 0, "peers": {}},
        "source": "nvidia-smi" if row else "sysfs",
    }


def gpu_facts(h, smi):
    """GPUs in nvidia-smi's order, then any that only sysfs knows (no nvidia-smi, or an unbound GPU); NVLink peers
    (topo -m: GPUn -> bonded link count) and link states (nvlink -s) by index."""
    gpus, seen = [], set()
    for row in smi["rows"]:
        bdf = P.smi_bus_to_sysfs(row.get("pci.bus_id") or "")
        gpus.append(describe_gpu(h, bdf, row, smi["q"]["gpus"].get(row.get("pci.bus_id"), {})))
        seen.add(bdf)
    if h.live:
        gpus += [describe_gpu(h, bdf, {}, {}) for bdf in pci_gpus(h) if bdf not in seen]
    for gpu in gpus:
        links = smi["nvlink"].get(gpu["index"], {})
        gpu["nvlink"] = {"active": links.get("active", 0), "inactive": links.get("inactive", 0),
                         "peers": smi["topo"].get("GPU%s" % gpu["index"], {}).get("nvlink", {})}
    return gpus


# --- GPUDirect RDMA -------------------------------------------------------------------------------------------

def rdma_facts(h):
    """RDMA devices (/sys/class/infiniband) with their PCI bus id, NUMA node and ports."""
    devices = []
    for name in h.listdir("/sys/class/infiniband"):
        base = "/sys/class/infiniband/" + name
        ports = []
        for port in h.listdir(base + "/ports"):
            pbase = "%s/ports/%s/" % (base, port)
            ports.append({"port": port, "state": (h.read(pbase + "state") or "").strip(),
                          "link_layer": (h.read(pbase + "link_layer") or "").strip(),
                          "rate": (h.read(pbase + "rate") or "").strip()})
        devices.append({"name": name, "pci": os.path.basename(h.readlink(base + "/device")),
                        "numa_node": P.parse_int(h.read(base + "/device/numa_node"), -1), "ports": ports})
    return devices


def ib_core_facts(h, loaded_modules):
    """ib_core and whether it has the peer-memory API that nvidia-peermem needs (MLNX_OFED / DOCA-OFED).

    Evidence, strongest first: /sys/kernel/mm/memory_peers/<client> exists only once a peer-memory client
    (nvidia-peermem registers as nv_mem) registered with ib_core's API; /proc/kallsyms lists the exported
    ib_register_peer_memory_client whenever the loaded ib_core has the API (names are listed even when
    kptr_restrict hides the addresses). /sys/module/ib_core/version exists with OFED's ib_core only, and is
    reported but not taken as proof."""
    present = h.isdir("/sys/module/ib_core")
    out = {"loaded": present, "builtin": present and "ib_core" not in loaded_modules
           and not h.exists("/sys/module/ib_core/initstate"),
           "version": (h.read("/sys/module/ib_core/version") or "").strip(), "peer_memory_api": None,
           "peer_clients": h.listdir("/sys/kernel/mm/memory_peers"), "evidence": ""}
    if out["peer_clients"]:
        out.update(peer_memory_api=True, evidence="/sys/kernel/mm/memory_peers lists " + ", ".join(
            out["peer_clients"]))
    elif not present:
        out["evidence"] = "ib_core is not loaded"
    else:
        kallsyms = h.read("/proc/kallsyms") if h.live else None
        if kallsyms:
            out["peer_memory_api"] = " ib_register_peer_memory_client" in kallsyms
            out["evidence"] = "/proc/kallsyms %s ib_register_peer_memory_client" % (
                "lists" if out["peer_memory_api"] else "has no")
        else:
            out["evidence"] = "/proc/kallsyms is not readable"
    return out


LEGACY_PEERMEM_UNITS = ("/etc/systemd/system/nv_peer_mem.service", "/lib/systemd/system/nv_peer_mem.service",
                        "/usr/lib/systemd/system/nv_peer_mem.service", "/etc/init.d/nv_peer_mem")


def peermem_facts(h, kernels, loaded_modules):
    release = kernels["running"] or ([k["release"] for k in kernels["installed"]] or [""])[-1]

    def module(name, file_names):
        files = [f for n in file_names for f in module_files(h, release, n)] if release else []
        refcnt = (h.read("/sys/module/%s/refcnt" % name) or "").strip()
        return {"loaded": h.isdir("/sys/module/" + name), "available": bool(files), "files": files,
                "version": (h.read("/sys/module/%s/version" % name) or "").strip(),
                "refcount": int(refcnt) if refcnt.isdigit() else -1,
                "kernels": dict((k["release"], bool([f for n in file_names for f in module_files(h, k["release"], n)]))
                                for k in kernels["installed"])}

    legacy = module("nv_peer_mem", ("nv_peer_mem",))
    legacy["service"] = next((u for u in LEGACY_PEERMEM_UNITS if h.exists(u)), "")
    return {"nvidia_peermem": module("nvidia_peermem", ("nvidia-peermem", "nvidia_peermem")),
            "nv_peer_mem": legacy,
            "ib_core": ib_core_facts(h, loaded_modules),
            # the nvidia_peermem role's modprobe.d files that are there (gdrcopy_peermem writes or removes them)
            "blacklist_files": sorted(p for p in PM.BLACKLIST.values() if h.exists(p) or h.readlink(p))}


# --- gdrdrv, libgdrapi, the install -----------------------------------------------------------------------------

def device_facts(h, major):
    dev = {"path": "/dev/gdrdrv", "exists": False, "is_char": False, "major": -1, "minor": -1, "mode": "",
           "group": "", "ok": False}
    st = h.stat("/dev/gdrdrv")
    if st is None:
        return dev
    dev["exists"] = True
    dev["is_char"] = stat.S_ISCHR(st.st_mode)
    dev["mode"] = "%04o" % stat.S_IMODE(st.st_mode)
    try:
        dev["group"] = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        dev["group"] = str(st.st_gid)
    if dev["is_char"]:
        dev["major"], dev["minor"] = os.major(st.st_rdev), os.minor(st.st_rdev)
    dev["ok"] = dev["is_char"] and major >= 0 and dev["major"] == major and dev["minor"] == 0
    return dev


def installed_srcversion(h):
    modinfo = h.live_tool("modinfo")
    if not modinfo:
        return ""
    rc, out, dummy = h.run([modinfo, "-F", "srcversion", "gdrdrv"])
    return out.strip() if rc == 0 else ""


def read_stamps(h, pattern):
    """{dir: stamp} for every JSON stamp file matching pattern (unreadable or bad JSON -> {})."""
    stamps = {}
    for path in h.glob(pattern):
        try:
            stamps[os.path.dirname(path)] = json.loads(h.read(path) or "")
        except ValueError:
            stamps[os.path.dirname(path)] = {}
    return stamps


def install_stamps(h, prefix):
    """{dir: stamp} of every library install under prefix whose files are what gdrcopy-install put there (its
    .gdrcopy-manifest); an install with a file changed or missing since, or without a manifest, reads
    {"damaged": [paths]} instead of its stamp, so it is not current and is installed again."""
    stamps = read_stamps(h, prefix.rstrip("/") + "/*/.gdrcopy-install.json")
    for d in [d for d, stamp in stamps.items() if stamp]:
        try:
            manifest = PIPE.parse_sha256sums(h.read(d + "/.gdrcopy-manifest") or "")
        except ValueError:
            manifest = None
        if not manifest:
            stamps[d] = {"damaged": [d + "/.gdrcopy-manifest"]}
            continue
        damaged = sorted(d + "/" + rel for rel, digest in manifest.items() if file_sha256(h, d + "/" + rel) != digest)
        if damaged:
            stamps[d] = {"damaged": damaged}
    return stamps


def file_sha256(h, path):
    """The sha256 of a regular file's bytes; '' when it is missing, a link or unreadable."""
    full = h.path(path)
    if os.path.islink(full) or not os.path.isfile(full):
        return ""
    try:
        return PIPE.file_sha256(full)
    except (IOError, OSError):
        return ""


def gdrdrv_facts(h):
    loaded = h.isdir("/sys/module/gdrdrv")
    refcnt = (h.read("/sys/module/gdrdrv/refcnt") or "").strip()
    major = P.parse_proc_devices(h.read("/proc/devices") or "")["char"].get("gdrdrv", -1)
    return {
        "loaded": loaded,
        "refcount": int(refcnt) if refcnt.isdigit() else -1,
        "srcversion": (h.read("/sys/module/gdrdrv/srcversion") or "").strip(),
        "installed_srcversion": installed_srcversion(h),
        "params": P.parse_gdrdrv_params(h.read("/proc/driver/gdrdrv/params") or ""),
        "major": major,
        "device": device_facts(h, major),
    }


def library_facts(h, prefix):
    """libgdrapi as the loader finds it (ldconfig -p) on a running system; in an image, where the loader cache is
    not ours to run, the library the install prefix holds (<prefix>/current/lib/libgdrapi.so.2)."""
    out = {"paths": [], "version": ""}
    if not h.live:
        lib = prefix.rstrip("/") + "/current/lib/libgdrapi.so.2"
        if h.exists(lib):
            v = re.search(r"libgdrapi\.so\.(\d+\.\d+)", os.path.realpath(h.resolve(lib)))
            out = {"paths": [lib], "version": v.group(1) if v else ""}
        return out
    ldconfig = h.tool("ldconfig")
    if not ldconfig:
        return out
    rc, text, dummy = h.run([ldconfig, "-p"])
    if rc != 0:
        return out
    for line in text.splitlines():
        m = re.match(r"^\s*(libgdrapi\.so\S*) .*=> (\S+)$", line)
        if m:
            out["paths"].append(m.group(2))
            if m.group(1) == "libgdrapi.so.2":
                v = re.search(r"libgdrapi\.so\.(\d+\.\d+)", os.path.realpath(h.path(m.group(2))))
                out["version"] = v.group(1) if v else ""
    return out


def gdrcopy_facts(h, prefix, release, library, gdrdrv):
    """The release pinned, installed (<prefix>/current) and running (library, driver), and the test programs."""
    current = prefix.rstrip("/") + "/current"
    installed = os.path.basename(os.path.realpath(h.resolve(current))) if h.exists(current) else ""
    tests = {}
    for name, candidates in TEST_PROGRAMS.items():
        paths = [current + "/bin/" + c for c in candidates if h.exists(current + "/bin/" + c)]
        tests[name] = paths[0] if paths else ""
    driver = gdrdrv["params"].get("version", "")
    return {"release": release or "", "installed_release": installed, "library_version": library["version"],
            "driver_version": driver,
            "skew": bool(library["version"] and driver and P.major_minor(driver) != library["version"]),
            "tests_dir": current + "/bin", "tests": tests}


def configured_backend(h):
    """gdrcopy_backend as the last install recorded it (the driver record): gdrdrv or dmabuf; '' without a record."""
    try:
        return PIPE.load_driver_record(h.path(PIPE.DRIVER_RECORD))["backend"]
    except PIPE.PipelineError:
        return ""


def backend_facts(facts, configured=""):
    """Which backend gdr_open would use: gdrdrv, the 2.6 DMA-BUF path, or none, with the reasons; and the one the
    last install chose (configured)."""
    gc = facts["gdrcopy"]
    ok, why = P.dmabuf_availability(facts["cuda"]["driver_version"], gc["library_version"] or gc["release"])
    problem = V.gdrdrv_problem(facts) if facts["live"] else "not a running host (image)"
    out = P.choose_backend(problem, ok, why, configured)
    out["dmabuf"] = {"available": ok, "reason": why}
    out["configured"] = configured
    return out


# --- gdrcopy's own tests --------------------------------------------------------------------------------------

def tests_skip_reason(facts, names):
    if not names:
        return "no test asked for"
    if not facts["live"]:
        return "not a running host (image): nothing to run the tests on"
    if not facts["gpus"]:
        return "no NVIDIA GPU on this host: only the GPU-less smoke check applies"
    missing = [n for n in names if not facts["gdrcopy"]["tests"][n]]
    if missing:
        return ("gdrcopy's test programs (%s) are not installed under %s: the gdrcopy role installs them when "
                "CUDA is present" % (", ".join(missing), facts["gdrcopy"]["tests_dir"]))
    return ""


def test_argv(h, facts, name, gpu_id, timeout):
    path = facts["gdrcopy"]["tests"][name]
    argv = [path]
    takes_gpu = name != "sanity" or P.version_tuple(P.major_minor(facts["gdrcopy"]["installed_release"])) >= (2, 5)
    if takes_gpu:
        argv += ["-d", str(gpu_id)]
    wrapper = h.tool("timeout")
    return ([wrapper, "--kill-after=10", str(timeout)] + argv) if wrapper else argv


PARSERS = {"sanity": P.parse_sanity, "copybw": P.parse_copybw, "copylat": P.parse_copylat}


def run_tests(h, facts, names, gpu_id, timeout):
    """Run gdrcopy's own test programs on GPU gpu_id; each result is parsed, with its argv and exit code."""
    out = {"ran": False, "reason": tests_skip_reason(facts, names), "gpu_id": gpu_id}
    if out["reason"]:
        return out
    out["ran"] = True
    for name in names:
        argv = test_argv(h, facts, name, gpu_id, timeout)
        rc, stdout, stderr = h.run(argv)
        result = PARSERS[name](stdout + "\n" + stderr, rc)
        if rc == 124:
            result.update(ok=False, msg="timed out after %d s" % timeout, error="timed out after %d s" % timeout)
        out[name] = dict(result, argv=argv)
    return out


SMOKE_PROGRAM = PATHS["smoke_program"]
SMOKE_TIMEOUT = 60  # seconds; gdr_open on a wedged driver must not hang the run


def smoke_check(h, expect, facts=None):
    """The gdrcopy role's smoke check (gdr_open through the installed library; Host.smoke), as the role records
    it. The helper's presence says the role installed the library. With the DMA-BUF backend (the last install
    chose it: facts' backend.configured) gdr_open goes through the CUDA driver, which needs a GPU: without one the
    check does not apply (skipped), as gdrdrv's GPU-less check does not."""
    none = {"ran": False, "method": "none", "passed": False, "expected": expect}
    dmabuf = ((facts or {}).get("backend") or {}).get("configured") == "dmabuf"
    if not h.live:
        return dict(none, msg="not a running host (image): nothing to open")
    if not h.exists(SMOKE_PROGRAM):
        return dict(none, msg="%s is not installed: run the gdrcopy role" % SMOKE_PROGRAM)
    if dmabuf and not facts["gpus"]:
        return dict(none, skipped=True, msg="not run: the DMA-BUF backend opens through the CUDA driver and a GPU, "
                                            "and this host has no NVIDIA GPU")
    rc, out, err = h.smoke(expect, dmabuf=True) if dmabuf else h.smoke(expect)
    try:
        result = json.loads(out)
    except ValueError:
        return dict(none, msg="%s printed no result (exit code %d): %s" % (SMOKE_PROGRAM, rc, (err or out).strip()))
    return dict(result, ran=True, method="dmabuf" if dmabuf else "library")


PRIVATE_KEY = re.compile(rb"^-----BEGIN ([A-Z0-9 ]+ )?PRIVATE KEY-----")


def file_digest(h, path):
    """'link:<target>' for a link, else the sha256 of the content with the mode and owner; '' when unreadable.
    A PEM private key is never digested: the sha256 of its public half stands for it (openssl pkey -pubout), so
    no digest of a secret leaves the host, and a replaced key is still a change."""
    full = h.path(path)
    if os.path.islink(full):
        return "link:" + os.readlink(full)
    try:
        st = os.stat(full)
        with open(full, "rb") as f:
            head = f.read(64)
        if PRIVATE_KEY.match(head):
            openssl = h.tool("openssl")
            rc, out, dummy = h.run([openssl, "pkey", "-in", full, "-pubout"]) if openssl else (1, "", "")
            kind = "pubkey-sha256" if rc == 0 else "private-key-size"
            digest = hashlib.sha256((out if rc == 0 else str(st.st_size)).encode("utf-8")).hexdigest()
        else:
            kind, digest = "sha256", PIPE.file_sha256(full)
    except (IOError, OSError):
        return ""
    return "%s:%s mode:%04o uid:%d gid:%d" % (kind, digest, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)


def managed_files(h, facts, prefix, watch=()):
    """{path: file_digest} of every file the roles manage that exists (C.MANAGED_PATHS and watch, the globs of
    the paths that depend on inputs: a non-default key dir, the host's key pairs), and of every gdrdrv module."""
    paths = {prefix.rstrip("/") + "/current"}
    for pattern in tuple(C.MANAGED_PATHS) + tuple(watch):
        paths.update(p for p in h.glob(pattern) if not os.path.isdir(h.path(p)) or os.path.islink(h.path(p)))
    for k in facts["kernel"]["installed"]:
        paths.update(k["gdrdrv"])
    return dict((p, file_digest(h, p)) for p in sorted(paths) if os.path.lexists(h.path(p)))


KERNEL_HOOK_STATUS = PATHS["hook_status"]  # files/gdrcopy-kernel-hook writes it


def read_json_object(h, path):
    """The JSON object in path; None when it is missing, unreadable, not JSON or not an object."""
    try:
        value = json.loads(h.read(path) or "null")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def kernel_hook_facts(h):
    status = read_json_object(h, KERNEL_HOOK_STATUS) or {}
    keys = ("kernel", "ok", "msg", "time")
    if not all(k in status for k in keys):
        return {}
    return dict([(k, status[k]) for k in keys] + [("state", status.get("state") or (
        "installed" if status["ok"] else "failed"))])


def awaiting_signature(h, kernels):
    """The installed kernels whose gdrdrv is built but waits for the controller's signature (the driver record signs on
    the controller, sign_cert): an unsigned build is there and the module installed for that kernel is missing or
    another one. The kernel hook leaves a kernel installed between runs this way; the next run signs and installs
    it."""
    try:
        spec = PIPE.load_driver_record(h.path(PIPE.DRIVER_RECORD))
    except PIPE.PipelineError:
        return []
    if not spec["sign_cert"]:
        return []
    out = []
    for kern in kernels["installed"]:
        built = os.path.join(PIPE.driver_build_dir(spec, kern["release"]), PIPE.MODULE_FILE)
        if not h.exists(built):
            continue
        dest = PIPE.driver_dest(spec, kern["release"], "/lib/modules")
        if PIPE.sha256_or_empty(h.path(dest)) != PIPE.sha256_or_empty(h.path(built)) and not signed_file(h.path(built)):
            out.append(kern["release"])
    return out


def last_verify(h):
    """The tests and the smoke check of the last verified run ({tests, smoke}, from its record), or {}: what the
    status report shows for a host that this run did not verify, so that a status run alone says what site.yml
    said."""
    record = read_json_object(h, C.RECORD_PATH) or {}
    if not isinstance(record.get("verify"), dict):
        return {}
    return {"tests": record["verify"], "smoke": record.get("smoke") if isinstance(record.get("smoke"), dict) else {}}


def signed_file(path):
    """Whether a module file ends with an appended signature (the controller signed the build: it waits for an
    install, as in a key rotation that holds the installed module, not for a signature)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - len(PIPE.SIG_MAGIC)))
            return f.read() == PIPE.SIG_MAGIC
    except (IOError, OSError):
        return False


def converged_facts(h, facts, prefix, inputs, watch=(), targets=()):
    state = C.state_fingerprint(facts, managed_files(h, facts, prefix, watch))
    record = read_json_object(h, C.RECORD_PATH)  # a record that is JSON but no object is no record
    diff = C.differences(record, state, inputs)
    new = C.new_kernels(record, state, inputs) if diff else []
    if new and (set(new) - set(targets or new) or not replayable(h)):
        new = []
    out = {"ok": not diff, "differences": diff, "state": state, "record": C.RECORD_PATH, "new_kernels": new}
    if (new or not diff) and isinstance(record.get("verify"), dict):
        out["verified_tests"] = record["verify"]
    return out


def replayable(h):
    """Whether the driver record of the last install can build gdrdrv again here: readable, valid, its tarball there."""
    try:
        spec = PIPE.load_driver_record(h.path(PIPE.DRIVER_RECORD))
    except PIPE.PipelineError:
        return False
    return os.path.isfile(h.path(spec["tarball"])) and os.path.isfile(h.path(spec["build_helper"]))


def package_facts(h, names):
    """{name: installed} for the package names given, from dpkg's status file, else rpm; {} when neither answers
    (the roles then ask the package manager for every package, as they would without this read)."""
    if not names:
        return {}
    status = h.read("/var/lib/dpkg/status")
    if status is not None:
        have = P.parse_dpkg_status(status)
    else:
        rpm = h.tool("rpm")
        if not rpm:
            return {}
        argv = [rpm] + (["--root", h.root] if h.root != "/" else []) + ["-q", "--queryformat", "installed %{NAME}\\n"]
        dummy, text, dummy = h.run(argv + sorted(set(names)))
        have = P.parse_rpm_installed(text)
    return dict((n, n in have) for n in names)


def upstream_facts(h, kernels=None):
    """What upstream's packaging or source install left on this host: {packages: [{name, version}], dkms:
    [{version, kernels}], files: [paths], modules: [gdrdrv files outside this project's module subdir]}, each empty
    when there is none. kernels: kernel_facts' installed list (read here when not given)."""
    status = h.read("/var/lib/dpkg/status")
    if status is not None:
        versions = P.parse_dpkg_versions(status, P.UPSTREAM_PACKAGES)
    else:
        rpm = h.tool("rpm")
        versions = {}
        if rpm:
            argv = [rpm] + (["--root", h.root] if h.root != "/" else []) + [
                "-q", "--queryformat", "installed %{NAME} %{VERSION}-%{RELEASE}\\n"] + list(P.UPSTREAM_PACKAGES)
            versions = P.parse_rpm_versions(h.run(argv)[1])
    dkms = []
    for version in h.listdir("/var/lib/dkms/gdrdrv"):
        top = "/var/lib/dkms/gdrdrv/" + version
        if version in ("original_module",) or not h.isdir(top) or h.readlink(top):
            continue
        built = sorted(k for k in h.listdir(top) if k not in ("build", "source") and h.isdir(top + "/" + k))
        dkms.append({"version": version, "kernels": built})
    files = [f for f in P.UPSTREAM_FILES if h.exists(f)]
    for pattern in P.UPSTREAM_GLOBS:
        files += h.glob(pattern)
    files += [d for d in h.glob("/usr/src/gdrdrv-*") if h.exists(d + "/dkms.conf")]
    if kernels is None:
        kernels = [{"release": rel, "gdrdrv": module_files(h, rel, "gdrdrv")} for rel in installed_releases(h)]
    ours = "/%s/" % PIPE.MODULE_SUBDIR
    modules = [path for k in kernels for path in k["gdrdrv"] if ours not in path]
    return {"packages": [{"name": n, "version": versions[n]} for n in sorted(versions)], "dkms": dkms,
            "files": sorted(set(files)), "modules": modules}


# --- the whole picture ----------------------------------------------------------------------------------------

def gather(module, params, host=None):
    """Every fact for params (the module's options), plus the verdict (blockers, concerns, health)."""
    h = host or Host(module, params["root"], image=params.get("image", False))
    mok = secure_boot_facts(h, params.get("mok_cert"), params.get("mok_candidates"))
    kernels = kernel_facts(h, mok["mok"]["serial"])
    proc_modules = h.read("/proc/modules") or ""
    loaded = P.parse_proc_modules(proc_modules)
    smi = nvidia_smi(h)
    library = library_facts(h, params["prefix"])
    gdrdrv = gdrdrv_facts(h)
    facts = {
        "live": h.live,
        "builds": dict(read_stamps(h, params["build_root"] + "/*/lib/.gdrcopy-stamp.json"),
                       **read_stamps(h, params["build_root"] + "/*/driver/*/.gdrcopy-stamp.json")),
        "installs": install_stamps(h, params["prefix"]),
        "root": params["root"],
        "kernel": kernels,
        "secure_boot": mok,
        "nvidia": nvidia_facts(h, kernels, params.get("nvidia_src_dir")),
        "gpus": gpu_facts(h, smi),
        "gdrdrv": gdrdrv,
        "library": library,
        "gdrcopy": gdrcopy_facts(h, params["prefix"], params.get("release"), library, gdrdrv),
        "cuda": {"home": params["cuda_home"], "present": os.path.isfile(h.path(params["cuda_home"] + "/include/cuda.h")),
                 "driver_version": smi["q"]["cuda_version"],
                 "driver_version_source": "nvidia-smi" if smi["q"]["cuda_version"] else ""},
        "peermem": peermem_facts(h, kernels, loaded),
        "rdma": rdma_facts(h),
        "load_order": [n for n in P.load_order(proc_modules) if n.startswith("nvidia") or n in ORDER_MODULES],
        "tools": dict((t, h.tool(t)) for t in TOOLS),
        "kernel_hook": kernel_hook_facts(h),
        "awaiting_signature": awaiting_signature(h, kernels),
        "last_verify": last_verify(h),
        "groups": dict((g, g in P.parse_group_names(h.read("/etc/group") or "")) for g in params.get("groups") or []),
        "packages": package_facts(h, params.get("packages") or []),
        "upstream": upstream_facts(h, kernels["installed"]),
        # the OS facts this run read already (O(os_facts)) describe the system the module runs on, not a tree
        "os": (h.root == "/" and complete_os_facts(params.get("os_facts"))) or os_facts(module, h),
    }
    gdrdrv["load_refusal"] = P.load_refusal(facts)
    facts["signing"] = V.signing_state(facts, P.parse_proc_keys(h.read("/proc/keys") or "") if h.live else ())
    facts["backend"] = backend_facts(facts, configured_backend(h))
    if params.get("peermem_state"):
        facts["peermem"]["plan"] = P.peermem_plan(params["peermem_state"], facts)
    facts["numa_mismatches"] = P.numa_mismatches(facts["gpus"], facts["rdma"])
    facts["findings"], facts["blockers"], facts["concerns"], facts["health"] = V.assess(facts)
    facts["tests"] = run_tests(h, facts, params.get("run_tests") or [], params.get("gpu_id") or 0,
                               params.get("tests_timeout") or 900)
    if params.get("smoke"):
        facts["smoke"] = smoke_check(h, params["smoke"], facts)
    if params.get("converged_inputs") is not None:
        facts["converged"] = converged_facts(h, facts, params["prefix"], params["converged_inputs"],
                                             params.get("watch") or [], params.get("kernels") or [])
    return facts
