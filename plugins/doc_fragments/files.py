# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""The files and groups options of the modules that put a role's files on the host (gdrcopy_files, and
gdrcopy_build after its install); their argument spec is module_utils/gdrcopy_fileops.FILES_SPEC and GROUPS_SPEC."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options:
  groups:
    description: System groups to make (C(groupadd --system)) before the files, when the host has none of that name.
    type: list
    elements: str
    default: []
  files:
    description: The files, in the order they are written.
    type: list
    elements: dict
    default: []
    suboptions:
      dest:
        description: Absolute path of the file (or directory), without C(..) components.
        type: str
        required: true
      content:
        description: The whole content (text). Required when O(files[].state) is C(present).
        type: str
      mode:
        description: Octal permission bits, as a string (C(0644), C(0755)).
        type: str
        default: "0644"
      state:
        description: C(present) writes the file; C(absent) removes it (and nothing else); C(directory) makes a
          directory with O(files[].mode) (its content is left alone); C(link) makes O(files[].dest) a symbolic link
          to O(files[].src); C(retired) removes a name this project used to write, only where it wrote it - a file
          whose first 200 bytes carry its C(Ansible managed (gdrcopy-ansible) header, or a link to O(files[].src) -
          and leaves anyone else's file there alone.
        type: str
        choices: [present, absent, directory, link, retired]
        default: present
      src:
        description: The target of the link (O(files[].state) C(link)), or of the link this project made
          (C(retired)), an absolute path.
        type: str
      after:
        description: What to run once after the writes when this file changed.
        type: str
        choices: [none, ldconfig, daemon-reload]
        default: none
"""
