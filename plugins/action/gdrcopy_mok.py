# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Action plugin of gdrcopy_mok: reads the controller's certificate and private key (controller_cert,
controller_key: paths on the controller, found as the copy module finds src) and hands the module their content,
base64-encoded; the module does the rest on the host (plugins/modules/gdrcopy_mok.py). With sign_on_controller the
key is never read here (it must be left out): the controller signs with it in the gdrcopy role's build step."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def _content(self, name, path):
        """The file's bytes, base64-encoded; '' when no path is given."""
        if not path:
            return ""
        try:
            found = self._find_needle("files", path)
            with open(found, "rb") as f:
                return to_text(base64.b64encode(f.read()))
        except (AnsibleError, IOError, OSError) as err:
            raise AnsibleError("%s: cannot read %s on the controller: %s" % (name, path, to_text(err)))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        try:
            if args.get("sign_on_controller") and args.get("controller_key"):
                raise AnsibleError("sign_on_controller: the private key stays on the controller; leave controller_key "
                                   "out (the gdrcopy role's gdrcopy_controller_signer signs with it)")
            for name in ("controller_cert", "controller_key"):
                args[name] = self._content(name, args.get(name) or "")
        except AnsibleError as err:
            result.update(failed=True, msg=to_text(err), changes=[])
            return result
        result.update(self._execute_module(module_name="gpufleet.gdrcopy.gdrcopy_mok", module_args=args,
                                           task_vars=task_vars))
        return result
