# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Files on the host, written the one way the collection's modules write them: compared first, then through a
temporary file in the same directory and a rename (AnsibleModule.atomic_move), so that a reader or a killed run
never sees half a file. Used by gdrcopy_files, gdrcopy_mok (its helpers) and gdrcopy_build (its helpers)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import tempfile

MODE_RE = re.compile(r"^0?[0-7]{3}\Z")  # an octal mode as the roles write it ("0644")
# The helpers option (documented in plugins/doc_fragments/helpers.py): the programs a role runs, written by the
# module that runs first with them (ensure_helpers).
HELPERS_SPEC = dict(type="list", elements="dict", default=[], no_log=False, options=dict(
    dest=dict(type="path", required=True), content=dict(type="str", required=True, no_log=False),
    mode=dict(type="str", default="0755")))


def current(dest):
    """(bytes, mode, uid) of a regular file at dest; None when there is none; (None, None, None) for a link;
    'other' for a directory or the like."""
    try:
        st = os.lstat(dest)
    except OSError:
        return None
    if os.path.islink(dest):
        return (None, None, None)
    if not os.path.isfile(dest):
        return "other"
    with open(dest, "rb") as f:
        return (f.read(), st.st_mode & 0o7777, st.st_uid)


def same(dest, data, mode):
    """The file at dest holds data, with mode, owned by us."""
    have = current(dest)
    return isinstance(have, tuple) and have == (data, mode, os.geteuid())


def put(module, dest, data, mode):
    """Write data to dest through a temporary file in the same directory and a rename, with mode, owned by us.
    Missing parent directories are made (0755)."""
    parent = os.path.dirname(dest)
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=".%s." % os.path.basename(dest))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        module.atomic_move(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    os.chmod(dest, mode)  # atomic_move keeps the mode of a file it replaces
    if os.stat(dest).st_uid != os.geteuid():
        os.chown(dest, os.geteuid(), os.getegid())


def ensure(module, dest, data, mode, check_mode=False):
    """put() unless the file is already so: True when it changed (in check mode, would change)."""
    if same(dest, data, mode):
        return False
    if not check_mode:
        put(module, dest, data, mode)
    return True


def ensure_helpers(module, helpers, check_mode=False, option="helpers"):
    """Each of helpers ({dest, content, mode}: the programs a role runs) through ensure(), once every one was
    checked (an absolute path without '..', an octal mode): the destinations that changed. ValueError naming the
    option and the entry, before anything is written."""
    for helper in helpers or []:
        dest, mode = helper["dest"], helper.get("mode") or "0755"
        if not (dest.startswith("/") and ".." not in dest.split("/") and MODE_RE.match(mode)):
            raise ValueError("%s: %s wants an absolute path and an octal mode such as 0755" % (option, dest))
    return [h["dest"] for h in helpers or []
            if ensure(module, h["dest"], h["content"].encode("utf-8"), int(h.get("mode") or "0755", 8), check_mode)]
