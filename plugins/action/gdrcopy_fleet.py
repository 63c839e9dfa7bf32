# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Action plugin of gdrcopy_fleet: the fleet build plan, made once on the controller for the whole play
(plugins/module_utils/gdrcopy_fleet.py decides; plugins/modules/gdrcopy_fleet.py documents)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_inputs import plain
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_fleet as FLEET

ARGUMENT_SPEC = dict(
    cache=dict(type="path", required=True),
    want_fact=dict(type="str", default="__gdrcopy_fleet_want"),
    builders=dict(type="list", elements="str"),
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        hosts = list(task_vars.get("ansible_play_hosts") or [])
        hostvars = task_vars.get("hostvars") or {}
        wants = {}
        for host in hosts:
            want = hostvars[host].get(args["want_fact"]) if host in hostvars else None
            if want is not None:
                wants[host] = plain(want)
        result.update(FLEET.plan_play(hosts, wants, args["cache"], args.get("builders"), self._task.check_mode))
        return result
