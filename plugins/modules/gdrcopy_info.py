#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrcopy_info
short_description: Report the state of gdrcopy, the NVIDIA driver, the GPUs and the kernels of a host
description:
  - Read-only. Gathers what the gdrcopy roles decide by, and what an admin checks every day, in one pass over
    C(/proc), C(/sys), C(/lib/modules), C(/usr/src) and a few commands (C(modinfo), C(ldconfig), C(nvidia-smi),
    C(mokutil), C(openssl)), and judges it, with C(blockers) and C(concerns) (warnings) in plain sentences and a C(health) of
    green, amber or red.
  - A missing tool or an unloaded driver is reported as data, never as a failure.
  - Commands that describe the running system (C(nvidia-smi), C(mokutil), C(ldconfig), C(modinfo) by module name)
    run only when I(root=/); an image root is read from its files (and C(modinfo -b root)).
  - With I(run_tests), also runs gdrcopy's own test programs (C(gdrcopy_sanity), C(gdrcopy_copybw),
    C(gdrcopy_copylat); C(sanity)... for 2.3) from C(<prefix>/current/bin) on one GPU and parses their results.
    They briefly allocate and pin GPU memory and change nothing on the host.
  - Always returns C(changed=false); gives full data in check mode.
version_added: "0.1.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  root:
    description:
      - Root of the file system to inspect. C(/) for the running host; an image root (chroot, golden image) to
        inspect an image, in which case nothing about the running kernel is reported as the image's.
    type: path
    default: /
  image:
    description:
      - Inspect I(root) as an image even when it is C(/). Its kernels, modules, library and NVIDIA source are read
        from its files, and nothing of the running system (C(/proc), C(/sys), C(/dev), C(/run), C(nvidia-smi),
        C(mokutil)) is reported as the image's. The gdrcopy roles set it in image mode.
      - Inside a chroot (Ansible's chroot connection, a Packer or Warewulf image build) this is automatic, since the
        C(/proc) and C(/sys) mounted there belong to the build host.
    type: bool
    default: false
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
    description:
      - The gdrcopy role's install prefix; its install stamps are reported under C(installs), the installed
        release is C(<prefix>/current), and the test programs are looked for in C(<prefix>/current/bin).
    type: path
    default: /opt/gdrcopy
  release:
    description:
      - The gdrcopy release pinned for this host (C(gdrcopy_version)), compared with the installed library;
        also decides whether the 2.6 DMA-BUF path is possible when no library is installed yet.
    type: str
    default: ""
  mok_cert:
    description:
      - A Machine Owner Key certificate (DER or PEM) on the host. Its enrollment state is read from the text of
        C(mokutil --test-key) (enrolled, pending, in_db, blocked, not_enrolled), and each gdrdrv signed by it is marked
        C(ours).
    type: path
  mok_candidates:
    description:
      - More certificates on the host whose enrollment state to read the same way (C(secure_boot.candidates)),
        e.g. the key pairs DKMS or shim-signed left, to find one that is already enrolled.
    type: list
    elements: path
    default: []
  peermem_state:
    description:
      - A C(nvidia_peermem_state) to plan for; C(peermem.plan) then says what the nvidia_peermem role does
        (C(action) load, unload or none; C(boot); C(fail); C(reason); C(dmabuf)).
    type: str
    choices: [auto, present, required, absent]
  run_tests:
    description:
      - gdrcopy test programs to run on GPU I(gpu_id) when the host has an NVIDIA GPU and the programs are
        installed; otherwise C(tests.reason) says why nothing ran.
    type: list
    elements: str
    choices: [copybw, copylat, sanity]
    default: []
  gpu_id:
    description: CUDA device index the test programs use (C(-d); C(gdrcopy_sanity) takes it from 2.5 on).
    type: int
    default: 0
  tests_timeout:
    description: Seconds each test program may run (through C(timeout) when it is installed).
    type: int
    default: 900
  smoke:
    description:
      - Run the GPU-less smoke check the gdrcopy role installs (C(/usr/local/libexec/gdrcopy-ansible/gdrcopy-smoke))
        with this MAJOR.MINOR, that is C(gdr_open) through the installed library, and the runtime and driver versions
        compared with it. Returned as C(smoke). Only on a running host; empty skips it.
    type: str
    default: ""
  groups:
    description: Group names to look up in the root's C(/etc/group); returned as C(groups).
    type: list
    elements: str
    default: []
  watch:
    description:
      - Globs of more files whose content (mode and owner) is part of the converged state, besides the fixed
        paths the roles write - the paths that depend on inputs (a non-default C(mok_signing_key_dir), the host's
        key pairs). A PEM private key is digested by its public half only.
    type: list
    elements: str
    default: []
  converged_inputs:
    description:
      - The digests of a run's inputs (role variables, release, the project's code), computed on the controller by
        C(playbooks/preflight.yml). When given, the host's state is fingerprinted and compared with the record a
        verified run left in C(/var/lib/gdrcopy-ansible/converged.json); C(converged) says whether a full run would
        change anything, and why. Never writes the record (C(playbooks/verify.yml) does).
    type: dict
