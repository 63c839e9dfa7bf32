# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: fail_percentage
short_description: gdrcopy_max_fail_percentage checked and made into a play's max_fail_percentage
description:
  - The share of a batch's hosts (see C(gpufleet.gdrcopy.batches)) that may fail before the rollout stops - a whole
    number from 0 to 100 (C(100), the default, never stops it; C(0) stops it at the first failed host). A failed
    smoke check after the load fails its host, so a batch whose new gdrdrv does not work stops the rollout there.
  - Anything else fails the play before it starts, with one sentence naming C(gdrcopy_max_fail_percentage).
version_added: "0.3.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  _input:
    description: The value of C(gdrcopy_max_fail_percentage).
    type: raw
    required: true
"""

EXAMPLES = r"""
# -e gdrcopy_max_fail_percentage=0: the first failed host of a batch stops the rollout
- name: Show the value a play takes for max_fail_percentage
  ansible.builtin.debug:
    msg: "{{ gdrcopy_max_fail_percentage | default(100) | gpufleet.gdrcopy.fail_percentage }}"
"""

RETURN = r"""
_value:
  description: An integer from 0 to 100.
  type: int
"""

import re

from ansible.errors import AnsibleFilterError


def fail_percentage(value):
    """gdrcopy_max_fail_percentage as max_fail_percentage: an integer from 0 to 100 (100: a batch never stops the
    run; 0: the first failed host does)."""
    text = value.strip(" ") if isinstance(value, str) else value
    if isinstance(text, str) and re.match(r"^(0|[1-9][0-9]?|100)\Z", text):
        return int(text)
    if isinstance(text, int) and not isinstance(text, bool) and 0 <= text <= 100:
        return text
    raise AnsibleFilterError(
        "gdrcopy_max_fail_percentage must be a whole number from 0 to 100, the share of a batch's hosts that may "
        "fail before the rollout stops (got %r); pass it with -e" % (value,))


class FilterModule(object):
    def filters(self):
        return {"fail_percentage": fail_percentage}
