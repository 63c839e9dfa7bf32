# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: skip_converged
short_description: A play's host pattern without the hosts preflight split off as converged
description:
  - Preflight puts a host that is as its last verified run left it in the group C(gdrcopy_converged), or, when the
    only change is kernels installed since, in C(gdrcopy_new_kernels) (both with C(ansible.builtin.group_by)).
    A play that changes things runs on its pattern with those groups excluded - the one place converged hosts are
    split off; no play needs a skip task.
  - Only groups that exist are excluded (Ansible warns about a pattern naming an unknown group), so a play run
    without preflight, or a run where no host is converged, keeps its pattern as it is.
version_added: "0.1.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  _input:
    description: The play's host pattern (C(gdrcopy_hosts), default C(gpu_nodes)).
    type: str
    required: true
  groups:
    description: The C(groups) magic variable (the inventory's groups as this run has them).
    type: dict
    required: true
  new_kernels:
    description: Keep the hosts whose only change is new kernels (the gdrcopy play builds gdrdrv for those).
    type: bool
    default: false
  dmabuf:
    description:
      - Leave out the hosts preflight planned the DMA-BUF backend for (C(gdrcopy_backend), the group
        C(gdrcopy_dmabuf)). No gdrdrv is built there, so the mok_signing play has nothing to sign or enroll a key for.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Install gdrcopy
  hosts: "{{ gdrcopy_hosts | default('gpu_nodes') | gpufleet.gdrcopy.skip_converged(groups) }}"
  roles:
    - gpufleet.gdrcopy.gdrcopy
"""

RETURN = r"""
_value:
  description: The pattern, with C(:!gdrcopy_converged), C(:!gdrcopy_new_kernels) and (with O(dmabuf))
    C(:!gdrcopy_dmabuf) appended for the groups that exist.
  type: str
"""

from ansible.errors import AnsibleFilterError

CONVERGED = "gdrcopy_converged"  # preflight's group_by names these two
NEW_KERNELS = "gdrcopy_new_kernels"
DMABUF = "gdrcopy_dmabuf"  # and this one: the hosts whose plan is the DMA-BUF backend


def skip_converged(pattern, groups, new_kernels=False, dmabuf=False):
    if not isinstance(pattern, str) or not pattern.strip():
        raise AnsibleFilterError("skip_converged: the host pattern is empty (gdrcopy_hosts): name a group or host")
    if not hasattr(groups, "get"):
        raise AnsibleFilterError("skip_converged: pass the groups magic variable")
    skip = [CONVERGED] + ([] if new_kernels else [NEW_KERNELS]) + ([DMABUF] if dmabuf else [])
    return pattern + "".join(":!" + g for g in skip if g in groups)


class FilterModule(object):
    def filters(self):
        return {"skip_converged": skip_converged}
