# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: paths
short_description: The fixed places of gdrcopy-ansible on a host, from the one table the modules use
description:
  - Returns, for each name given, the path the collection's modules and the kernel hook use
    (C(plugins/module_utils/gdrcopy_pipeline.py), C(PATHS)), so the roles and playbooks never spell one out.
  - Names - C(libexec) (the helpers), C(state_dir), C(config_dir), C(converged_record) (the record of a verified
    host), C(mok_signer) (the link to the certificate that signs), C(driver_record) (the driver options of the
    last install), C(hook_status), C(smoke_program), C(mknod_program), C(module_subdir) (under
    C(/lib/modules/<kernel>/)), C(rollback_record), C(packages_record), C(modprobe_options), C(unit) and
    C(unit_link) (the boot unit and its C(.wants) link), C(loader_conf), and the names before 0.3.0 that the roles
    retire - C(retired_options), C(retired_unit), C(retired_unit_link).
  - Runs on the controller; an unknown name fails with the list of known ones.
version_added: "0.2.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  _terms:
    description: The names of the paths.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Show where the helpers go
  ansible.builtin.debug:
    msg: "{{ lookup('gpufleet.gdrcopy.paths', 'libexec') }}"
"""

RETURN = r"""
_raw:
  description: One path per name, in the order given.
  type: list
  elements: str
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import PATHS


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        unknown = [t for t in terms if t not in PATHS]
        if unknown:
            raise AnsibleLookupError("gpufleet.gdrcopy.paths: no path is named %s (known: %s)"
                                     % (", ".join(repr(t) for t in unknown), ", ".join(sorted(PATHS))))
        return [PATHS[t] for t in terms]
