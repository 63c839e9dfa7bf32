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
  - Runs nothing that acts on the host (no smoke check, no GPU test); M(gpufleet.gdrcopy.gdrcopy_verify) does
    those, on top of the same facts.
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
  groups:
    description: Group names to look up in the root's C(/etc/group); returned as C(groups).
    type: list
    elements: str
    default: []
  packages:
    description:
      - Package names to look up in the root's package database (dpkg's status file, else C(rpm -q)); returned as
        C(packages), so that a role asks the package manager only for what is missing.
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
        change anything, and why. Never writes the record (M(gpufleet.gdrcopy.gdrcopy_verify) does).
    type: dict
  kernels:
    description:
      - The kernels the gdrcopy role builds for (C(gdrcopy_kernels)); empty, every installed kernel. A kernel
        installed since the verified run but not among them leaves RV(converged.new_kernels) empty (a full run).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: It only reads; check mode runs it as it is.
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
findings:
  description:
    - Every blocker and concern as data, blockers first as found - C(code) (stable, one of the table in
      docs/STATUS-REPORT.md, e.g. C(modules_disabled), C(no_module_tree), C(sig_enforced_no_efi),
      C(fabric_manager_inactive)), C(severity) (C(blocker) or C(concern)), C(text) (the sentence in C(blockers) or
      C(concerns)) and C(remedy) (what to do, fitted to the host - a kernel provided from elsewhere is not asked to
      reboot with other settings).
  returned: always
  type: list
  elements: dict
  sample: [{"code": "no_module_tree", "severity": "blocker", "remedy": "the running kernel came from outside ...",
            "text": "gdrdrv is not loaded, and the running kernel 6.18.44 has no module tree under /lib/modules ..."}]
last_verify:
  description: The C(tests) and the C(smoke) check of the last verified run, from its record (empty without one) -
    what the status report shows for a host that the run did not verify, so that C(playbooks/status.yml) alone says
    what C(site.yml) said.
  returned: always
  type: dict
signing:
  description: The running kernel's module signature policy and the gdrdrv it would load.
  returned: always
  type: dict
  contains:
    enforced:
      description: The running kernel refuses unsigned modules.
      type: bool
    enforced_by:
      description: What enforces it - C(module.sig_enforce=Y), C(CONFIG_MODULE_SIG_FORCE), C(lockdown=integrity) or
        C(lockdown=confidentiality) (or the C(CONFIG_LOCK_DOWN_KERNEL_FORCE_*) that forces it).
      type: list
      elements: str
    hash:
      description: The running kernel's signing hash (C(CONFIG_MODULE_SIG_HASH)), from its installed config or
        C(/proc/config.gz); empty when neither is readable.
      type: str
    efi:
      description: The host booted through EFI (a Machine Owner Key can be enrolled only then).
      type: bool
    secure_boot:
      description: Secure Boot is on (as in C(secure_boot.enabled)).
      type: bool
    lockdown:
      description: The active lockdown mode, or empty.
      type: str
    gdrdrv:
      description: The gdrdrv file of the running kernel - C(path), C(signer), C(sig_key), C(hash), C(ours) (signed by
        I(mok_cert)), C(accepted) (true, false, or null when this host cannot tell - a signer that is not ours and
        that C(/proc/keys) does not name) and C(why).
      type: dict
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
    running_config:
      description: What the running kernel's config says about signatures - C(sig_force), C(sig_hash),
        C(lockdown_force) (integrity, confidentiality or empty) and C(source) (C(/boot/config-<release>),
        C(/proc/config.gz), or empty when neither is readable).
      type: dict
    installed:
      description: One entry per installed kernel, oldest first, with C(release), C(headers) (bool),
        C(build_dir), C(sig_hash) (C(CONFIG_MODULE_SIG_HASH) or empty), C(sig_force) (C(CONFIG_MODULE_SIG_FORCE)),
        C(gdrdrv) (paths of gdrdrv modules) and C(gdrdrv_modules) (per file C(path), C(signed) (bool or null when
        unknown), C(signer), C(sig_key), C(sig_hashalgo), C(version), C(srcversion), C(vermagic), and C(ours) -
        signed by I(mok_cert)).
      type: list
      elements: dict
    modular:
      description: The running kernel has loadable module support (C(/proc/sys/kernel/modules_disabled) exists);
        true for an image root, which is not asked.
      type: bool
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
      description: C(open) or C(proprietary), or empty when unknown - for the loaded driver from the banner of
        C(/proc/driver/nvidia/version) (the open module calls itself C(Open Kernel Module)), else from the installed
        module's C(MODULE_LICENSE) through modinfo (the open modules are GPL-compatible, C(Dual MIT/GPL); the
        proprietary one is C(NVIDIA)).
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
    - NVIDIA GPUs in nvidia-smi's order, then any only sysfs shows, in one schema with the same types whether
      nvidia-smi is there or not (what only nvidia-smi knows is null or empty without it). Each has C(index) (int),
      C(name), C(uuid), C(bus_id) (sysfs form, C(0000:17:00.0)), C(driver_version), C(memory_total_mib),
      C(memory_used_mib), C(bar1_total_mib) (nvidia-smi, else the size of the GPU's second PCI memory region),
      C(bar1_used_mib), C(bar1_used_pct), C(numa_node) (-1 when the platform has none), C(cpu_affinity) (sysfs
      C(local_cpulist)), C(link) (sysfs C(speed)/C(max_speed) in GT/s, C(gen)/C(max_gen), C(width)/C(max_width)),
      C(fabric) (C(state) and C(status) of the GPU's fabric registration, from C(nvidia-smi -q); C(N/A) without
      NVSwitch), C(nvlink) (C(active) and C(inactive) link counts from C(nvidia-smi nvlink -s), C(peers) - GPU name
      to bonded NVLink count from C(nvidia-smi topo -m); asked only with two GPUs or more) and C(source)
      (C(nvidia-smi) or C(sysfs)).
  returned: always
  type: list
  elements: dict
cuda:
  description: CUDA headers (C(present), C(home)) and the CUDA driver version (C(driver_version), e.g. 13.0, from
    nvidia-smi, with C(driver_version_source)).
  returned: always
  type: dict
backend:
  description: What gdr_open would use, C(active) (gdrdrv, dmabuf or none) with C(reason), C(dmabuf)
    (C(available), C(reason)), and C(configured) - the backend the last install chose (C(gdrcopy_backend), from the
    driver record; empty without one). The 2.6 DMA-BUF path needs CUDA driver 13.3+ and gdrcopy 2.6+; with
    C(configured) dmabuf, a host without gdrdrv is as intended.
  returned: always
  type: dict
  sample: {"active": "none", "configured": "", "dmabuf": {"available": false, "reason": "CUDA driver 13.0 < 13.3"}}
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
packages:
  description: Each name of I(packages) -> whether it is installed; empty when no package database answered.
  returned: always
  type: dict
  sample: {build-essential: true, mokutil: false}
upstream:
  description:
    - What upstream's own gdrcopy install left on the host - C(packages) (its debs C(gdrdrv-dkms), C(libgdrapi),
      C(gdrcopy-tests), C(gdrcopy); its rpms C(gdrcopy), C(gdrcopy-kmod), C(gdrcopy-devel); each C(name) and
      C(version)), C(dkms) (each C(gdrdrv) version registered with DKMS and the kernels it is built for), C(files)
      (its init scripts, unit, helper, modprobe.d file, udev rules, DKMS source trees, and libgdrapi under C(/usr)
      or C(/usr/local)), C(modules) (each gdrdrv file of an installed kernel outside this project's
      C(updates/gdrcopy/) - DKMS's, a source install's). Each is empty when there is none; a concern names what was
      found.
  returned: always
  type: dict
  sample: {packages: [{name: gdrdrv-dkms, version: 2.4.4}], dkms: [{version: 2.4.4, kernels: [6.1.0-41-amd64]}],
           files: [/etc/init.d/gdrdrv, /usr/src/gdrdrv-2.4.4],
           modules: [/lib/modules/6.1.0-41-amd64/updates/dkms/gdrdrv.ko]}
