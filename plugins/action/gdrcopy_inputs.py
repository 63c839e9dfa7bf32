# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Action plugin of gdrcopy_inputs: a role's inputs checked and normalised on the controller, before anything changes.

The options, their documentation and the return values are in plugins/modules/gdrcopy_inputs.py; the rules are in
plugins/module_utils/gdrcopy_inputs.py. Nothing reaches the host: no connection is opened, no Python starts there."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_pipeline as PIPE
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_inputs as I

import yaml  # ansible-core requires PyYAML

# libyaml's loader when PyYAML was built with it (as ansible-core's own loaders prefer): this runs once per role and
# host in every run, and the pure-Python loader takes about 8 times as long for the same argument specs.
SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

ARGUMENT_SPEC = dict(
    role=dict(type="str", required=True, choices=sorted(I.KINDS)),
)
# The collection's root, where roles/<role>/meta/argument_specs.yml is, in a checkout and in an installed collection.
COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_yaml(path):
    with open(path) as handle:
        return yaml.load(handle, Loader=SafeLoader)  # nosec: a safe loader (libyaml's or PyYAML's)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False  # ansible-core 2.16+: no connection to the task's host is opened

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        role = args["role"]
        role_dir = os.path.join(COLLECTION, "roles", role)
        options = load_yaml(os.path.join(role_dir, "meta", "argument_specs.yml"))["argument_specs"]["main"]["options"]
        shipped = load_yaml(os.path.join(role_dir, "files", "releases.yml")) if role == "gdrcopy" else None

        values, errors = {}, []
        for name in options:
            if name not in task_vars:
                continue
            try:
                values[name] = I.plain(self._templar.template(task_vars[name]))
            except AnsibleError as err:  # an undefined variable inside the value, a template error
                errors.append("%s could not be read: %s" % (name, to_text(err).splitlines()[0]))
        if errors:
            return self._refuse(result, role, errors)
        normalised, errors, concerns, context = I.check_role(role, options, values, shipped)
        if errors:
            return self._refuse(result, role, errors)
        files = {}
        cert = normalised.get("mok_signing_controller_cert")
        if cert and normalised.get("mok_signing_enabled"):
            try:  # its sha256 joins the digest: another certificate is another state. The key's never does.
                files["mok_signing_controller_cert"] = PIPE.file_sha256(cert)
            except (IOError, OSError) as err:
                return self._refuse(result, role, ["mok_signing_controller_cert %s cannot be read on the controller: %s"
                                                   % (cert, err.strerror or err)])
        result.update(normalised)
        result["digest"] = I.digest(normalised, options, leave_out=I.NOT_STATE, files=files)
        result["concerns"] = concerns
        if "releases" in context:
            result["release_table"] = context["releases"]
            result["source"] = context["source"]
            result["gdrdrv_params"] = context["gdrdrv_params"]
        for concern in concerns:
            self._display.warning("%s: %s." % (task_vars.get("inventory_hostname", "?"), concern))
        # A secret among the inputs (no_log in the spec: a password, a PKCS#11 PIN or URI, the controller's signer):
        # the result is not shown at any verbosity (-v would print every value); it is registered as it is.
        if any(v for k, v in normalised.items() if (options.get(k) or {}).get("no_log")):
            result["_ansible_verbose_override"] = True
        result["changed"] = False
        return result

    @staticmethod
    def _refuse(result, role, errors):
        result.update(
            failed=True,
            msg="%s. Fix it in your inventory (the variables are in roles/%s/README.md), then run again; nothing was "
                "changed." % ("; ".join(errors), role))
        return result
