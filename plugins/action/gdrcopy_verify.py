# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Action plugin of gdrcopy_verify: with O(read) (a host this run found converged), the verification is composed on
the controller from that read (module_utils/gdrcopy_converged.py: from_read), and nothing starts on the host;
otherwise the module runs there (plugins/modules/gdrcopy_verify.py), given the OS facts this run already read of the
host (O(os_facts)), so that it does not import Ansible's fact collectors a second time."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_converged as C
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts as F
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_inputs import plain


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = self._task.args
        read = args.get("read")
        if not read:
            module_args = dict((k, v) for k, v in args.items() if k != "read")
            known = F.complete_os_facts((task_vars or {}).get("ansible_facts"))
            if known and "os_facts" not in module_args:
                module_args["os_facts"] = plain(known)
            result.update(self._execute_module(module_name="gpufleet.gdrcopy.gdrcopy_verify",
                                               module_args=module_args, task_vars=task_vars))
            return result
        if not isinstance(read, dict):
            result.update(failed=True, msg="read must be a dict (the result of an earlier gdrcopy_verify call)")
            return result
        smoke, tests = args.get("smoke_result"), args.get("tests_result")
        result.update(C.from_read(plain(read), plain(smoke) if smoke is not None else None,
                                  plain(tests) if tests is not None else None))
        return result