attributes:
  check_mode:
    support: full
    description: It only reads; check mode runs it as it is (the smoke check and the GPU tests run too, they change
      nothing).
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
notes:
  - Parsing lives in C(plugins/module_utils/gdrcopy_parsers.py) as pure functions, unit-tested with captured text.
  - The peer-memory API of C(ib_core) (MLNX_OFED / DOCA-OFED; inbox kernels lack it) is read from
    C(/sys/kernel/mm/memory_peers) (a registered client) or C(/proc/kallsyms) (the exported
    C(ib_register_peer_memory_client)); C(/sys/module/ib_core/version) is reported but proves nothing.
  - docs/STATUS-REPORT.md explains every blocker and warning.
"""

EXAMPLES = r"""
- name: Gather gdrcopy facts
  gdrcopy_info:
    release: "2.6"
    mok_cert: /var/lib/gdrcopy-ansible/mok/mok.der
  register: gdrcopy_state

- name: Stop when the host cannot run gdrcopy
  ansible.builtin.assert:
    that: gdrcopy_state.blockers | length == 0
    fail_msg: "{{ gdrcopy_state.blockers | join('; ') }}"

- name: Show which kernels have no headers
  ansible.builtin.debug:
    msg: "{{ gdrcopy_state.kernel.installed | rejectattr('headers') | map(attribute='release') }}"

- name: Run gdrcopy_sanity and gdrcopy_copybw on GPU 1
  gdrcopy_info:
    run_tests: [sanity, copybw]
    gpu_id: 1
  register: gdrcopy_tested
"""

RETURN = r"""
root:
  description: The inspected root (I(root)).
  returned: always
  type: str
live:
  description: The inspected root is the running system (I(root=/), not in a chroot, I(image) false).
  returned: always
  type: bool
health:
  description: C(red) with any blocker, C(amber) with concerns only, else C(green).
  returned: always
  type: str
  sample: red
blockers:
  description: What keeps gdrcopy from working on this host now, one plain sentence each.
  returned: always
  type: list
  elements: str
  sample: ["module loading is disabled on this host (kernel.modules_disabled=1): gdrdrv cannot be loaded until reboot"]
concerns:
  description:
    - The warnings - what works but is degraded or will break later (a narrow PCIe link, BAR1 nearly full, a kernel
      without gdrdrv, a pending MOK enrollment...), one plain sentence each.
    - Not named C(warnings) because Ansible takes that key of a module result for its own warnings.
  returned: always
  type: list
  elements: str
  sample: ["GPU 0 (00000000:00:06.0) runs its PCIe link at x8 of x16"]
