# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""The helpers and packages options of the modules that write the programs their role runs (gdrcopy_build,
gdrcopy_mok); their argument specs are module_utils/gdrcopy_fileops.HELPERS_SPEC and PACKAGES_SPEC."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options:
  helpers:
    description:
      - The programs the role runs on the host (which ones - see the module's description), each written when its
        content or mode differs, through a temporary file in its directory and a rename (a reader never sees half
        a file) - so the role needs no other module start for them. Every entry is checked before any is written.
    type: list
    elements: dict
    default: []
    suboptions:
      dest:
        description: Absolute path of the helper (no C(..) part).
        type: path
        required: true
      content:
        description: Its whole content.
        type: str
        required: true
      mode:
        description: Octal permission bits, as a string.
        type: str
        default: "0755"
  packages:
    description:
      - The packages the role's package task installed in this run because the host lacked them. They are added to
        the record on the host (C(/var/lib/gdrcopy-ansible/packages.json)) before anything else, so that
        M(gpufleet.gdrcopy.gdrcopy_uninstall) removes them, and only them, again.
    type: list
    elements: str
    default: []
"""
