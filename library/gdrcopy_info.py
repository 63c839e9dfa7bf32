#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrcopy_info
short_description: Report the state of gdrcopy, the NVIDIA driver and the kernels of a host
description:
  - Read-only. Gathers what the gdrcopy roles decide by, and what an admin checks every day, in one pass over
    C(/proc), C(/sys), C(/lib/modules), C(/usr/src) and a few commands (C(modinfo), C(ldconfig)).
  - A missing tool or an unloaded driver is reported as data, never as a failure.
  - Always returns C(changed=false); gives full data in check mode.
version_added: "0.1.0"
author: gdrcopy-ansible contributors
options:
  root:
    description:
      - Root of the file system to inspect. C(/) for the running host; an image root (chroot, golden image) to
        inspect an image, in which case nothing about the running kernel is reported as the image's.
    type: path
    default: /
  cuda_home:
    description: Where CUDA would be (its C(include/cuda.h) decides whether the test programs can be built).
    type: path
    default: /usr/local/cuda
  nvidia_src_dir:
    description:
      - An NVIDIA source directory (holding nv-p2p.h) chosen by the user; reported as C(nvidia.source_match)
        instead of the automatic match.
    type: path
  build_root:
    description: The gdrcopy role's build root; its build stamps are reported under C(builds).
    type: path
    default: /var/lib/gdrcopy-ansible/build
  prefix:
    description: The gdrcopy role's install prefix; its install stamps are reported under C(installs).
    type: path
    default: /opt/gdrcopy
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
notes:
  - Parsing lives in C(module_utils/gdrcopy_parsers.py) as pure functions, unit-tested with captured text.
"""

EXAMPLES = r"""
- name: Gather gdrcopy facts
  gdrcopy_info:
  register: gdrcopy_state

- name: Show which kernels have no headers
  ansible.builtin.debug:
    msg: "{{ gdrcopy_state.kernel.installed | rejectattr('headers') | map(attribute='release') }}"
"""

RETURN = r"""
kernel:
  description: Running and installed kernels, module loading and signature enforcement.
  returned: always
  type: dict
  contains:
    running:
      description: C(uname -r) of the running kernel (meaningful only when I(root=/)).
      type: str
    installed:
      description: One entry per installed kernel, oldest first, with C(release), C(headers) (bool),
        C(build_dir), C(sig_hash) (C(CONFIG_MODULE_SIG_HASH) or empty) and C(gdrdrv) (paths of gdrdrv modules).
      type: list
      elements: dict
    modules_disabled:
      description: C(/proc/sys/kernel/modules_disabled) is 1 (no module can be loaded until reboot).
      type: bool
    sig_enforce:
      description: Module signatures are enforced (C(/sys/module/module/parameters/sig_enforce)).
      type: bool
    lockdown:
      description: The active kernel lockdown mode (none, integrity, confidentiality) or empty.
      type: str
    efi:
      description: The host booted through EFI.
      type: bool
