# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Action plugin of gdrcopy_report: the fleet report is written on the controller, never on a host.

The options, their documentation and the return values are in plugins/modules/gdrcopy_report.py; the rendering
is in plugins/module_utils/gdrcopy_report.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_report as R

ARGUMENT_SPEC = dict(
    hosts=dict(type="dict", required=True),
    dest=dict(type="path", required=True),
    title=dict(type="str", default="gdrcopy fleet report"),
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False  # ansible-core 2.16+: no connection to the task's host is opened

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        dest = os.path.expanduser(args["dest"])
        report = R.build_report(args["hosts"], args["title"], time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        content = dict(report)
        content.pop("generated")
        changed = R.previous_content(dest) != json.loads(json.dumps(content))
        paths = dict((form, os.path.join(dest, name)) for form, name in R.FILES.items())
        if not self._task.check_mode:
            try:
                paths = R.write_report(dest, report)
            except (IOError, OSError) as err:
                result.update(failed=True, msg="cannot write the report into %s: %s" % (dest, err))
                return result
        red = dict((r["host"], r["findings"][0]["text"]) for r in report["hosts"] if r["health"] == "red")
        result.update(changed=changed, files=paths, written=not self._task.check_mode, summary=report["summary"],
                      red_hosts=red, causes=report["causes"])
        return result
