# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: finding_line
short_description: One line for a gdrcopy_info finding, for a person at a console
description:
  - Takes one finding of C(gdrcopy_info)'s C(findings) (C(code), C(severity), C(text), C(remedy)) and gives the
    line C(playbooks/status.yml) shows per finding - the severity, the code, a colon, the sentence, an arrow and
    the remedy.
version_added: "0.4.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  _input:
    description: A finding.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Show what is wrong and what to do
  ansible.builtin.debug:
    msg: "{{ gdrcopy_state.findings | map('gpufleet.gdrcopy.finding_line') | list }}"
"""

RETURN = r"""
_value:
  description: The line.
  type: str
"""

from ansible.errors import AnsibleFilterError


def finding_line(finding):
    try:
        return "%s %s: %s -> %s" % (finding["severity"], finding["code"], finding["text"], finding["remedy"])
    except (KeyError, TypeError):
        raise AnsibleFilterError("finding_line takes a finding of gdrcopy_info (code, severity, text, remedy), "
                                 "got %r" % (finding,))


class FilterModule(object):
    def filters(self):
        return {"finding_line": finding_line}
