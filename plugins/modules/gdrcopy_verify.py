#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrcopy_verify
short_description: Check gdrcopy with its own tests, and compare or write the record of a verified host
description:
  - Reads the host as M(gpufleet.gdrcopy.gdrcopy_info) does (its result holds every fact that module returns), then
    runs what has effects on a running host, which gdrcopy_info never does.
  - The smoke check - C(gdr_open) opens C(/dev/gdrdrv) through the installed library; the runtime and driver versions
    must equal O(expect). It runs the code of the gdrcopy role's C(gdrcopy-smoke) helper (module_utils
    C(gdrcopy_smoke)) in a child forked from the module - no other interpreter starts, a crash in the library is
    that child's.
  - gdrcopy's own test programs on a GPU - C(gdrcopy_sanity), C(gdrcopy_copybw), C(gdrcopy_copylat), each parsed
    (counts, bandwidth and latency figures); skipped with the reason on a host without a GPU or the programs.
  - The record of a verified host (C(/var/lib/gdrcopy-ansible/converged.json), 0600) - the digest of the run's
    inputs, the fingerprint of the state and the test results. With O(inputs) the host is compared with it
    (RV(converged)); with O(write_record) a host with no problem and no blocker gets it written.
  - It fails only on bad options; RV(problems) lists what is wrong with the host, for the playbook to stop on.
