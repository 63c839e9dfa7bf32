# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: finding_lines
short_description: The findings of gdrcopy_info as lines for a person at a console
description:
  - Takes C(gdrcopy_info)'s C(findings) (each with C(code), C(severity), C(text), C(remedy)) and gives one line
    per finding - the severity, the code, a colon, the sentence, then an arrow and the remedy. A remedy said on an
    earlier line is not repeated (three blockers of a host whose kernel comes from elsewhere share one).
  - The lines C(playbooks/status.yml) shows per host.
version_added: "0.4.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  _input:
    description: The findings.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Show what is wrong and what to do
  ansible.builtin.debug:
    msg: "{{ gdrcopy_state.findings | gpufleet.gdrcopy.finding_lines }}"
"""

RETURN = r"""
_value:
  description: The lines.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_sequence

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_verdict import remedies_once


def finding_lines(findings):
    try:
        if not is_sequence(findings):
            raise TypeError(findings)
        return ["%s %s: %s%s" % (f["severity"], f["code"], f["text"], " -> " + remedy if remedy else "")
                for f, remedy in remedies_once(findings)]
    except (KeyError, TypeError):
        raise AnsibleFilterError("finding_lines takes the findings of gdrcopy_info (a list of code, severity, text, "
                                 "remedy), got %r" % (findings,))


class FilterModule(object):
    def filters(self):
        return {"finding_lines": finding_lines}