kernel:
  description: Running and installed kernels, module loading and signature enforcement.
  returned: always
  type: dict
  contains:
    running:
      description: The running kernel release (C(/proc/sys/kernel/osrelease)); empty for an image root.
      type: str
    running_installed:
      description: The running kernel has a module tree under C(/lib/modules) (gdrdrv can be installed for it).
      type: bool
    installed:
      description: One entry per installed kernel, oldest first, with C(release), C(headers) (bool),
        C(build_dir), C(sig_hash) (C(CONFIG_MODULE_SIG_HASH) or empty), C(sig_force) (C(CONFIG_MODULE_SIG_FORCE)),
        C(gdrdrv) (paths of gdrdrv modules) and C(gdrdrv_modules) (per file C(path), C(signed) (bool or null when
        unknown), C(signer), C(sig_key), C(sig_hashalgo), C(version), C(srcversion), C(vermagic), and C(ours) -
        signed by I(mok_cert)).
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
secure_boot:
  description: Secure Boot and the Machine Owner Key.
  returned: always
  type: dict
  contains:
    efi:
      description: The host booted through EFI.
      type: bool
    enabled:
      description: Secure Boot is on (C(mokutil --sb-state), else the efivarfs variable); false without EFI; null
        when unknown.
      type: bool
    setup_mode:
      description: The platform is in Setup Mode.
      type: bool
    source:
      description: Where C(enabled) came from.
      type: str
    mok:
      description: C(cert) (I(mok_cert)), its C(serial) and C(subject) (openssl), C(state) (enrolled, pending,
        in_db, blocked, not_enrolled or unknown, from the text of C(mokutil --test-key)), C(detail) (that text, or why it is
        unknown) and C(pending) (keys waiting in C(mokutil --list-new)).
      type: dict
    candidates:
      description: One dict per I(mok_candidates) entry, in order - C(cert), C(exists), C(serial), C(subject),
        C(state) and C(detail) as in C(mok).
      type: list
      elements: dict
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
gpus:
  description:
    - NVIDIA GPUs in nvidia-smi's order, then any only sysfs shows. Each has C(index), C(name), C(bus_id)
      (nvidia-smi's form), C(pci) (sysfs form), C(driver_version), C(memory_total_mib), C(memory_used_mib),
      C(bar1_total_mib), C(bar1_used_mib), C(bar1_used_pct) (C(nvidia-smi -q -d MEMORY), BAR1 Memory Usage),
      C(numa_node) (-1 when the platform has none), C(link) (sysfs C(speed)/C(max_speed) in GT/s,
      C(gen)/C(max_gen), C(width)/C(max_width)) and C(smi_link) (nvidia-smi's generation and width).
  returned: always
  type: list
  elements: dict
cuda:
  description: CUDA headers (C(present), C(home)) and the CUDA driver version (C(driver_version), e.g. 13.0, from
    nvidia-smi, with C(driver_version_source)).
  returned: always
  type: dict
backend:
  description: What gdr_open would use, C(active) (gdrdrv, dmabuf or none) with C(reason), and C(dmabuf)
    (C(available), C(reason)); the 2.6 DMA-BUF path needs CUDA driver 13.3+ and gdrcopy 2.6+.
  returned: always
  type: dict
  sample: {"active": "none", "dmabuf": {"available": false, "reason": "CUDA driver 13.0 < 13.3"}}
gdrcopy:
  description: C(release) (pinned), C(installed_release) (C(<prefix>/current)), C(library_version),
    C(driver_version) (C(/proc/driver/gdrdrv/params), gdrdrv 2.5+), C(skew) (library and driver releases differ),
    C(tests_dir) and C(tests) (path of each test program, or empty).
  returned: always
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
    load_refusal:
      description: Why the running kernel would refuse the gdrdrv installed for it (signatures enforced and the
        module unsigned, or signed by I(mok_cert) while that key is not enrolled); empty when it would load.
      type: str
peermem:
  description: GPUDirect RDMA modules. C(nvidia_peermem) and C(nv_peer_mem) (legacy) each with C(loaded),
    C(available) (a module file for the running kernel), C(files), C(version), C(refcount) and C(kernels)
    (installed kernel -> a module file exists); C(nv_peer_mem.service) (its unit or init script, or empty);
    C(ib_core) with C(loaded), C(builtin), C(version), C(peer_memory_api) (true, false, or null when unknown),
    C(peer_clients) and C(evidence); C(plan) when I(peermem_state) is given.
  returned: always
  type: dict
rdma:
  description: RDMA devices (C(/sys/class/infiniband)) with C(name), C(pci), C(numa_node) and C(ports)
    (C(port), C(state), C(link_layer), C(rate)).
  returned: always
  type: list
  elements: dict
numa_mismatches:
  description: GPUs on a NUMA node that no RDMA device shares (C(gpu), C(numa_node), C(rdma)).
  returned: always
  type: list
  elements: dict
load_order:
  description: Loaded nvidia*, ib_core, mlx5, nv_peer_mem and gdrdrv modules, oldest first (from C(/proc/modules)).
  returned: always
  type: list
  elements: str
  sample: [nvidia, ib_core, nvidia_peermem, gdrdrv]
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
tests:
  description:
    - C(ran), C(reason) (why nothing ran), C(gpu_id), and per test program run (C(sanity), C(copybw), C(copylat))
      its C(argv), C(rc), C(ok) and figures. sanity - C(format) (gdrcopy or libcheck), C(total), C(passed),
      C(failed), C(waived), C(failed_tests), C(waived_tests), C(msg). copybw - C(results) (C(size), C(write_MBps),
      C(read_MBps)), C(error). copylat - C(statistic) (median or average), C(results) per API (C(size), C(us),
      C(min_us)), C(error).
  returned: always
  type: dict
builds:
  description: Build stamps under I(build_root) (path of the build dir -> the inputs it was built from).
  returned: always
  type: dict
installs:
  description:
    - Install stamps under I(prefix) (path of the versioned install dir -> the build it came from).
    - An install whose files differ from its C(.gdrcopy-manifest) (a file changed, removed or the manifest missing)
      reads as a dict with the single key C(damaged) (the paths) instead, so the gdrcopy role installs it again.
  returned: always
  type: dict
tools:
  description: Which helper commands exist on the host (name -> path or empty).
  returned: always
  type: dict
groups:
  description: Each name of I(groups) -> whether the root's C(/etc/group) has that group.
  returned: always
  type: dict
kernel_hook:
  description:
    - The last call of the kernel postinst hook (C(/var/lib/gdrcopy-ansible/kernel-hook-status.json)) - C(kernel),
      C(ok), C(msg), C(time) (epoch seconds); empty when the hook never ran or its record is unreadable.
  returned: always
  type: dict
smoke:
  description: The smoke check's result (I(smoke) given, on a running host).
  returned: when I(smoke) is set
  type: dict
  contains:
    ran: {description: Whether the helper ran (it is installed by the gdrcopy role)., type: bool}
    method: {description: 'C(library) when it ran, else C(none).', type: str}
    passed: {description: C(gdr_open) succeeded and both versions equal I(smoke)., type: bool}
    runtime_version: {description: What C(gdr_runtime_get_version) reports., type: str}
    driver_version: {description: What C(gdr_driver_get_version) reports., type: str}
    msg: {description: One sentence., type: str}
converged:
  description: Whether the host is as a verified run of site.yml left it, with these inputs.
  returned: when I(converged_inputs) is set
  type: dict
  contains:
    ok: {description: A full run would change nothing here., type: bool}
    differences: {description: 'Why not: the first sentences (what changed).', type: list, elements: str}
    state: {description: The fingerprint of the host's state (what a record holds)., type: dict}
    record: {description: The record's path., type: str}
    verified_tests:
      description: The GPU test results (as I(tests)) of the verified run that wrote the record.
      returned: when I(ok) and the record holds them
      type: dict
"""

import glob
import grp
import hashlib
import json
import os
import re
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_converged as C

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


# --- kernel ---------------------------------------------------------------------------------------------------

def module_files(h, release, name):
    """Files of module `name` for a kernel: what modules.dep lists (what modprobe loads), plus any copy under
    updates/ or extra/ that depmod has not seen yet. Cheaper than walking the whole module tree."""
    base = "/lib/modules/%s" % release
    found = set(base + "/" + rel for rel in P.modules_dep_paths(h.read(base + "/modules.dep") or "", name))
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


def kernel_facts(h, mok_serial):
    installed = []
    for rel in P.parse_kernel_release_dirs(h.listdir("/lib/modules")):
        has_image = h.exists("/boot/vmlinuz-%s" % rel) or h.exists("/lib/modules/%s/vmlinuz" % rel)
        if not (has_image and h.isdir("/lib/modules/%s/kernel" % rel)):
            continue  # leftovers of a removed kernel (only updates/ or extra/ remain)
        build = "/lib/modules/%s/build" % rel
        kconf = P.parse_kconfig(h.read("/boot/config-%s" % rel) or h.read(build + "/.config") or "")
        gdrdrv = module_files(h, rel, "gdrdrv")
        installed.append({
            "release": rel,
            "headers": h.exists(build + "/Makefile"),
            "build_dir": build,
            "sig_hash": kconf.get("CONFIG_MODULE_SIG_HASH", ""),
            "sig_force": kconf.get("CONFIG_MODULE_SIG_FORCE") == "y",
            "gdrdrv": gdrdrv,
            "gdrdrv_modules": [module_signature(h, path, mok_serial) for path in gdrdrv],
        })
    running = running_release(h)
    m = re.search(r"\[(\w+)\]", h.read("/sys/kernel/security/lockdown") or "")
    return {
        "running": running,
        "running_installed": h.live and any(k["release"] == running for k in installed),
        "installed": installed,
        "modules_disabled": (h.read("/proc/sys/kernel/modules_disabled") or "0").strip() == "1",
        "sig_enforce": (h.read("/sys/module/module/parameters/sig_enforce") or "").strip() == "Y",
        "lockdown": m.group(1) if m else "",
        "efi": h.isdir("/sys/firmware/efi"),
    }


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
    """What nvidia-smi says: per-GPU query rows, the -q MEMORY sections and the CUDA driver version."""
    smi = h.live_tool("nvidia-smi")
    if not smi:
        return {"rows": [], "q": {"gpus": {}, "cuda_version": ""}, "ran": False}
    rc, text, dummy = h.run([smi, "--query-gpu=" + ",".join(P.SMI_QUERY_FIELDS), "--format=csv"])
    rows = P.parse_nvidia_smi_query(text) if rc == 0 else []
    rc, text, dummy = h.run([smi, "-q", "-d", "MEMORY"])
    return {"rows": rows, "q": P.parse_nvidia_smi_q(text if rc == 0 else ""), "ran": True}


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


def describe_gpu(h, bdf, row, memory):
    """One GPU from sysfs (link, NUMA node), nvidia-smi's query row and its -q MEMORY sections."""
    bar1 = memory.get("BAR1 Memory Usage", {})
    total, used = P.mib(bar1.get("Total")), P.mib(bar1.get("Used"))
    info = P.parse_nvidia_gpu_information(h.read("/proc/driver/nvidia/gpus/%s/information" % bdf) or "")
    return {
        "index": row.get("index", info.get("Device Minor", "")),
        "name": row.get("name") or info.get("Model", ""),
        "bus_id": row.get("pci.bus_id") or bdf,
        "pci": bdf,
        "driver_version": row.get("driver_version") or "",
        "memory_total_mib": row.get("memory.total"),
        "memory_used_mib": row.get("memory.used"),
        "bar1_total_mib": total,
        "bar1_used_mib": used,
        "bar1_used_pct": int(round(100.0 * used / total)) if total and used is not None else None,
        "numa_node": P.parse_int(h.read("/sys/bus/pci/devices/%s/numa_node" % bdf), -1),
        "link": pci_link(h, bdf),
        "smi_link": {"gen": row.get("pcie.link.gen.current"), "max_gen": row.get("pcie.link.gen.max"),
                     "width": row.get("pcie.link.width.current"), "max_width": row.get("pcie.link.width.max")},
    }


def gpu_facts(h, smi):
    """GPUs in nvidia-smi's order, then any that only sysfs knows (no nvidia-smi, or an unbound GPU)."""
    gpus, seen = [], set()
    for row in smi["rows"]:
        bdf = P.smi_bus_to_sysfs(row.get("pci.bus_id") or "")
        gpus.append(describe_gpu(h, bdf, row, smi["q"]["gpus"].get(row.get("pci.bus_id"), {})))
        seen.add(bdf)
    if not h.live:
        return gpus
    for bdf in pci_gpus(h):
        if bdf not in seen:
            gpus.append(describe_gpu(h, bdf, {}, {}))
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
            "ib_core": ib_core_facts(h, loaded_modules)}


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
            manifest = P.parse_sha256sums(h.read(d + "/.gdrcopy-manifest") or "")
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
        return C.file_sha256(full)
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


def backend_facts(facts):
    """Which backend gdr_open would use: gdrdrv, the 2.6 DMA-BUF path, or none, with the reasons."""
    gc = facts["gdrcopy"]
    ok, why = P.dmabuf_availability(facts["cuda"]["driver_version"], gc["library_version"] or gc["release"])
    problem = P.gdrdrv_problem(facts) if facts["live"] else "not a running host (image)"
    out = P.choose_backend(problem, ok, why)
    out["dmabuf"] = {"available": ok, "reason": why}
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


SMOKE_PROGRAM = "/usr/local/libexec/gdrcopy-ansible/gdrcopy-smoke"


def smoke_check(h, expect):
    """The gdrcopy role's smoke helper (gdr_open through the installed library), as the role records it."""
    none = {"ran": False, "method": "none", "passed": False, "expected": expect}
    if not h.live:
        return dict(none, msg="not a running host (image): nothing to open")
    if not h.exists(SMOKE_PROGRAM):
        return dict(none, msg="%s is not installed: run the gdrcopy role" % SMOKE_PROGRAM)
    rc, out, err = h.run([SMOKE_PROGRAM, "--expect", expect])
    try:
        result = json.loads(out)
    except ValueError:
        return dict(none, msg="%s printed no result (exit code %d): %s" % (SMOKE_PROGRAM, rc, (err or out).strip()))
    return dict(result, ran=True, method="library")


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
            kind, digest = "sha256", C.file_sha256(full)
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


KERNEL_HOOK_STATUS = "/var/lib/gdrcopy-ansible/kernel-hook-status.json"  # files/gdrcopy-kernel-hook writes it


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
    return dict((k, status[k]) for k in keys) if all(k in status for k in keys) else {}


def converged_facts(h, facts, prefix, inputs, watch=()):
    state = C.state_fingerprint(facts, managed_files(h, facts, prefix, watch))
    record = read_json_object(h, C.RECORD_PATH)  # a record that is JSON but no object is no record
    diff = C.differences(record, state, inputs)
    out = {"ok": not diff, "differences": diff, "state": state, "record": C.RECORD_PATH}
    if not diff and isinstance(record.get("verify"), dict):
        out["verified_tests"] = record["verify"]
    return out


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
        "groups": dict((g, g in P.parse_group_names(h.read("/etc/group") or "")) for g in params.get("groups") or []),
    }
    gdrdrv["load_refusal"] = P.load_refusal(facts)
    facts["backend"] = backend_facts(facts)
    if params.get("peermem_state"):
        facts["peermem"]["plan"] = P.peermem_plan(params["peermem_state"], facts)
    facts["numa_mismatches"] = P.numa_mismatches(facts["gpus"], facts["rdma"])
    facts["blockers"], facts["concerns"], facts["health"] = P.assess(facts)
    facts["tests"] = run_tests(h, facts, params.get("run_tests") or [], params.get("gpu_id") or 0,
                               params.get("tests_timeout") or 900)
    if params.get("smoke"):
        facts["smoke"] = smoke_check(h, params["smoke"])
    if params.get("converged_inputs") is not None:
        facts["converged"] = converged_facts(h, facts, params["prefix"], params["converged_inputs"],
                                             params.get("watch") or [])
    return facts


ARGUMENT_SPEC = dict(
    root=dict(type="path", default="/"),
    image=dict(type="bool", default=False),
    cuda_home=dict(type="path", default="/usr/local/cuda"),
    build_root=dict(type="path", default="/var/lib/gdrcopy-ansible/build"),
    prefix=dict(type="path", default="/opt/gdrcopy"),
    nvidia_src_dir=dict(type="path"),
    release=dict(type="str", default=""),
    mok_cert=dict(type="path"),
    mok_candidates=dict(type="list", elements="path", default=[]),
    peermem_state=dict(type="str", choices=list(P.PEERMEM_STATES)),
    run_tests=dict(type="list", elements="str", default=[], choices=sorted(TEST_PROGRAMS)),
    gpu_id=dict(type="int", default=0),
    tests_timeout=dict(type="int", default=900),
    smoke=dict(type="str", default=""),
    converged_inputs=dict(type="dict"),
    watch=dict(type="list", elements="str", default=[]),
    groups=dict(type="list", elements="str", default=[]),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(changed=False, **gather(module, module.params))


if __name__ == "__main__":
    main()
