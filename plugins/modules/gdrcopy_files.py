#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrcopy_files
short_description: Put a role's files on a host in one call, each by a temporary file and a rename
description:
  - Writes each file of O(files) whose content, mode or owner differs from what is wanted, through a temporary file
    in the same directory and a rename (C(AnsibleModule.atomic_move)), so a reader or a killed run never sees half a
    file; removes each one whose O(files[].state) is C(absent); makes each directory whose O(files[].state) is
    C(directory) (or sets its mode); points each link whose O(files[].state) is C(link) at O(files[].src) (a
    temporary link and a rename). Missing parent directories are made (mode 0755).
  - O(groups) are made first (C(groupadd --system)) where they are missing.
  - The roles give the content (rendered by the C(ansible.builtin.template) or read by the C(ansible.builtin.file)
    lookup on the controller), so one module start on the host replaces a copy or template task per file (each of
    which starts two).
  - After the writes, the commands that the changed files ask for (O(files[].after)) run once each, in order -
    C(ldconfig), and C(systemctl daemon-reload) where systemd runs (not inside a chroot, such as an image root).
  - A unit is enabled the way C(systemctl enable) does it for a unit with only C(WantedBy=) in its C([Install])
    section - a link in C(<target>.wants/) to the unit file - which also works in an image root, where no systemd
    runs.
version_added: "0.2.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  groups:
    description: System groups to make (C(groupadd --system)) before the files, when the host has none of that name.
    type: list
    elements: str
    default: []
  files:
    description: The files, in the order they are written.
    type: list
    elements: dict
    required: true
    suboptions:
      dest:
        description: Absolute path of the file (or directory), without C(..) components.
        type: str
        required: true
      content:
        description: The whole content (text). Required when O(files[].state) is C(present).
        type: str
      mode:
        description: Octal permission bits, as a string (C(0644), C(0755)).
        type: str
        default: "0644"
      state:
        description: C(present) writes the file; C(absent) removes it (and nothing else); C(directory) makes a
          directory with O(files[].mode) (its content is left alone); C(link) makes O(files[].dest) a symbolic link
          to O(files[].src).
        type: str
        choices: [present, absent, directory, link]
        default: present
      src:
        description: The target of the link (O(files[].state) C(link)), an absolute path.
        type: str
      after:
        description: What to run once after the writes when this file changed.
        type: str
        choices: [none, ldconfig, daemon-reload]
        default: none
attributes:
  check_mode:
    support: full
    description: Says which files would be written or removed, with their diff; writes nothing and runs nothing.
  diff_mode:
    support: full
    description: The before and after text of each changed file (a mode or owner change shows in RV(files)).
"""

EXAMPLES = r"""
- name: Install the gdrcopy role's files
  gpufleet.gdrcopy.gdrcopy_files:
    files:
      - dest: /etc/modprobe.d/gdrdrv.conf
        content: "{{ lookup('ansible.builtin.template', 'modprobe-gdrdrv.conf.j2') }}"
      - dest: /etc/systemd/system/gdrcopy.service
        content: "{{ lookup('ansible.builtin.template', 'gdrcopy.service.j2') }}"
        after: daemon-reload
      - dest: /etc/systemd/system/multi-user.target.wants/gdrcopy.service
        state: link
        src: /etc/systemd/system/gdrcopy.service
      - dest: /etc/kernel/postinst.d/zz-gdrcopy-ansible
        state: absent
    groups: [gdrdrv]
"""

RETURN = r"""
files:
  description: One entry per file - C(dest), and C(action) (C(created), C(updated), C(mode), C(removed) or C(ok)).
  returned: always
  type: list
  elements: dict
  sample: [{"dest": "/etc/modprobe.d/gdrdrv.conf", "action": "updated"}]
changed_files:
  description: The paths written or removed (in check mode, that would be).
  returned: always
  type: list
  elements: str
groups:
  description: One entry per group of O(groups) - C(name), and C(action) (C(created) or C(ok)).
  returned: always
  type: list
  elements: dict
ran:
  description: The commands run after the writes (C(ldconfig), C(daemon-reload)); in check mode none.
  returned: always
  type: list
  elements: str
