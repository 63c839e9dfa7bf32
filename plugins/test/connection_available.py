# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: connection_available
short_description: Whether the controller has a connection plugin
description:
  - True when the controller can load the connection plugin of that name (a short name such as C(chroot) is
    followed through ansible-core's routing, so it needs the collection it was moved to).
  - Preflight uses it to stop an image-mode host whose C(ansible_connection) needs C(community.general), with one
    sentence that says what to install, before the first task that would need the connection.
version_added: "0.1.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  _input:
    description: The connection plugin's name, as C(ansible_connection) gives it.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Stop when the chroot connection is missing
  ansible.builtin.assert:
    that: ansible_connection is gpufleet.gdrcopy.connection_available
  delegate_to: localhost
"""

RETURN = r"""
_value:
  description: Whether the plugin loads.
  type: bool
"""

from ansible.plugins.loader import connection_loader


def connection_available(name):
    try:
        return connection_loader.find_plugin(str(name)) is not None
    except Exception:  # a malformed name or a broken routing entry: not loadable either
        return False


class TestModule(object):
    def tests(self):
        return {"connection_available": connection_available}
