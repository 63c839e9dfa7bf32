# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: resolve_mode
short_description: The mode of a host - C(host) or C(image) - from gdrcopy_mode and its connection
description:
  - C(host) and C(image) are returned as they are; C(auto) is C(image) when the connection is a chroot (the image
    root of a golden image), else C(host).
  - The one place that resolves the mode - preflight, the gdrcopy, mok_signing and nvidia_peermem roles all use it
    (a role run without preflight too), so they never disagree.
version_added: "0.1.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  _input:
    description: C(gdrcopy_mode) - C(auto), C(host) or C(image).
    type: str
    required: true
  connection:
    description: The host's C(ansible_connection).
    type: str
    default: ssh
"""

EXAMPLES = r"""
- name: Say how this host is treated
  ansible.builtin.debug:
    msg: "{{ gdrcopy_mode | default('auto') | gpufleet.gdrcopy.resolve_mode(ansible_connection | default('ssh')) }}"
"""

RETURN = r"""
_value:
  description: C(host) or C(image).
  type: str
"""

from ansible.errors import AnsibleFilterError

# The connections that reach an image root rather than a running system.
IMAGE_CONNECTIONS = ("community.general.chroot", "chroot")
MODES = ("auto", "host", "image")


def resolve_mode(mode, connection="ssh"):
    mode = str(mode).strip()
    if mode not in MODES:
        raise AnsibleFilterError("gdrcopy_mode is %r: set it to auto, host or image" % (mode,))
    if mode != "auto":
        return mode
    return "image" if str(connection or "ssh") in IMAGE_CONNECTIONS else "host"


class FilterModule(object):
    def filters(self):
        return {"resolve_mode": resolve_mode}
