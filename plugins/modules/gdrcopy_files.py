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
extends_documentation_fragment: [gpufleet.gdrcopy.files]
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
      - dest: /etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf
        content: "{{ lookup('ansible.builtin.template', 'modprobe-gdrdrv.conf.j2') }}"
      - dest: /etc/systemd/system/gdrcopy-ansible.service
        content: "{{ lookup('ansible.builtin.template', 'gdrcopy.service.j2') }}"
        after: daemon-reload
      - dest: /etc/systemd/system/multi-user.target.wants/gdrcopy-ansible.service
        state: link
        src: /etc/systemd/system/gdrcopy-ansible.service
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
  sample: [{"dest": "/etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf", "action": "updated"}]
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

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_fileops as FO

# The decisions and the writes are module_utils/gdrcopy_fileops.py's (gdrcopy_build installs the same files).
ARGUMENT_SPEC = dict(files=FO.FILES_SPEC, groups=FO.GROUPS_SPEC)


def run(module):
    """converge_files for the module's options; a refusal or a failed step fails the module with the result so far."""
    try:
        result = FO.converge_files(module, module.params["files"], module.params["groups"],
                                   check=module.check_mode, diff=module._diff)
    except FO.FilesError as e:
        module.fail_json(msg=str(e), **e.result)
    if not result["diff"]:
        del result["diff"]
    return result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