"""

import grp
import os
import re
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_text

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_facts import in_chroot
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_fileops import MODE_RE, current, put
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_inputs import GROUP_NAME_RE
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import point_link

FILE_SPEC = dict(
    dest=dict(type="str", required=True),
    content=dict(type="str"),
    mode=dict(type="str", default="0644"),
    state=dict(type="str", choices=["present", "absent", "directory", "link"], default="present"),
    src=dict(type="str"),
    after=dict(type="str", choices=["none", "ldconfig", "daemon-reload"], default="none"),
)
ARGUMENT_SPEC = dict(files=dict(type="list", elements="dict", required=True, options=FILE_SPEC),
                     groups=dict(type="list", elements="str", default=[]))
GROUP_RE = re.compile(GROUP_NAME_RE)  # the rule the roles' inputs are checked with


def check_entry(entry):
    """The sentence that refuses a file entry, or None."""
    dest = entry["dest"]
    if not dest.startswith("/") or "\0" in dest or ".." in dest.split("/") or dest.endswith("/"):
        return "files: %r is not an absolute file path without '..'" % dest
    if entry["state"] == "directory" and entry["content"] is not None:
        return "files: %s is a directory and has no content" % dest
    if entry["state"] == "present" and entry["content"] is None:
        return "files: %s has no content" % dest
    if entry["state"] == "link":
        src = entry["src"] or ""
        if not src.startswith("/") or "\0" in src or "\n" in src or entry["content"] is not None:
            return "files: the link %s wants an absolute src and no content" % dest
    elif entry["src"] is not None:
        return "files: %s is no link and has no src" % dest
    if entry["state"] != "absent":
        if not MODE_RE.match(entry["mode"] or ""):
            return "files: %s has mode %r, not an octal mode such as 0644" % (dest, entry["mode"])
    return None


def action_for(entry, have, uid):
    """What has to happen to one file: created, updated, mode, removed or ok (pure)."""
    if entry["state"] == "absent":
        return "ok" if have is None else "removed"
    if have is None:
        return "created"
    if entry["state"] == "link":
        return "ok" if have == ("link", entry["src"]) else "updated"
    if entry["state"] == "directory":
        return "ok" if have[1] == int(entry["mode"], 8) and have[2] == uid else "mode"
    body, mode, owner = have
    if body is None or body != to_bytes(entry["content"]):
        return "updated"
    if mode != int(entry["mode"], 8) or owner != uid:
        return "mode"
    return "ok"


def text_of(body):
    try:
        return to_text(body, errors="strict") if body is not None else ""
    except UnicodeError:
        return "(binary, %d bytes)\n" % len(body)


def current_directory(dest):
    """(None, mode, uid) of a directory at dest (not a link to one); None when nothing is there; else 'other'."""
    try:
        st = os.lstat(dest)
    except OSError:
        return None
    return (None, st.st_mode & 0o7777, st.st_uid) if stat.S_ISDIR(st.st_mode) else "other"


def current_link(dest):
    """('link', target) of a symbolic link at dest; None when nothing is there; 'other' for anything else."""
    try:
        return ("link", os.readlink(dest))
    except OSError:
        return None if not os.path.lexists(dest) else "other"


def make_groups(module, names, check):
    """Each group of names made (groupadd --system) when missing: [{name, action}]."""
    out = []
    for name in names:
        try:
            grp.getgrnam(name)
            out.append({"name": name, "action": "ok"})
            continue
        except KeyError:
            pass
        if not check:
            argv = [module.get_bin_path("groupadd", required=True, opt_dirs=["/usr/sbin", "/sbin"]), "--system", name]
            rc, stdout, stderr = module.run_command(argv)
            if rc != 0:
                module.fail_json(msg="%s failed (exit %d): %s" % (" ".join(argv), rc, (stderr or stdout).strip()))
        out.append({"name": name, "action": "created"})
    return out


def after_commands(module, needed):
    """Run ldconfig and systemd's daemon-reload once each when a changed file asked for them."""
    ran = []
    for what in ("ldconfig", "daemon-reload"):
        if what not in needed:
            continue
        if what == "daemon-reload":
            if not os.path.isdir("/run/systemd/system") or in_chroot():
                continue  # no running systemd here (an image root): it reads the unit when it boots
            argv = [module.get_bin_path("systemctl", required=True), "daemon-reload"]
        else:
            argv = [module.get_bin_path("ldconfig", required=True, opt_dirs=["/sbin", "/usr/sbin"])]
        rc, out, err = module.run_command(argv)
        if rc != 0:
            module.fail_json(msg="%s failed (exit %d): %s" % (" ".join(argv), rc, (err or out).strip()), ran=ran)
        ran.append(what)
    return ran


def run(module):
    entries = module.params["files"]
    for entry in entries:
        error = check_entry(entry)
        if error:
            module.fail_json(msg=error)
    bad = [g for g in module.params["groups"] if not GROUP_RE.match(g)]
    if bad:
        module.fail_json(msg="groups: %s is no group name (a letter or _, then letters, digits, _ . or -, at most 32)" % bad[0])
    uid = os.geteuid()
    result = {"changed": False, "files": [], "changed_files": [], "ran": [],
              "groups": make_groups(module, module.params["groups"], module.check_mode)}
    result["changed"] = any(g["action"] == "created" for g in result["groups"])
    diffs, needed = [], set()
    for entry in entries:
        dest = entry["dest"]
        have = {"directory": current_directory, "link": current_link}.get(entry["state"], current)(dest)
        if have == "other":
            module.fail_json(msg="%s is there and is no %s: move it away, then run again" % (
                dest, {"directory": "directory", "link": "symbolic link"}.get(entry["state"], "regular file")),
                **result)
        action = action_for(entry, have, uid)
        result["files"].append({"dest": dest, "action": action})
        if action == "ok":
            continue
        result["changed"] = True
        result["changed_files"].append(dest)
        needed.add(entry["after"])
        if module._diff and entry["state"] == "link":
            diffs.append({"before_header": dest, "after_header": dest, "before": "-> %s\n" % have[1] if have else "",
                          "after": "-> %s\n" % entry["src"]})
        elif module._diff and action in ("created", "updated", "removed") and entry["state"] != "directory":
            before = text_of(have[0]) if have and have[0] is not None else ""
            diffs.append({"before_header": dest, "after_header": dest, "before": before,
                          "after": "" if entry["state"] == "absent" else entry["content"]})
        if module.check_mode:
            continue
        if entry["state"] == "directory":
            if action == "created":
                os.makedirs(dest, int(entry["mode"], 8))
            os.chmod(dest, int(entry["mode"], 8))
            if os.stat(dest).st_uid != uid:
                os.chown(dest, uid, os.getegid())
        elif entry["state"] == "link":
            point_link(dest, entry["src"])
        elif action == "removed":
            os.unlink(dest)
        elif action == "mode":
            os.chmod(dest, int(entry["mode"], 8))
            os.chown(dest, uid, os.getegid())
        else:
            put(module, dest, to_bytes(entry["content"]), int(entry["mode"], 8))
    if diffs:
        result["diff"] = diffs
    if result["changed"] and not module.check_mode:
        result["ran"] = after_commands(module, needed)
    return result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
