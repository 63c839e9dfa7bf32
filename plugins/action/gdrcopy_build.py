# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Action plugin of gdrcopy_build: fleet builds around the module call (plugins/modules/gdrcopy_build.py).

Without the fleet option the module runs as it is. With it: before the call, each build to take whose entry in the
controller's cache has the recorded sha256 is sent to the host's temporary directory and given to the module with
that sha256 (the module unpacks it with gdrcopy-build --from, which checks it again); after the call, each build the
host packed for the fleet is brought back (slurp: it works under become), checked against the sha256 the host
computed, and stored in the cache with the sha256 the controller computed (plugins/module_utils/gdrcopy_fleet.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_fleet as FLEET
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_inputs import plain

MODULE = "gpufleet.gdrcopy.gdrcopy_build"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False  # a temporary directory is made only when builds are sent

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        fleet = plain(args["fleet"]) if args.get("fleet") else None
        report = {"shared": [], "taken": [], "compiled_instead": []}
        try:
            if args.get("source"):
                args["source"] = self._send_source(plain(args["source"]))
            if fleet:
                share = FLEET.check_entries(fleet.get("share"), "fleet.share")
                take = FLEET.check_entries(fleet.get("take"), "fleet.take")
                args["fleet"] = dict(fleet, share=share, take=self._send(fleet.get("cache") or "", take, report))
            result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
            if fleet and not result.get("failed"):
                self._bring(fleet.get("cache") or "", result.get("packed") or [], report, task_vars)
        except (FLEET.FleetError, AnsibleActionFail) as err:
            result.update(failed=True, msg=to_text(err))
        finally:
            if self._connection._shell.tmpdir is not None:
                self._remove_tmp_path(self._connection._shell.tmpdir)
        if fleet:
            result["fleet"] = report
        return result

    def _put(self, local, name):
        """Copy a controller file into this task's temporary directory on the host: its path there."""
        if self._connection._shell.tmpdir is None:
            self._make_tmp_path()
        remote = self._connection._shell.join_path(self._connection._shell.tmpdir, name)
        self._transfer_file(local, remote)
        self._fixup_perms2([self._connection._shell.tmpdir, remote])
        return remote

    def _send_source(self, source):
        """O(source) with the copy on the host (from); in check mode nothing is sent (the module predicts)."""
        src = source.get("src") or ""
        if not (os.path.isabs(src) and os.path.isfile(src)):
            raise AnsibleActionFail("source.src: %s is not a file on the controller" % (src or "(empty)"))
        if self._task.check_mode:
            return {"src": src}
        return {"src": src, "from": self._put(src, "source.tar.gz")}

    def _send(self, cache, take, report):
        """The take entries with a tarball on the host (from) and the recorded sha256; the builds without a good
        entry in the cache stay without (the module compiles them)."""
        out = []
        for entry in take:
            recorded = FLEET.cached(cache, entry["name"])
            if not recorded:
                report["compiled_instead"].append(entry["name"])
                out.append(entry)
                continue
            if self._task.check_mode:
                out.append(dict(entry, sha256=recorded, **{"from": FLEET.entry_path(cache, entry["name"])}))
                report["taken"].append(entry["name"])
                continue
            remote = self._put(FLEET.entry_path(cache, entry["name"]), entry["name"] + FLEET.SUFFIX)
            out.append(dict(entry, sha256=recorded, **{"from": remote}))
            report["taken"].append(entry["name"])
        return out

    def _bring(self, cache, packed, report, task_vars):
        """Each build the host packed, read back and stored in the cache."""
        for entry in packed:
            got = self._execute_module(module_name="ansible.legacy.slurp", module_args={"src": entry["path"]},
                                       task_vars=task_vars)
            if got.get("failed"):
                raise FLEET.FleetError("bringing %s to the controller failed: %s" % (entry["path"], got.get("msg")))
            data = base64.b64decode(got["content"])
            digest = FLEET.store(cache, entry["name"], data)
            if digest != entry["sha256"]:
                FLEET.drop(cache, entry["name"])
                raise FLEET.FleetError("%s arrived with sha256 %s, not the %s the host computed: not kept"
                                       % (entry["path"], digest, entry["sha256"]))
            report["shared"].append(entry["name"])
