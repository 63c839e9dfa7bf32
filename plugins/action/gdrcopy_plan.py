# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Action plugin of gdrcopy_plan: the gdrcopy role's plan for a host, decided on the controller from what
gdrcopy_info read there (plugins/module_utils/gdrcopy_plan.py decides; plugins/modules/gdrcopy_plan.py documents)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_inputs import plain
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_plan as PLAN

ARGUMENT_SPEC = dict(
    info=dict(type="dict", required=True),
    kernels=dict(type="list", elements="str", default=[]),
    mode=dict(type="str", required=True, choices=["host", "image"]),
    device_group=dict(type="str", required=True),
    device_group_create=dict(type="bool", default=False),
    headers_query=dict(type="dict", default={}),
    source_query=dict(type="dict", default={}),
    source_candidates=dict(type="list", elements="str", default=[]),
    headers_package=dict(type="str", required=True),
    upstream_packages=dict(type="str", default="refuse", choices=["refuse", "replace"]),
    backend=dict(type="str", default="auto", choices=list(PLAN.BACKENDS)),
    version=dict(type="str", default=""),
    signer=dict(type="str", default="", choices=list(PLAN.SIGNERS)),
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False  # ansible-core 2.16+: no connection to the task's host is opened

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        args = plain(args)
        try:
            out = PLAN.plan(args["info"], args["kernels"], args["mode"], args["device_group"],
                            args["device_group_create"], args["headers_query"], args["source_query"],
                            args["source_candidates"], args["headers_package"], args["upstream_packages"],
                            args["backend"], args["version"], args["signer"])
        except PLAN.Blocked as err:
            result.update(failed=True, msg=str(err))
            return result
        result.update(out, changed=False)
        return result