os:
  description:
    - The OS and its package manager as setup's C(min) subset names them (C(distribution), C(distribution_version),
      C(distribution_major_version), C(distribution_release), C(os_family), C(pkg_mgr)), read by Ansible's own fact
      collectors; empty for a I(root) other than C(/).
    - The same keys are returned as C(ansible_facts), so a play needs no setup task for them.
  returned: always
  type: dict
kernel_hook:
  description:
    - The last call of the kernel postinst hook (C(/var/lib/gdrcopy-ansible/kernel-hook-status.json)) - C(kernel),
      C(ok), C(msg), C(time) (epoch seconds), and C(state) (C(installed), C(awaiting signature), C(waiting for
      headers), C(not needed) - the DMA-BUF backend - or C(failed));
      empty when the hook never ran or its record is unreadable.
  returned: always
  type: dict
awaiting_signature:
  description:
    - The installed kernels whose gdrdrv is built but waits for the controller's signature (signing on the
      controller - the driver record's C(sign_cert)), an unsigned build that is not installed. The kernel hook leaves
      a new kernel this way; the next run of site.yml signs and installs it. A build the controller signed that waits
      while a key rotation holds the installed module is not listed.
  returned: always
  type: list
  elements: str
converged:
  description: Whether the host is as a verified run of site.yml left it, with these inputs.
  returned: when I(converged_inputs) is set
  type: dict
  contains:
    ok: {description: A full run would change nothing here., type: bool}
    differences: {description: 'Why not: the first sentences (what changed).', type: list, elements: str}
    state: {description: The fingerprint of the host's state (what a record holds)., type: dict}
    record: {description: The record's path., type: str}
    new_kernels:
      description:
        - The kernels installed since the verified run, when they are all that changed (same inputs, each with its
          headers, nothing else different) and the driver record of that run can build gdrdrv again (its tarball
          and build helper still there); empty otherwise. gdrcopy_build's replay builds for them alone.
      type: list
      elements: str
    verified_tests:
      description: The GPU test results (as I(tests)) of the verified run that wrote the record.
      returned: when I(ok) or I(new_kernels), and the record holds them
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_facts import gather


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
    converged_inputs=dict(type="dict"),
    watch=dict(type="list", elements="str", default=[]),
    kernels=dict(type="list", elements="str", default=[]),
    groups=dict(type="list", elements="str", default=[]),
    packages=dict(type="list", elements="str", default=[]),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    facts = gather(module, module.params)
    del facts["tests"]  # no test is run here: gdrcopy_verify runs them
    module.exit_json(changed=False, ansible_facts=facts["os"], **facts)


if __name__ == "__main__":
    main()
