#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrcopy_fleet
short_description: Plan fleet builds once for the whole play - who compiles each distinct build, who takes it
description:
  - An action plugin - it runs on the controller only (no connection, no Python started on a host). Run it with
    C(run_once); the result (register it) holds the plan of every host of the play.
  - Reads each play host's wanted builds from the fact O(want_fact) (set before, per host - C(lib) (C(dir),
    C(stamp)) or null, C(driver_dir), C(stamp_base), C(kernels), and C(builds), the stamps found in the host's build
    directories) and names each build the host lacks by a hash of its stamp.
  - Looks at the controller's cache O(cache) for each name the play needs - C(<name>.tar.gz) beside its sha256 in
    C(<name>.tar.gz.sha256). An entry whose checksum is not the recorded one is deleted (reported only, in check
    mode) and built again.
  - For each name the cache lacks, one host of the play that needs it and may build (O(builders)) compiles and
    shares it - of those, the one with the fewest builds picked so far (the first in play order on a tie), so that
    different builds compile on different hosts at once; the others take it. A name that no permitted host needs
    is compiled by each host that needs it.
  - M(gpufleet.gdrcopy.gdrcopy_build) with its C(fleet) option does the sharing and taking.
  - This relies on the linear strategy (Ansible's default) - every host finishes a task before any host starts the
    next, so a shared build is on the controller before the task that takes it.
version_added: "0.3.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  cache:
    description: The controller's directory of fleet builds (C(<gdrcopy_artifact_dir>/<version>-<sha12>)).
    type: path
    required: true
  want_fact:
    description: The name of the per-host fact that says what each host wants.
    type: str
    default: __gdrcopy_fleet_want
  builders:
    description: The hosts that may compile builds for others. Left out - any host of the play.
    type: list
    elements: str
attributes:
  check_mode:
    support: full
    description: Plans the same; a bad cache entry is reported, not deleted.
  diff_mode:
    support: none
    description: Nothing on a host is changed.
  action:
    support: full
    description: An action plugin; it runs on the controller.
"""

EXAMPLES = r"""
- name: Say what each host wants
  ansible.builtin.set_fact:
    __gdrcopy_fleet_want:
      lib: {dir: /var/lib/gdrcopy-ansible/build/2.6-c9eaf0591234/lib, stamp: {component: lib, sha256: "{{ sha }}"}}
      driver_dir: /var/lib/gdrcopy-ansible/build/2.6-c9eaf0591234/driver
      stamp_base: {component: driver, sha256: "{{ sha }}", flavor: open}
      kernels: "{{ kernels }}"
      builds: "{{ info.builds }}"

- name: Plan fleet builds
  gpufleet.gdrcopy.gdrcopy_fleet:
    cache: /srv/gdrcopy-builds/2.6-c9eaf0591234
    builders: "{{ groups['build_hosts'] }}"
  run_once: true
  register: fleet

- name: Build, share, take and install
  gpufleet.gdrcopy.gdrcopy_build:
    fleet:
      cache: /srv/gdrcopy-builds/2.6-c9eaf0591234
      node_dir: /var/lib/gdrcopy-ansible/build/artifacts
      share: "{{ fleet.hosts[inventory_hostname].share }}"
      take: "{{ fleet.hosts[inventory_hostname].take }}"
    kernels: "{{ kernels }}"
    driver: "{{ driver_spec }}"
"""

RETURN = r"""
hosts:
  description:
    - Per play host - C(share) (C({dir, name}) builds it compiles and brings to the controller), C(take) (builds it
      unpacks from the controller), C(own) (names it compiles for itself alone). A host that lacks nothing has three
      empty lists; a host without the fact is left out.
  returned: always
  type: dict
builders:
  description: The host picked to compile each name the cache lacks.
  returned: always
  type: dict
ready:
  description: The names the cache holds with their recorded checksum.
  returned: always
  type: list
  elements: str
deleted:
  description: The names whose cache entry had a wrong checksum (deleted, or would be in check mode).
  returned: always
  type: list
  elements: str
"""
