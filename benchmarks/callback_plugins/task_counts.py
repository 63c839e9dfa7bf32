# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Count, per host, the task results of a playbook run and the tasks that ran a module on the host.

A benchmark aid (benchmarks/common.py enables it): a task result is what the recap counts as ok (changed included);
a remote execution is a task result, or a loop item, whose action runs on the host: not one of the controller-side
actions below, not an answer from a read (ANSWER_FROM_READ without the module's invocation), and not delegated to
the controller. (An action plugin such as copy or template may start more than
one module for its result; each such task counts once.) Written as JSON to $GDRCOPY_TASK_COUNTS at the end."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: task_counts
type: aggregate
short_description: Count task results and remote module executions per host (benchmarks)
description:
  - Writes {host - {ok, remote}} as JSON to the file named by the environment variable GDRCOPY_TASK_COUNTS.
requirements:
  - GDRCOPY_TASK_COUNTS set to a writable path
"""

import json
import os

from ansible.plugins.callback import CallbackBase

CONTROLLER = {
    "set_fact", "assert", "debug", "fail", "meta", "include_vars", "include_tasks", "import_tasks", "include_role",
    "import_role", "add_host", "group_by", "set_stats", "validate_argument_spec", "pause", "gdrcopy_inputs",
    "gdrcopy_plan", "gdrcopy_report",
}


# Action plugins that answer from a read of the same run when nothing on the host needs doing, and start their
# module only otherwise: a module ran when the result carries its invocation.
ANSWER_FROM_READ = {"gdrcopy_verify", "gdrcopy_peermem"}


def short(action):
    return (action or "").rsplit(".", 1)[-1]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_counts"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self.counts = {}

    def _host(self, result):
        return self.counts.setdefault(result._host.get_name(), {"ok": 0, "remote": 0})

    @staticmethod
    def _remote(result):
        task = result._task
        delegated = task.delegate_to in ("localhost", "127.0.0.1") if task.delegate_to else False
        if short(task.action) in ANSWER_FROM_READ:
            return "invocation" in result._result and not delegated
        return short(task.action) not in CONTROLLER and not delegated

    def v2_runner_on_ok(self, result):
        counts = self._host(result)
        counts["ok"] += 1
        if self._remote(result) and not result._result.get("results"):
            counts["remote"] += 1

    def v2_runner_item_on_ok(self, result):
        if self._remote(result):
            self._host(result)["remote"] += 1

    def v2_runner_item_on_failed(self, result):
        self.v2_runner_item_on_ok(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if self._remote(result) and not result._result.get("results"):
            self._host(result)["remote"] += 1

    def v2_playbook_on_stats(self, stats):
        path = os.environ.get("GDRCOPY_TASK_COUNTS")
        if path:
            with open(path, "w") as f:
                json.dump(self.counts, f, indent=2, sort_keys=True)