version_added: "0.2.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  build_root:
    description: The gdrcopy role's build root (build stamps).
    type: path
    default: /var/lib/gdrcopy-ansible/build
  prefix:
    description: The gdrcopy role's install prefix (the library, the test programs under C(<prefix>/current/bin)).
    type: path
    default: /opt/gdrcopy
  cuda_home:
    description: The CUDA toolkit.
    type: path
    default: /usr/local/cuda
  release:
    description: The pinned release, as gdrcopy_info reports it.
    type: str
    default: ""
  mok_cert:
    description: The certificate modules are signed with (the state and the verdict read it).
    type: path
  expect:
    description: Run the smoke check, expecting this MAJOR.MINOR. Empty - no smoke check (unless O(smoke_result)).
    type: str
    default: ""
  smoke_result:
    description: A smoke result this run already has (the gdrcopy role's C(gdrcopy_smoke)); used as it is.
    type: dict
  tests:
    description: gdrcopy's test programs to run on the GPU.
    type: list
    elements: str
    choices: [sanity, copybw, copylat]
    default: []
  tests_result:
    description: Test results to report instead of running the tests (those a converged host's record keeps).
    type: dict
  gpu_id:
    description: The CUDA device index the tests run on.
    type: int
    default: 0
  tests_timeout:
    description: Seconds each test program may run.
    type: int
    default: 900
  inputs:
    description: The digests of this run's inputs; the host is compared with its record (RV(converged)).
    type: dict
  watch:
    description: Further files (globs) that are part of the state.
    type: list
    elements: str
    default: []
  kernels:
    description: The kernels the gdrcopy role builds for, as M(gpufleet.gdrcopy.gdrcopy_info) takes them.
    type: list
    elements: str
    default: []
  write_record:
    description: Write the record of the verified state when RV(problems) and the blockers are empty (needs O(inputs)).
    type: bool
    default: false
  reboot_required:
    description:
      - Whether the run leaves something that only a reboot completes (a gdrdrv reload that is pending, a MOK
        enrollment). On a running Debian system the project's name is added to C(/run/reboot-required.pkgs) and
        C(/run/reboot-required) is made (the flag unattended-upgrades, needrestart and the motd read); when false,
        the name is taken out again, and both files go when no other package is named there.
    type: bool
    default: false
  nvidia_src_dir:
    description: As M(gpufleet.gdrcopy.gdrcopy_info)'s, so that the gdrcopy role's plan can use this result instead of
      reading the host again.
    type: path
  groups:
    description: As M(gpufleet.gdrcopy.gdrcopy_info)'s - group names looked up in C(/etc/group), returned as C(groups).
    type: list
    elements: str
    default: []
  packages:
    description: As M(gpufleet.gdrcopy.gdrcopy_info)'s - package names looked up, returned as C(packages).
    type: list
    elements: str
    default: []
  image:
    description:
      - Read C(/) as an image, as M(gpufleet.gdrcopy.gdrcopy_info)'s option of that name does; inside a chroot this is
        automatic. Nothing runs on an image - no smoke check, no tests - and its record holds no
        running state, so an image a verified run left as it is compares as converged on its next run.
    type: bool
    default: false
  read:
    description:
      - This run's read of the host, by an earlier call of this module that found it converged (preflight's
        result). Given, nothing is read, run or written on the host - the action plugin answers on the controller
        with that read, O(smoke_result) and O(tests_result) (both as given, else the read's), and the problems they
        show. A converged host was read, smoke-checked and compared with its record moments ago in the same run.
    type: dict
  os_facts:
    description:
      - The OS facts this run already has of the host (those this module returns as C(ansible_facts), such as
        C(distribution), C(os_family) and C(pkg_mgr)), used instead of collecting them again
        through Ansible's fact collectors (whose import is most of a read's CPU time). The action plugin passes
        them from C(ansible_facts) when that holds C(os_family) and C(pkg_mgr); without them, or with an incomplete
        set, the module collects them.
    type: dict
attributes:
  check_mode:
    support: full
    description: Runs the smoke check and the tests (they change nothing on disk); never writes the record.
  diff_mode:
    support: full
    description: The record, before and after.
"""

EXAMPLES = r"""
- name: Check gdrcopy and record the verified state
  gpufleet.gdrcopy.gdrcopy_verify:
    release: "2.6"
    expect: "2.6"
    tests: [sanity, copybw, copylat]
    inputs: "{{ gdrcopy_run_inputs }}"
    write_record: true
  register: verified

- name: Stop on what is wrong
  ansible.builtin.assert:
    that: verified.problems | length == 0
    fail_msg: "{{ verified.problems | join('; ') }}"
"""

RETURN = r"""
smoke:
  description: The smoke check (C(ran), C(method), C(passed), C(runtime_version), C(driver_version), C(expected), C(msg)).
  returned: always
  type: dict
tests:
  description: The GPU tests (C(ran), C(reason), C(gpu_id), and per program its parsed result, C(argv), C(rc)).
  returned: always
  type: dict
converged:
  description:
    - The comparison with the record (C(ok), C(differences), C(state), C(record), C(new_kernels),
      C(verified_tests)), as M(gpufleet.gdrcopy.gdrcopy_info) returns it.
  returned: when O(inputs) is given
  type: dict
problems:
  description: What is wrong - a failed smoke check, a failed gdrcopy_sanity, a loaded gdrdrv without its device node.
  returned: always
  type: list
  elements: str
record_written:
  description: Whether the record was written (it changed).
  returned: always
  type: bool
reboot_flag:
  description: Whether C(/run/reboot-required) was written or cleared for this project (Debian, O(reboot_required)).
  returned: always
  type: bool
ansible_facts:
  description: The OS facts the roles read (as M(gpufleet.gdrcopy.gdrcopy_info) returns them), so no setup task runs.
  returned: always
  type: dict
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_converged as C
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts as F
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_fileops import ensure, reboot_flag

ARGUMENT_SPEC = dict(
    build_root=dict(type="path", default="/var/lib/gdrcopy-ansible/build"),
    prefix=dict(type="path", default="/opt/gdrcopy"),
    cuda_home=dict(type="path", default="/usr/local/cuda"),
    release=dict(type="str", default=""),
    mok_cert=dict(type="path"),
    expect=dict(type="str", default=""),
    smoke_result=dict(type="dict"),
    tests=dict(type="list", elements="str", default=[], choices=sorted(F.TEST_PROGRAMS)),
    tests_result=dict(type="dict"),
    gpu_id=dict(type="int", default=0),
    tests_timeout=dict(type="int", default=900),
    inputs=dict(type="dict"),
    watch=dict(type="list", elements="str", default=[]),
    kernels=dict(type="list", elements="str", default=[]),
    write_record=dict(type="bool", default=False),
    reboot_required=dict(type="bool", default=False),
    nvidia_src_dir=dict(type="path"),
    groups=dict(type="list", elements="str", default=[]),
    packages=dict(type="list", elements="str", default=[]),
    image=dict(type="bool", default=False),
    read=dict(type="dict"),
    os_facts=dict(type="dict"),
)
NOT_CHECKED = {"ran": False, "method": "none", "passed": False, "msg": "not checked in this run"}


def record_text(facts, inputs, tests, smoke):
    """The record of a verified state, with the tests and the smoke check that verified it (the status report of
    a later run shows them as this run's: gdrcopy_info's last_verify)."""
    state = facts["converged"]["state"]
    return json.dumps({"version": state["version"], "inputs": inputs, "state": state, "verify": tests,
                       "smoke": smoke}, indent=4, sort_keys=True) + "\n"


def verify(module, params, host=None):
    h = host or F.Host(module, "/", image=params.get("image", False))
    smoke_given, tests_given = params.get("smoke_result") is not None, params.get("tests_result") is not None
    facts = F.gather(module, {
        "root": "/", "image": params.get("image", False), "build_root": params["build_root"],
        "prefix": params["prefix"], "cuda_home": params["cuda_home"], "release": params["release"],
        "mok_cert": params["mok_cert"], "converged_inputs": params["inputs"], "watch": params["watch"],
        "kernels": params.get("kernels") or [],
        "nvidia_src_dir": params["nvidia_src_dir"], "groups": params["groups"],
        "packages": params.get("packages") or [],
        "smoke": "" if smoke_given else params["expect"], "run_tests": [] if tests_given else params["tests"],
        "gpu_id": params["gpu_id"], "tests_timeout": params["tests_timeout"], "os_facts": params.get("os_facts")}, h)
    smoke = params["smoke_result"] if smoke_given else facts.get("smoke", dict(NOT_CHECKED, expected=""))
    tests = params["tests_result"] if tests_given else facts["tests"]
    result = dict(facts, smoke=smoke, tests=tests, problems=C.problems(smoke, tests, facts["gdrdrv"]),
                  record_written=False, changed=False)
    if params["write_record"] and params.get("inputs") is not None and not result["problems"] \
            and not facts["blockers"]:
        path, text = h.path(C.RECORD_PATH), record_text(facts, params["inputs"], tests, smoke)
        changed = ensure(module, path, to_bytes(text), 0o600, module.check_mode)  # temporary file and rename
        result["record_written"] = result["changed"] = changed
        if changed and module._diff:
            result["diff"] = {"before_header": C.RECORD_PATH, "after_header": C.RECORD_PATH, "after": text}
    required = params.get("reboot_required", False)
    result["reboot_flag"] = bool(h.live and reboot_flag(module, required, module.check_mode, root=h.root))
    result["changed"] = result["changed"] or result["reboot_flag"]
    return result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = verify(module, module.params)
    module.exit_json(ansible_facts=result["os"], **result)


if __name__ == "__main__":
    main()
