# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: batches
short_description: gdrcopy_serial checked and made into a play's serial value (rolling batches)
description:
  - The plays that change hosts (nvidia_peermem, mok_signing, gdrcopy, verify, uninstall) run in batches of
    C(gdrcopy_serial) hosts - a number (C(10)), a share of the play's hosts (C("10%")), or a list of those that
    grow (C([1, "10%", "50%"])); C(0) is one batch of every host. A value given with C(-e) as a string (C("5"))
    is read as the number.
  - Anything else fails the play before it starts, with one sentence naming C(gdrcopy_serial); the companion filter
    C(gpufleet.gdrcopy.fail_percentage) does the same for C(gdrcopy_max_fail_percentage) (an integer 0 to 100).
version_added: "0.3.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  _input:
    description: The value of C(gdrcopy_serial).
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Install gdrcopy, ten percent of the nodes at a time; stop when more than 10 % of a batch fails
  hosts: gpu_nodes
  serial: "{{ gdrcopy_serial | default(0) | gpufleet.gdrcopy.batches }}"
  max_fail_percentage: "{{ gdrcopy_max_fail_percentage | default(100) | gpufleet.gdrcopy.fail_percentage }}"
  roles:
    - gpufleet.gdrcopy.gdrcopy
"""

RETURN = r"""
_value:
  description: An integer, a C("N%") string, or a list of those.
  type: raw
"""

import re

from ansible.errors import AnsibleFilterError

_PERCENT = re.compile(r"^([1-9][0-9]?|100)%\Z")
_NUMBER = re.compile(r"^(0|[1-9][0-9]{0,5})\Z")
_HOW = ('a number of hosts (10), a share of them ("10%"), a list of those ([1, "10%", "50%"]), or 0 for all at '
        "once; pass it with -e (a play's serial is read before the inventory's variables)")


def _one(value, name):
    if isinstance(value, bool):
        raise AnsibleFilterError("%s must be %s (got %r)" % (name, _HOW, value))
    if isinstance(value, int) and 0 <= value <= 999999:
        return value
    if isinstance(value, str):
        text = value.strip(" ")
        if _NUMBER.match(text):
            return int(text)
        if _PERCENT.match(text):
            return text
    raise AnsibleFilterError("%s must be %s (got %r)" % (name, _HOW, value))


def batches(value):
    """gdrcopy_serial as serial: an int, "N%", or a non-empty list of those (a list of one is the value itself)."""
    if isinstance(value, (list, tuple)):
        if not value or len(value) > 32:
            raise AnsibleFilterError("gdrcopy_serial must be %s (got a list of %d)" % (_HOW, len(value)))
        items = [_one(v, "gdrcopy_serial[%d]" % i) for i, v in enumerate(value)]
        return items if len(items) > 1 else items[0]
    return _one(value, "gdrcopy_serial")


class FilterModule(object):
    def filters(self):
        return {"batches": batches}
