# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Action plugin of gdrcopy_build: fleet builds around the module call (plugins/modules/gdrcopy_build.py).

Without the fleet option the module runs as it is. With it: before the call, each build to take whose entry in the
controller's cache has the recorded sha256 is sent to the host's temporary directory and given to the module with
that sha256 (the module unpacks it with gdrcopy-build --from, which checks it again); after the call, each build the
host packed for the fleet is brought back (slurp: it works under become), checked against the sha256 the host
computed, and stored in the cache with the sha256 the controller computed (plugins/module_utils/gdrcopy_fleet.py).

Signing on the controller (controller_signer, with driver.sign_cert): the arguments are taken out before the module
runs, so neither the key nor its path reaches the host. Each module the call left awaiting a signature is read back
(slurp), checked against the sha256 the host reported, signed here (plugins/module_utils/gdrcopy_modsign.py: gdrdrv
for that kernel only, checked against the certificate), sent to the task's temporary directory, and a second module
call checks and installs it. With the fleet cache, each distinct module is signed once and its signature kept there.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import hashlib
import os
import tempfile

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_fleet as FLEET
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_modsign as MS
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_inputs import plain

MODULE = "gpufleet.gdrcopy.gdrcopy_build"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False  # a temporary directory is made only when builds are sent

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        fleet = plain(args["fleet"]) if args.get("fleet") else None
        signer = plain(args.pop("controller_signer", None) or {})
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
            if signer:
                result["signed_on_controller"] = []
            if signer and result.get("awaiting") and not result.get("failed") and not self._task.check_mode:
                cache = (fleet or {}).get("cache") or ""
                second = self._sign(args, signer, cache, result["awaiting"], task_vars)
                result = merge(result, second)
        except (FLEET.FleetError, MS.SignError, AnsibleActionFail) as err:
            result.update(failed=True, msg=to_text(err))
        finally:
            if self._connection._shell.tmpdir is not None:
                self._remove_tmp_path(self._connection._shell.tmpdir)
        if fleet:
            result["fleet"] = report
        return result

    def _read(self, path):
        """A controller file's bytes (found as the copy module finds src; an ansible-vault file decrypted)."""
        try:
            real = self._loader.get_real_file(self._find_needle("files", path), decrypt=True)
            try:
                with open(real, "rb") as f:
                    return f.read()
            finally:
                self._loader.cleanup_tmp_file(real)
        except (AnsibleError, IOError, OSError) as err:
            raise MS.SignError("controller_signer: cannot read %s on the controller: %s" % (path, to_text(err)))

    def _sign(self, args, signer_args, cache, awaiting, task_vars):
        """Sign each awaiting module here and run the module again with them: its result."""
        signer = MS.open_signer(signer_args, self._read, cache)
        sent = []
        for entry in awaiting:
            if entry.get("kernel") not in (args.get("kernels") or []):  # the host says which: only the task's
                raise MS.SignError("the host asks for a signature for kernel %r, which this task does not build for"
                                   % entry.get("kernel"))
            got = self._execute_module(module_name="ansible.legacy.slurp", module_args={"src": entry["path"]},
                                       task_vars=task_vars)
            if got.get("failed"):
                raise MS.SignError("reading %s for its signature failed: %s" % (entry["path"], got.get("msg")))
            data = base64.b64decode(got["content"])
            if hashlib.sha256(data).hexdigest() != entry["sha256"]:
                raise MS.SignError("%s changed on its way to the controller (sha256 %s, the host said %s): not signed"
                                   % (entry["path"], hashlib.sha256(data).hexdigest(), entry["sha256"]))
            signed, dummy = signer.sign(data, entry["kernel"], entry["hash"])
            fd, local = tempfile.mkstemp(prefix="gdrcopy-signed.", suffix=".ko")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(signed)
                remote = self._put(local, "gdrdrv-%s.ko" % entry["kernel"])
            finally:
                os.unlink(local)
            sent.append({"kernel": entry["kernel"], "from": remote})
        second = self._execute_module(module_name=MODULE, module_args=dict(args, signed=sent), task_vars=task_vars)
        second["signed_on_controller"] = [e["kernel"] for e in sent]
        second["signatures_made"] = signer.signatures
        return second

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


def merge(first, second):
    """The result of a call that ran the module twice (before and after the controller signed): the second's state,
    with what only the first did (compiles, takes, packs, helpers, the tarball) and both calls' changes and times."""
    out = dict(second)
    builds = dict((r["kernel"], r["build"]) for r in first.get("kernels") or [])
    out["kernels"] = [dict(r, build=builds.get(r["kernel"], r["build"])) for r in second.get("kernels") or []]
    if first.get("lib") and second.get("lib"):
        out["lib"] = dict(second["lib"], **dict((k, first["lib"][k]) for k in ("build", "install") if k in first["lib"]
                                                and first["lib"][k] != "current"))
    for key in ("built", "taken", "packed", "helpers", "source", "packages_recorded"):
        if key in first:
            out[key] = first[key]
    for key in ("changed_files", "ran"):
        if key in first or key in second:
            out[key] = (first.get(key) or []) + [v for v in second.get(key) or [] if v not in (first.get(key) or [])]
    out["changed"] = bool(first.get("changed") or second.get("changed"))
    if "diff" in first or "diff" in second:
        out["diff"] = (first.get("diff") or []) + (second.get("diff") or [])
    seconds = dict(first.get("seconds") or {})
    for step, value in (second.get("seconds") or {}).items():
        seconds[step] = round(seconds.get(step, 0) + value, 2)
    out["seconds"] = seconds
    for key in ("record", "rollback_record"):
        out[key] = bool(first.get(key) or second.get(key))
    return out
