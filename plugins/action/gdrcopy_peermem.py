# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Action plugin of gdrcopy_peermem: with O(read) (a read of this host earlier in the run) whose answer needs nothing
done on the host, the result is composed on the controller (module_utils/gdrcopy_peermem.py: from_read) and nothing
starts on the host; otherwise the module runs there (plugins/modules/gdrcopy_peermem.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_peermem as PM
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_inputs import plain

# The options from_read needs, with the module's own defaults and choices (its argument spec, the one source).
SPEC = dict((k, PM.ARGUMENT_SPEC[k]) for k in ("state", "legacy", "persist", "image"))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        read = args.pop("read", None)
        answer = self._from_read(read, args) if read is not None else None
        if answer is None:
            result.update(self._execute_module(module_name="gpufleet.gdrcopy.gdrcopy_peermem", module_args=args,
                                               task_vars=task_vars))
        else:
            result.update(answer)
        return result

    @staticmethod
    def _from_read(read, args):
        """The answer from read, or None when the module has to run (also for options the module would refuse:
        its argument spec says why)."""
        p = dict((k, args.get(k, spec["default"])) for k, spec in SPEC.items())
        if not isinstance(read, dict) or any(p[k] not in SPEC[k]["choices"] for k in ("state", "legacy")):
            return None
        try:
            persist, image = boolean(p["persist"], strict=True), boolean(p["image"], strict=True)
        except TypeError:
            return None
        try:
            return PM.from_read(plain(read), p["state"], p["legacy"], persist, image)
        except (KeyError, TypeError, AttributeError):
            return None  # a read without the facts the plan needs: the module reads the host itself
