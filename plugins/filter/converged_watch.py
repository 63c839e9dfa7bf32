# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: converged_watch
short_description: The files of the signing key that belong to a host's converged state
description:
  - Takes the mok_signing role's checked inputs (C(mok_signing_key_dir), C(mok_signing_host_key_paths)) and gives
    the globs of the files that the converged check reads and the verified record keeps besides the roles' own
    (module_utils/gdrcopy_converged.py C(watch_globs)). Preflight and verify both take it from here, so that the
    record and every later read cover the same files.
  - Without inputs (a play that did not check them) it gives an empty list.
version_added: "0.4.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  _input:
    description: The checked mok_signing inputs (C(__mok_signing_in)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Show the files the converged check reads besides the roles' own
  ansible.builtin.debug:
    msg: "{{ __mok_signing_in | default({}) | gpufleet.gdrcopy.converged_watch }}"
"""

RETURN = r"""
_value:
  description: Globs and paths on the host.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_sequence

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_converged import watch_globs


def converged_watch(inputs):
    if not isinstance(inputs, dict):
        raise AnsibleFilterError("converged_watch takes the checked mok_signing inputs (a dict), got %r" % (inputs,))
    pairs = inputs.get("mok_signing_host_key_paths") or []
    if not is_sequence(pairs) or not all(isinstance(p, dict) and "key" in p and "cert" in p for p in pairs):
        raise AnsibleFilterError("mok_signing_host_key_paths must be a list of {key, cert}, got %r" % (pairs,))
    return watch_globs(inputs.get("mok_signing_key_dir") or "", pairs)


class FilterModule(object):
    def filters(self):
        return {"converged_watch": converged_watch}
