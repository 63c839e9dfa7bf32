#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrcopy_report
short_description: Write the gdrcopy fleet report (Markdown, a self-contained HTML page and JSON)
description:
  - An action plugin, so it runs on the controller only, whatever host the task names (nothing reaches a host). Takes what C(gdrcopy_info) and the verify step
    found on every host and writes one report in three forms into I(dest) - C(gdrcopy-report.md) (fits 120
    columns), C(gdrcopy-report.html) (one page, nothing fetched - the hosts grouped by cause with what to do, a
    filter box and health toggles, then one row per host) and C(gdrcopy-report.json) (for programs - a
    C(schema_version), ISO 8601 time, finding codes and structured details, valid against
    docs/report.schema.json).
  - A host's health is C(gdrcopy_info)'s, turned red when its smoke check or C(gdrcopy_sanity) failed, or when no
    data came back from it.
  - The files are rewritten on every run (their time stamp is the run's); C(changed) is true only when what they
    say about the fleet differs from the files already there. In check mode nothing is written.
  - docs/STATUS-REPORT.md explains how to read the report.
version_added: "0.1.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  hosts:
    description:
      - Host name -> C(info) (the registered C(gdrcopy_info) result), C(verify) (the C(gdrcopy_verify) fact, when
        verify ran), C(smoke) (the C(gdrcopy_smoke) fact, when the gdrcopy role ran), C(mode) (C(host) or
        C(image)) and C(pending) (sentences about pending reboots or enrollments). A host without C(info) is
        reported red, as one that failed earlier in the run (its C(verify) and C(smoke) still say why) or was
        unreachable.
    type: dict
    required: true
  dest:
    description: Directory the report files are written to (created when missing).
    type: path
    required: true
  title:
    description: Title of the report.
    type: str
    default: gdrcopy fleet report
attributes:
  check_mode:
    support: full
    description: Says whether the report would change and writes nothing.
  diff_mode:
    support: none
    description: The report is rewritten whole; no diff is shown.
  action:
    support: full
    description: An action plugin; it runs on the controller.
"""

EXAMPLES = r"""
- name: Write the fleet report on the controller
  gpufleet.gdrcopy.gdrcopy_report:
    dest: /srv/reports/gdrcopy
    hosts: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars)
               | map(attribute='gdrcopy_status', default={}))) }}"
    title: GPU nodes, rack 12
  run_once: true
"""

RETURN = r"""
files:
  description: Path of each form (C(markdown), C(html), C(json)); written only when C(written).
  returned: always
  type: dict
written:
  description: The files were written (false in check mode).
  returned: always
  type: bool
summary:
  description: How many hosts are C(green), C(amber) and C(red), and C(hosts) in all.
  returned: always
  type: dict
  sample: {"green": 7, "amber": 2, "red": 1, "hosts": 10}
red_hosts:
  description: The hosts reported red, with their first blocker.
  returned: always
  type: dict
causes:
  description: The hosts grouped by finding code, blockers first, then by host count - C(code), C(severity),
    C(title), C(remedy), C(count) and C(hosts), as in the JSON file.
  returned: always
  type: list
  elements: dict
  sample: [{"code": "modules_disabled", "severity": "blocker", "title": "module loading disabled", "count": 34,
            "hosts": ["gpu-001", "..."], "remedy": "..."}]
"""
