# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Files on the host, written the one way the collection's modules write them: compared first, then through a
temporary file in the same directory and a rename (AnsibleModule.atomic_move), so that a reader or a killed run
never sees half a file. Used by gdrcopy_files and gdrcopy_mok."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import tempfile

MODE_RE = re.compile(r"^0?[0-7]{3}\Z")  # an octal mode as the roles write it ("0644")


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