nvidia:
  description: The NVIDIA driver and its kernel source trees.
  returned: always
  type: dict
  contains:
    loaded:
      description: The nvidia module is loaded.
      type: bool
    version:
      description: Driver version, from the loaded module, else from the installed module (modinfo), else empty.
      type: str
    flavor:
      description: C(open) or C(proprietary) (the kernel module's license), or empty when unknown.
      type: str
    version_source:
      description: Where the version came from (C(/sys/module/nvidia/version), C(modinfo), ...).
      type: str
    source_trees:
      description: NVIDIA kernel source trees found (C(dir) holds nv-p2p.h), with C(version) and C(flavor).
      type: list
      elements: dict
    source_match:
      description: The source tree matching the driver's version and flavor (C(dir), C(version), C(flavor)),
        or empty, and C(reason) in words.
      type: dict
gdrdrv:
  description: The gdrdrv kernel module and its device node.
  returned: always
  type: dict
  contains:
    loaded:
      description: gdrdrv is loaded.
      type: bool
    refcount:
      description: Users of the loaded module (processes holding C(/dev/gdrdrv)); -1 when not loaded.
      type: int
    srcversion:
      description: srcversion of the loaded module (compare with the installed file's to see a pending reload).
      type: str
    installed_srcversion:
      description: srcversion of the gdrdrv that C(modprobe gdrdrv) would load on the running kernel, or empty.
      type: str
    params:
      description: C(/proc/driver/gdrdrv/params) parsed (gdrdrv 2.5+), with C(version) and module parameters.
      type: dict
    major:
      description: The char major of gdrdrv in C(/proc/devices), or -1.
      type: int
    device:
      description: C(/dev/gdrdrv) as it is (C(exists), C(is_char), C(major), C(mode), C(group)) and C(ok) when
        it is a char device with gdrdrv's current major.
      type: dict
library:
  description: libgdrapi as the dynamic linker sees it.
  returned: always
  type: dict
  contains:
    paths:
      description: libgdrapi.so.* paths known to ldconfig.
      type: list
      elements: str
    version:
      description: MAJOR.MINOR of the library ldconfig resolves for libgdrapi.so.2, from its file name.
      type: str
builds:
  description: Build stamps under I(build_root) (path of the build dir -> the inputs it was built from).
  returned: always
  type: dict
installs:
  description: Install stamps under I(prefix) (path of the versioned install dir -> the build it came from).
  returned: always
  type: dict
cuda:
  description: Whether CUDA headers are present (C(present), C(home)).
  returned: always
  type: dict
tools:
  description: Which helper commands exist on the host (name -> path or empty).
  returned: always
  type: dict
"""

import glob
import grp
import json
import os
import re
import stat

from ansible.module_utils.basic import AnsibleModule

try:  # the controller's module_utils path (ansible.cfg, molecule.yml)
    from ansible.module_utils import gdrcopy_parsers as P
except ImportError:  # pragma: no cover - unit tests import it from the repository
    import gdrcopy_parsers as P  # noqa: F401

TOOLS = ("modprobe", "modinfo", "depmod", "ldconfig", "mokutil", "nvidia-smi", "dkms", "make", "gcc")


class Host:
    """File access relative to a root, and commands through AnsibleModule.run_command."""

    def __init__(self, module, root):
        self.module = module
        self.root = root.rstrip("/") or "/"

    def path(self, p):
        return p if self.root == "/" else os.path.join(self.root, p.lstrip("/"))

    def read(self, p):
        try:
            with open(self.path(p), "r", errors="replace") as f:
                return f.read()
        except (IOError, OSError):
            return None

    def exists(self, p):
        return os.path.exists(self.resolve(p))

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

    def listdir(self, p):
        try:
            return sorted(os.listdir(self.path(p)))
        except OSError:
            return []

    def glob(self, pattern):
        """Paths matching pattern (** recurses), as seen from inside the root."""
        found = glob.glob(self.path(pattern), recursive=True)
        if self.root == "/":
            return sorted(found)
        return sorted("/" + os.path.relpath(g, self.root) for g in found)

    def tool(self, name):
        return self.module.get_bin_path(name, opt_dirs=["/sbin", "/usr/sbin", "/usr/local/sbin"]) or ""

    def run(self, argv):
        rc, out, err = self.module.run_command(argv, environ_update={"LC_ALL": "C"})
        return rc, out, err


def module_files(h, release, name):
    """Files of module `name` for a kernel: what modules.dep lists (what modprobe loads), plus any copy under
    updates/ or extra/ that depmod has not seen yet. Cheaper than walking the whole module tree."""
    base = "/lib/modules/%s" % release
    found = set(base + "/" + rel for rel in P.modules_dep_paths(h.read(base + "/modules.dep") or "", name))
    for sub in ("updates", "extra"):
        found.update(h.glob("%s/%s/**/%s.ko*" % (base, sub, name)))
    return sorted(found)


def kernel_facts(h):
    installed = []
    for rel in P.parse_kernel_release_dirs(h.listdir("/lib/modules")):
        has_image = h.exists("/boot/vmlinuz-%s" % rel) or h.exists("/lib/modules/%s/vmlinuz" % rel)
        if not (has_image and os.path.isdir(h.path("/lib/modules/%s/kernel" % rel))):
            continue  # leftovers of a removed kernel (only updates/ or extra/ remain)
        build = "/lib/modules/%s/build" % rel
        config = h.read("/boot/config-%s" % rel) or h.read(build + "/.config") or ""
        kconf = P.parse_kconfig(config)
        installed.append({
            "release": rel,
            "headers": h.exists(build + "/Makefile"),
            "build_dir": build,
            "sig_hash": kconf.get("CONFIG_MODULE_SIG_HASH", ""),
            "sig_force": kconf.get("CONFIG_MODULE_SIG_FORCE") == "y",
            "gdrdrv": module_files(h, rel, "gdrdrv"),
        })
    running = os.uname()[2]
    lockdown = h.read("/sys/kernel/security/lockdown") or ""
    m = re.search(r"\[(\w+)\]", lockdown)
    return {
        "running": running if h.root == "/" else "",
        "running_installed": h.root == "/" and any(k["release"] == running for k in installed),
        "installed": installed,
        "modules_disabled": (h.read("/proc/sys/kernel/modules_disabled") or "0").strip() == "1",
        "sig_enforce": (h.read("/sys/module/module/parameters/sig_enforce") or "").strip() == "Y",
        "lockdown": m.group(1) if m else "",
        "efi": os.path.isdir(h.path("/sys/firmware/efi")),
    }


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
    out = {"loaded": os.path.isdir(h.path("/sys/module/nvidia")), "version": "", "flavor": "", "version_source": ""}
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
            rc, ver, _ = h.run(argv)
            if rc == 0 and ver.strip():
                rc2, lic, _ = h.run(lic_argv)
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


def device_facts(h, major):
    dev = {"path": "/dev/gdrdrv", "exists": False, "is_char": False, "major": -1, "minor": -1, "mode": "",
           "group": "", "ok": False}
    try:
        st = os.stat(h.path("/dev/gdrdrv"))
    except OSError:
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
    modinfo = h.tool("modinfo")
    if not modinfo or h.root != "/":
        return ""
    rc, out, _ = h.run([modinfo, "-F", "srcversion", "gdrdrv"])
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


def gdrdrv_facts(h):
    loaded = os.path.isdir(h.path("/sys/module/gdrdrv"))
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


def library_facts(h):
    out = {"paths": [], "version": ""}
    ldconfig = h.tool("ldconfig")
    if not ldconfig or h.root != "/":
        return out
    rc, text, _ = h.run([ldconfig, "-p"])
    if rc != 0:
        return out
    for line in text.splitlines():
        m = re.match(r"^\s*(libgdrapi\.so\S*) .*=> (\S+)$", line)
        if m:
            out["paths"].append(m.group(2))
            if m.group(1) == "libgdrapi.so.2":
                real = os.path.realpath(m.group(2))
                v = re.search(r"libgdrapi\.so\.(\d+\.\d+)", real)
                out["version"] = v.group(1) if v else ""
    return out


def gather(module, root, cuda_home, build_root, prefix, nvidia_src_dir=None):
    h = Host(module, root)
    kernels = kernel_facts(h)
    return {
        "builds": dict(read_stamps(h, build_root + "/*/lib/.gdrcopy-stamp.json"),
                       **read_stamps(h, build_root + "/*/driver/*/.gdrcopy-stamp.json")),
        "installs": read_stamps(h, prefix + "/*/.gdrcopy-install.json"),
        "root": root,
        "kernel": kernels,
        "nvidia": nvidia_facts(h, kernels, nvidia_src_dir),
        "gdrdrv": gdrdrv_facts(h),
        "library": library_facts(h),
        "cuda": {"home": cuda_home, "present": os.path.isfile(h.path(cuda_home + "/include/cuda.h"))},
        "tools": dict((t, h.tool(t)) for t in TOOLS),
    }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            cuda_home=dict(type="path", default="/usr/local/cuda"),
            build_root=dict(type="path", default="/var/lib/gdrcopy-ansible/build"),
            prefix=dict(type="path", default="/opt/gdrcopy"),
            nvidia_src_dir=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    result = gather(module, p["root"], p["cuda_home"], p["build_root"], p["prefix"], p["nvidia_src_dir"])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
