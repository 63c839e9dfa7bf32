#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrcopy_plan
short_description: Plan the gdrcopy build of a host and stop on its blockers, on the controller
description:
  - An action plugin - it runs on the controller only (no connection, no Python started on the host), on what
    M(gpufleet.gdrcopy.gdrcopy_info) read on the host and what the package manager answered there.
  - Decides the kernels to build gdrdrv for (O(kernels), else every installed kernel that has or can get its headers)
    and those that cannot be built for, the kernel headers to install, and the NVIDIA kernel source (a tree that
    matches the driver's version and flavor, else the source package to install).
  - Fails with one sentence that says what to do when the device group is missing and may not be created, a listed
    kernel is not installed or cannot be built for, no kernel can be, no NVIDIA source can be had, or host mode
    has no NVIDIA driver. Nothing is changed either way.
version_added: "0.2.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  info:
    description: The result of M(gpufleet.gdrcopy.gdrcopy_info) for the host (its C(groups) must hold O(device_group)).
    type: dict
    required: true
  kernels:
    description: The kernels asked for (C(gdrcopy_kernels)); empty - every installed kernel.
    type: list
    elements: str
    default: []
  mode:
    description: C(host) (the driver must be there to load gdrdrv) or C(image).
    type: str
    required: true
    choices: [host, image]
  device_group:
    description: The group of C(/dev/gdrdrv).
    type: str
    required: true
  device_group_create:
    description: The role may create O(device_group).
    type: bool
    default: false
  headers_query:
    description: The registered loop that asked the package manager for the headers of each kernel without them.
    type: dict
    default: {}
  source_query:
    description: The registered loop that asked the package manager for every version of each NVIDIA source
      package candidate (C(apt-cache show), C(dnf --showduplicates info)); the one in the driver's version is chosen
      before anything is installed.
    type: dict
    default: {}
  source_candidates:
    description: The NVIDIA source package names for the installed driver (named in the message when none is had).
    type: list
    elements: str
    default: []
  headers_package:
    description: The headers package name pattern (C(linux-headers-{kernel})), for the messages.
    type: str
    required: true
  upstream_packages:
    description:
      - What to do with upstream's own gdrcopy install when I(info) reports one (C(upstream)) - V(refuse) stops the
        host with one sentence naming what was found and both choices; V(replace) plans its removal
        (RV(upstream_remove)), which M(gpufleet.gdrcopy.gdrcopy_upstream) does before the build.
    type: str
    choices: [refuse, replace]
    default: refuse
  backend:
    description:
      - What maps GPU memory for the library (C(gdrcopy_backend)). V(gdrdrv) - the kernel module, planned as before.
        V(dmabuf) - gdrcopy 2.6's DMA-BUF path through the CUDA driver (13.3 or later, read from nvidia-smi in
        I(info)); the plan builds the library only (no kernel, headers or NVIDIA source), and the host stops with
        one sentence where the release (I(version)) or the driver cannot do it.
      - V(auto) - DMA-BUF where gdrdrv could not be loaded (module loading disabled or not built in, module
        signatures enforced with nobody to sign gdrdrv, or enforced without EFI to enroll a key in) and the driver
        allows it; gdrdrv everywhere else.
    type: str
    choices: [auto, gdrdrv, dmabuf]
    default: auto
  version:
    description: The gdrcopy release of the run (DMA-BUF needs 2.6 or later); empty - none, so no DMA-BUF.
    type: str
    default: ""
  signer:
    description:
      - Who signs gdrdrv in this run, for V(auto) on a host that enforces module signatures - V(command) (a
        C(gdrcopy_sign_command) or C(gdrcopy_controller_signer)), V(mok) (the mok_signing role, with a Machine Owner
        Key that needs EFI to be enrolled) or empty (nobody).
    type: str
    choices: ["", command, mok]
    default: ""
attributes:
  check_mode:
    support: full
    description: Decides only; the same in check mode.
  diff_mode:
    support: none
    description: Nothing is changed.
  action:
    support: full
    description: An action plugin; it runs on the controller.
"""

EXAMPLES = r"""
- name: Plan the kernels, the NVIDIA source and the blockers
  gpufleet.gdrcopy.gdrcopy_plan:
    info: "{{ gdrcopy_state }}"
    mode: host
    device_group: gdrcopy
    headers_package: linux-headers-{kernel}
  register: plan
"""

RETURN = r"""
kernels:
  description: The kernels gdrdrv is built for.
  returned: success
  type: list
  elements: str
kernels_skipped:
  description: The kernels that have no headers and can get none (said in RV(notes)).
  returned: success
  type: list
  elements: str
headers_to_install:
  description: The kernels whose headers the package manager installs.
  returned: success
  type: list
  elements: str
nvidia:
  description: The NVIDIA source tree that matches the driver (C(dir), C(version), C(flavor), C(reason)), as
    gdrcopy_info's C(nvidia.source_match).
  returned: success
  type: dict
nvidia_source_package:
  description: The NVIDIA source package to install when no tree matches (the first of I(source_candidates) the
    package manager has in the driver's version); empty otherwise.
  returned: success
  type: str
nvidia_source_version:
  description: The version of I(nvidia_source_package) to install (the package manager's full version, whose upstream
    part is the driver's); empty with it.
  returned: success
  type: str
upstream_remove:
  description: Upstream's own gdrcopy install is on the host and is removed before the build (I(upstream_packages)
    replace).
  returned: success
  type: bool
notes:
  description: What the run should say (the kernel hook failed since the last run; kernels that cannot be built for).
  returned: success
  type: list
  elements: str
backend:
  description: The backend the host gets - C(name) (gdrdrv or dmabuf), C(reason) (one sentence), C(cannot_load)
    (why gdrdrv could not be loaded, with V(auto); empty when it can) and C(dmabuf) (why DMA-BUF can or cannot
    work). With dmabuf, RV(kernels) is empty and RV(nvidia) says no source is needed.
  returned: success
  type: dict
  sample: {"name": "dmabuf", "reason": "gdrcopy_backend: dmabuf (CUDA driver 13.3 >= 13.3 and gdrcopy 2.6 >= 2.6)",
           "cannot_load": "", "dmabuf": "CUDA driver 13.3 >= 13.3 and gdrcopy 2.6 >= 2.6"}
planned:
  description: Always true on success.
  returned: success
  type: bool
"""
