#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrcopy_inputs
short_description: Check and normalise the inputs of one of the collection's roles, before anything changes
description:
  - An action plugin, so it runs on the controller only (no connection to the host, no Python started there).
  - Reads the role's variables as the play has them for the host, checks each against the role's
    C(meta/argument_specs.yml) and a strict rule for its kind (an anchored pattern for every string that reaches a
    path, shell, config file, unit or argv; a parsed number for modes and integers), then the rules that involve
    several variables.
  - Normalises once - a boolean given as C(-e gdrcopy_load=false) is the string C("false") and comes back as
    C(false); modes come back as four octal digits, checksums in lower case. The roles read the returned values,
    never the raw variables, for the inputs this changes.
  - The result holds every input of the role under its own name, normalised, beside the keys below.
  - A refused value fails the task with one message that names every bad variable and says what it may be.
version_added: "0.1.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  role:
    description: The role whose variables are checked.
    type: str
    required: true
    choices: [gdrcopy, mok_signing, nvidia_peermem]
attributes:
  check_mode:
    support: full
    description: Reads and checks only; the same in check mode.
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
  action:
    support: full
    description: An action plugin; it runs on the controller.
"""

EXAMPLES = r"""
- name: Check and normalise the gdrcopy variables
  gpufleet.gdrcopy.gdrcopy_inputs:
    role: gdrcopy
  register: __gdrcopy_in

- name: Use a normalised boolean
  ansible.builtin.debug:
    msg: gdrdrv is loaded now
  when: __gdrcopy_in.gdrcopy_load
"""

RETURN = r"""
digest:
  description: sha256 of the normalised inputs that describe the host's state (secret ones and C(gdrcopy_fast_rerun)
    left out); the fast-rerun record compares it.
  returned: success
  type: str
concerns:
  description: Sentences about accepted values that weaken the host (they are also shown as warnings).
  returned: success
  type: list
  elements: str
source:
  description:
    - The source the host builds (role C(gdrcopy) only). C(type) C(tarball) - C(version), C(url), C(sha256) (the
      user's pin, else the release table's), C(release_sha256) (the table's), C(file) (the controller cache file,
      named by its checksum) and C(key). C(type) C(git) - C(version), C(repo), C(ref), C(pin) (the commit the ref must
      resolve to, empty when unpinned), C(clone) (its directory in the cache) and C(key).
    - Hosts whose sources have equal C(key) share one fetch on the controller.
  returned: success and role is gdrcopy
  type: dict
release_table:
  description: The release table with C(gdrcopy_releases) merged over the shipped one (role C(gdrcopy) only).
  returned: success and role is gdrcopy
  type: dict
gdrdrv_params:
  description: The options a loaded gdrdrv should show (what C(gdrcopy_load) compares with C(/proc/driver/gdrdrv/params)),
    the pinned release's built-in defaults (its C(gdrdrv_params) row) with C(gdrcopy_module_params) over them.
  returned: success and role is gdrcopy
  type: dict
  sample: {dbg_enabled: 0, info_enabled: 0, use_persistent_mapping: 1}
"""
