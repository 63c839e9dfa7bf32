#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrcopy_build
short_description: Build libgdrapi and gdrdrv for every kernel, sign gdrdrv and install both, all or nothing
description:
  - One call does the whole per-host pipeline of the gdrcopy role, in this order - build libgdrapi, build gdrdrv
    for each kernel, install the library (and point O(lib.link) at it, then refresh the loader cache), sign each
    gdrdrv, install each gdrdrv, run depmod for each kernel whose module changed.
  - Each build runs the C(gdrcopy-build) helper, which checks the node's tarball against its sha256, builds in
    C(<dir>.new) and renames it into place, so a failed or killed build leaves the previous one. A build is redone
    exactly when its stamp (its inputs) differs from the one in its directory; every compile is logged.
  - The library is installed by the C(gdrcopy-install) helper (staged beside the prefix, compared with the build,
    swapped in). A library install is current when its stamp matches and every file matches its manifest.
  - Nothing is installed until every build of the call succeeded; with O(driver.sign_command) no unsigned gdrdrv is
    installed. gdrdrv goes to C(/lib/modules/<kernel>/<module_subdir>/gdrdrv.ko) through a temporary file and a
    rename.
  - The kernel postinst hook of the gdrcopy role runs the same code (module_utils C(gdrcopy_pipeline)) for a kernel
    installed between two runs, with the driver options this module records in O(record). O(replay) does the same
    from Ansible, for the kernels installed since the run that wrote the record (playbooks/gdrcopy.yml, when
    preflight found nothing else changed).
  - O(helpers) are the role's C(gdrcopy-build), C(gdrcopy-install) and C(gdrcopy-smoke), written first - the
    builds and installs of this call run the first two, the load step and the nodes booted from an image the third;
    the kernel hook and O(replay) find them there.
  - O(groups) and O(files) are the role's other files (the loader path, the node helper, the modprobe.d options,
    the unit and its wants link, the kernel hook), put in place last, once every build and install succeeded, as
    M(gpufleet.gdrcopy.gdrcopy_files) does (which the role calls instead when this step does not run) - so a full
    run starts one module for the build, the install and the files.
version_added: "0.2.0"
author: gdrcopy-ansible contributors (@gpufleet)
extends_documentation_fragment: [gpufleet.gdrcopy.helpers, gpufleet.gdrcopy.files]
options:
  kernels:
    description: The kernel releases to build gdrdrv for. Each needs its headers (C(/lib/modules/<k>/build)).
    type: list
    elements: str
    required: true
  driver:
    description:
      - How gdrdrv is built, signed and installed. This is what O(record) keeps.
      - Required unless O(replay) is true, which reads it from O(record).
    type: dict
    suboptions:
      build_helper:
        description: The C(gdrcopy-build) helper.
        type: path
        required: true
      tarball:
        description: The verified source tarball on the node.
        type: path
        required: true
      build_log:
        description: The log every compile is appended to.
        type: path
        required: true
      driver_dir:
        description: The directory holding one build directory per kernel.
        type: path
        required: true
      stamp_base:
        description: The inputs of every gdrdrv build (C(sha256) of the tarball among them); the kernel is added.
        type: dict
        required: true
      nvidia_src_dir:
        description: The NVIDIA kernel source (C(NVIDIA_SRC_DIR)); empty lets upstream's Makefile look.
        type: str
        default: ""
      flavor:
        description: The NVIDIA kernel module flavor gdrdrv is built for.
        type: str
        choices: [open, proprietary]
        required: true
      module_subdir:
        description: Where gdrdrv goes under C(/lib/modules/<kernel>/).
        type: str
        default: updates/gdrcopy
      sign_command:
        description:
          - The argv that signs modules; C(--check) (predict only) and C(KERNEL=MODULE) for each module are
            appended. It may print a JSON object with C(results) (C(kernel), C(action)); it fails with a non-zero
            exit and a C(msg) or a last line on stderr. Empty - no signing on the host.
        type: list
        elements: str
        default: []
      sign_cert:
        description:
          - Signing on the controller - the certificate (DER or PEM, on the host) that every installed gdrdrv's
            appended signature must verify against (C(openssl cms -verify)). A built module without such a
            signature is not installed; it is listed in RV(awaiting) for the action plugin, which signs it with
            O(controller_signer) and calls the module again with O(signed). The kernel hook, which has no
            controller, leaves such modules built and not installed.
          - Empty - not signing on the controller. Not together with O(driver.sign_command).
        type: path
        default: ""
      timeout:
        description: Seconds each build, install or signing step may run before it is stopped.
        type: int
        default: 1800
      backend:
        description:
          - What maps GPU memory for the library (the gdrcopy role's C(gdrcopy_backend) as its plan resolved it).
            V(dmabuf) - gdrcopy 2.6's DMA-BUF path - builds and installs no gdrdrv for any kernel (O(kernels) is
            ignored), and the kernel hook that reads the record builds nothing either.
        type: str
        choices: [gdrdrv, dmabuf]
        default: gdrdrv
  lib:
    description: The library build and install; left out, only gdrdrv is handled.
    type: dict
    suboptions:
      dir:
        description: Its build directory.
        type: path
        required: true
      stamp:
        description: Its inputs; the build and the install are redone when they change.
        type: dict
        required: true
      targets:
        description: The make targets and variables of the build (C(lib), C(exes), C(CUDA=...)).
        type: list
        elements: str
        required: true
      install_dir:
        description: The versioned install directory (C(<prefix>/<version>)).
        type: path
        required: true
      install_targets:
        description: The make targets of the install (C(lib_install), C(exes_install)).
        type: list
        elements: str
        required: true
      install_helper:
        description: The C(gdrcopy-install) helper.
        type: path
        required: true
      link:
        description:
          - A stable symbolic link beside O(lib.install_dir) (C(<prefix>/current)), pointed at the installed version
            through a temporary link and a rename. Then the loader cache is refreshed (C(ldconfig)) when the
            library or the link changed, or when C(ldconfig -p) does not list C(<link>/lib/libgdrapi.so).
          - Left out, neither the link nor the loader cache is touched.
        type: path
      keep:
        description:
          - After the install and the link, keep this many library releases under the prefix - the one O(lib.link)
            points at and the most recently installed others - and the build directories and node tarballs of those
            releases under the build root (the directory above O(lib.dir)'s); remove the rest.
          - V(0) keeps everything. V(2) or more keeps the release before a change, which O(rollback) goes back to.
        type: int
        default: 0
  source:
    description:
      - The verified source tarball on the controller, which this module's action plugin sends to the host -
        O(driver.tarball) is replaced (a temporary file and a rename) when its sha256 is not the C(sha256) of
        O(driver.stamp_base), before any build. A copy whose sha256 is not that one is refused.
      - Left out, O(driver.tarball) must be on the host already (the kernel hook's and O(replay)'s case).
    type: dict
    suboptions:
      src:
        description: The tarball's path on the controller.
        type: path
        required: true
      from:
        description: Set by the action plugin - where it put the copy on the host (not in check mode).
        type: path
  controller_signer:
    description:
      - Signing on the controller (with O(driver.sign_cert)), read by this module's action plugin on the controller
        and never sent to the host - neither the key, nor its path, nor a digest of it. Each module in RV(awaiting)
        is brought to the controller, checked to be gdrdrv built for its kernel, signed (PKCS#7 as the kernel's
        C(sign-file) makes it, with the kernel's C(CONFIG_MODULE_SIG_HASH)), checked against the certificate, and
        sent back in O(signed). With O(fleet.cache), each distinct module is signed once and its signature kept
        there.
    type: dict
    suboptions:
      cert:
        description: The certificate (PEM or DER), a path on the controller (found as the copy module finds src).
        type: path
        required: true
      key:
        description: The private key (PEM), a path on the controller. Or O(controller_signer.pkcs11_uri).
        type: path
      pkcs11_uri:
        description: The key on a PKCS#11 token (RFC 7512 URI, C(pkcs11:token=...;object=...)), through the Python
          package C(python-pkcs11) on the controller.
        type: str
      pkcs11_module:
        description: The token's PKCS#11 library on the controller (the URI's C(module-path) wins).
        type: path
      pkcs11_pin:
        description: The token's user PIN (the URI's C(pin-value) or C(pin-source) win).
        type: str
  hold_resigned:
    description:
      - A key rotation waits for the new key's enrollment (the mok_signing role's C(mok_signing_rotation)) - an
        installed gdrdrv that differs from the new build only in its appended signature is kept, since it still
        loads and the re-signed one would not until the new key is enrolled (RV(kernels[].install) C(held)). The next
        run, once the key is enrolled, installs the re-signed modules. Not recorded for the kernel hook.
    type: bool
    default: false
  signed:
    description: Set by the action plugin - the modules it signed on the controller, C({kernel, from}) each (from -
      where it put the signed copy on the host).
    type: list
    elements: dict
    default: []
  install:
    description: Install what is built. V(false) only builds (fleet builds, before they are shared).
    type: bool
    default: true
  record:
    description:
      - The driver record - the driver options of the last install, which the kernel hook and O(replay) build
        with. Written here after an install (O(install) true), through a temporary file and a rename.
    type: path
  rollback:
    description:
      - Go back to the release installed before the last change (the rollback record,
        C(/var/lib/gdrcopy-ansible/rollback.json), which an install that changed the driver record or the link writes) -
        gdrdrv of that release for O(kernels) from its kept builds (compiled again when they were pruned), the link
        pointed back at its library (then C(ldconfig)) and the driver record restored; the rollback record is then
        removed. The gdrcopy role calls it when the new release fails its smoke check after the load.
      - Fails, changing nothing, when there is no rollback record or its library release was pruned.
        O(driver), O(lib), O(fleet), O(files) and O(groups) must be left out, and O(record) given.
    type: bool
    default: false
  replay:
    description:
      - Build, sign and install gdrdrv for O(kernels) with the driver options in O(record) (written by an earlier
        call), as the kernel hook does; O(record) is only read. O(driver), O(lib) and O(fleet) must be left out.
      - For a host that a verified run left as it is but for newly installed kernels - the run's inputs being the
        same, the recorded options are what the full run would use.
    type: bool
    default: false
  fleet:
    description:
      - Fleet builds (the gdrcopy role with C(gdrcopy_artifact_dir)), handled by this module's action plugin on the
        controller around the call. The plan comes from M(gpufleet.gdrcopy.gdrcopy_fleet).
      - O(fleet.share) - builds this host compiles for others - are packed on the host after the builds, brought to
        O(fleet.cache) on the controller and recorded there with their sha256 (written when the controller received
        them, through a temporary file and a rename).
      - O(fleet.take) - builds another host made - are sent from O(fleet.cache) when the entry's checksum is the
        recorded one, and unpacked by C(gdrcopy-build --from) (which checks that sha256 again, and the stamp inside)
        instead of compiling; a build with no good entry, or whose unpacking fails, is compiled here.
      - Builds travel unsigned; each host signs what it installs.
    type: dict
    suboptions:
      cache:
        description: The controller's directory of fleet builds (C(<gdrcopy_artifact_dir>/<version>-<sha12>)).
        type: path
        required: true
      node_dir:
        description: Where the host leaves the tarballs of the builds it shares.
        type: path
        required: true
      share:
        description: The builds to pack and bring to the controller, C({dir, name}) each (names as the plan gives).
        type: list
        elements: dict
        default: []
      take:
        description: The builds to take from the controller, C({dir, name}) each.
        type: list
        elements: dict
        default: []
notes:
  - Bad options fail before anything runs, each named.
attributes:
  check_mode:
    support: full
    description: Predicts per component and kernel what would be built, signed and installed; runs the signer with
      C(--check) on built modules.
  diff_mode:
    support: full
    description: The library install's stamp, each gdrdrv's sha256 and the driver record, before and after.
"""

EXAMPLES = r"""
- name: Build, sign and install gdrdrv for two kernels, and the library
  gpufleet.gdrcopy.gdrcopy_build:
    kernels: [6.1.0-25-amd64, 6.1.0-26-amd64]
    lib:
      dir: /var/lib/gdrcopy-ansible/build/2.6-c9eaf059/lib
      stamp: {component: lib, sha256: "{{ sha }}"}
      targets: [lib]
      install_dir: /opt/gdrcopy/2.6
      install_targets: [lib_install]
      install_helper: /usr/local/libexec/gdrcopy-ansible/gdrcopy-install
      link: /opt/gdrcopy/current
    driver:
      build_helper: /usr/local/libexec/gdrcopy-ansible/gdrcopy-build
      tarball: /var/lib/gdrcopy-ansible/build/src/gdrcopy-2.6-c9eaf059.tar.gz
      build_log: /var/lib/gdrcopy-ansible/build/builds.log
      driver_dir: /var/lib/gdrcopy-ansible/build/2.6-c9eaf059/driver
      stamp_base: {component: driver, sha256: "{{ sha }}", flavor: open}
      nvidia_src_dir: /usr/src/nvidia-550.54.15
      flavor: open
      sign_command: [/usr/local/libexec/gdrcopy-ansible/mok-sign, --key, /var/lib/shim-signed/mok/MOK.priv,
                     --cert, /var/lib/shim-signed/mok/MOK.der]
    record: /etc/gdrcopy-ansible/driver.json
  register: built

- name: Build, sign and install gdrdrv for a kernel installed since, as the last install did
  gpufleet.gdrcopy.gdrcopy_build:
    kernels: [6.1.0-27-amd64]
    record: /etc/gdrcopy-ansible/driver.json
    replay: true
"""

RETURN = r"""
packages_recorded:
  description: Whether O(packages) added names to the record of the packages the roles installed.
  returned: always
  type: bool
lib:
  description: What happened to the library (null without O(lib)).
  returned: always
  type: dict
  contains:
    build:
      description: C(current), C(built), C(taken) (a fleet build unpacked), C(would build) or C(would take).
      type: str
    install:
      description: C(current), C(installed), C(would install) or C(skipped).
      type: str
    link:
      description: C(current), C(pointed) or C(would point) (with O(lib.link)).
      type: str
    ldconfig:
      description: Whether the loader cache was refreshed (with O(lib.link)).
      type: bool
    pruned:
      description: The library releases, build directories and node tarballs removed by O(lib.keep) (in check mode,
        that would be); only with O(lib.keep) above 0.
      type: list
      elements: str
kernels:
  description: One entry per kernel, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    kernel:
      description: The kernel release.
      type: str
    build:
      description: C(current), C(built), C(taken) (a fleet build unpacked), C(would build) or C(would take).
      type: str
    sign:
      description: C(off) (no signing), C(unchanged), C(signed), C(resigned), C(awaiting signature) (signing on
        the controller, not signed yet), or C(would sign) / C(would resign).
      type: str
    install:
      description: C(current), C(installed), C(would install), C(skipped), C(awaiting signature) or C(held) (with
        O(hold_resigned)).
      type: str
    depmod:
      description: Whether depmod ran for this kernel.
      type: bool
built:
  description: The kernels whose gdrdrv was compiled by this call.
  returned: always
  type: list
  elements: str
taken:
  description: The kernels whose gdrdrv was taken from another host's build (fleet builds).
  returned: always
  type: list
  elements: str
fleet:
  description: With O(fleet) - what was shared and taken.
  returned: when O(fleet) is given
  type: dict
  contains:
    shared:
      description: The names brought to the controller by this host.
      type: list
      elements: str
    taken:
      description: The names sent from the controller to be unpacked here (in check mode, those that would be; nothing
        is sent).
      type: list
      elements: str
    compiled_instead:
      description: The names to take that had no good entry on the controller (compiled here; in check mode, would
        be).
      type: list
      elements: str
awaiting:
  description: The modules waiting for the controller's signature (O(driver.sign_cert)), C({kernel, path, hash,
    sha256}) each - none after the action plugin signed them.
  returned: always
  type: list
  elements: dict
signed_on_controller:
  description: The kernels whose gdrdrv the controller signed in this call.
  returned: with O(controller_signer)
  type: list
  elements: str
installed:
  description: The kernels whose installed gdrdrv changed.
  returned: always
  type: list
  elements: str
source:
  description: What became of the tarball - C(current), C(copied), C(would copy) or C(not sent) (no O(source)).
  returned: success
  type: str
seconds:
  description:
    - Where the call's time went - wall seconds per step that took any (C(plan), C(build), C(pack),
      C(lib_install), C(link_and_ldconfig), C(sign), C(install), C(depmod)).
  returned: always
  type: dict
  sample: {build: 41.2, lib_install: 3.1, sign: 2.4, install: 0.1, depmod: 4.6}
record:
  description: Whether the driver record changed.
  returned: always
  type: bool
rollback_record:
  description: Whether the install wrote the rollback record (the release it replaced, for O(rollback)).
  returned: when the driver record or the link changed
  type: bool
rolled_back:
  description: With O(rollback), the release gone back to (C(release), the version) and the link (C(link)).
  returned: after a rollback
  type: dict
helpers:
  description: The helpers (O(helpers)) written by this call (in check mode, that would be).
  returned: always
  type: list
  elements: str
files:
  description: One entry per file of O(files) - C(dest), and C(action) (C(created), C(updated), C(mode), C(removed)
    or C(ok)).
  returned: when O(files) or O(groups) is given
  type: list
  elements: dict
changed_files:
  description: The paths of O(files) written or removed (in check mode, that would be).
  returned: when O(files) or O(groups) is given
  type: list
  elements: str
groups:
  description: One entry per group of O(groups) - C(name), and C(action) (C(created) or C(ok)).
  returned: when O(files) or O(groups) is given
  type: list
  elements: dict
ran:
  description: The commands run after the writes of O(files) (C(ldconfig), C(daemon-reload)); in check mode none.
  returned: when O(files) or O(groups) is given
  type: list
  elements: str
"""

import json
import os
import subprocess

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_fleet as FLEET
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_pipeline as P
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_fileops as FO
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_fileops import HELPERS_SPEC, ensure_helpers

DRIVER_OPTIONS = dict(
    build_helper=dict(type="path", required=True),
    tarball=dict(type="path", required=True),
    build_log=dict(type="path", required=True),
    driver_dir=dict(type="path", required=True),
    stamp_base=dict(type="dict", required=True),
    nvidia_src_dir=dict(type="str", default=""),
    flavor=dict(type="str", choices=list(P.FLAVORS), required=True),
    module_subdir=dict(type="str", default=P.MODULE_SUBDIR),
    sign_command=dict(type="list", elements="str", default=[], no_log=False),
    sign_cert=dict(type="path", default=""),
    timeout=dict(type="int", default=P.DEFAULT_TIMEOUT),
    backend=dict(type="str", choices=list(P.BACKENDS), default="gdrdrv"),
)
LIB_OPTIONS = dict(
    dir=dict(type="path", required=True),
    stamp=dict(type="dict", required=True),
    targets=dict(type="list", elements="str", required=True),
    install_dir=dict(type="path", required=True),
    install_targets=dict(type="list", elements="str", required=True),
    install_helper=dict(type="path", required=True),
    link=dict(type="path"),
    keep=dict(type="int", default=0),
)
FLEET_OPTIONS = dict(
    cache=dict(type="path", required=True),
    node_dir=dict(type="path", required=True),
    share=dict(type="list", elements="dict", default=[]),
    take=dict(type="list", elements="dict", default=[]),
)
ARGUMENT_SPEC = dict(
    kernels=dict(type="list", elements="str", required=True),
    driver=dict(type="dict", options=DRIVER_OPTIONS),
    lib=dict(type="dict", options=LIB_OPTIONS),
    helpers=HELPERS_SPEC,
    packages=FO.PACKAGES_SPEC,
    files=FO.FILES_SPEC,
    groups=FO.GROUPS_SPEC,
    install=dict(type="bool", default=True),
    record=dict(type="path"),
    replay=dict(type="bool", default=False),
    rollback=dict(type="bool", default=False),
    source=dict(type="dict", options={"src": dict(type="path", required=True), "from": dict(type="path")}),
    fleet=dict(type="dict", options=FLEET_OPTIONS),
    controller_signer=dict(type="dict", no_log=True, options=dict(
        cert=dict(type="path", required=True), key=dict(type="path", no_log=False), pkcs11_uri=dict(type="str"),
        pkcs11_module=dict(type="path"), pkcs11_pin=dict(type="str", no_log=True))),
    signed=dict(type="list", elements="dict", default=[]),
    hold_resigned=dict(type="bool", default=False),
)


def signed_args(params, spec):
    """O(signed) as the pipeline's {kernel: path on the host}, each kernel one of this call's; PipelineError."""
    if params.get("controller_signer"):
        raise P.PipelineError("controller_signer is read on the controller by the action plugin: the module never "
                              "takes it (run gdrcopy_build as a task, not with ansible.legacy)")
    out = {}
    for i, entry in enumerate(params.get("signed") or []):
        kernel, path = entry.get("kernel"), entry.get("from")
        if kernel not in params["kernels"] or not P._path_ok(path or ""):
            raise P.PipelineError("signed[%d]: a kernel of this call and an absolute path (from) are wanted" % i)
        out[kernel] = path
    if out and not spec["sign_cert"]:
        raise P.PipelineError("signed is given but driver.sign_cert is empty: nothing to check the signatures with")
    return out


def fleet_args(params, spec):
    """The pipeline's takes ({build dir: {from, sha256}}) and pack ({dir, builds}) from O(fleet), whose take entries
    the action plugin gave a tarball on the host (from) and the sha256 the controller recorded; every build directory
    must be one of this call's. ({}, None) without O(fleet)."""
    fleet = params.get("fleet")
    if not fleet:
        return {}, None
    dirs = set(P.driver_build_dir(spec, k) for k in params["kernels"])
    if params.get("lib"):
        dirs.add(params["lib"]["dir"])
    try:
        share = FLEET.check_entries(fleet["share"], "fleet.share")
        take = FLEET.check_entries(fleet["take"], "fleet.take")
    except FLEET.FleetError as e:
        raise P.PipelineError(str(e))
    outside = [b["dir"] for b in share + take if b["dir"] not in dirs]
    if outside:
        raise P.PipelineError("fleet: %s is not a build directory of this call" % ", ".join(outside))
    if not P._path_ok(fleet["node_dir"]):
        raise P.PipelineError("fleet.node_dir must be an absolute path")
    takes = {}
    for i, t in enumerate(fleet["take"]):
        if "from" not in t:
            continue  # the action plugin found no good entry on the controller: compiled here
        if not (P._path_ok(t["from"]) and isinstance(t.get("sha256"), str) and P.SHA256_RE.match(t["sha256"])):
            raise P.PipelineError("fleet.take[%d]: an absolute tarball path (from) and a 64-hex sha256 are wanted"
                                  % i)
        takes[t["dir"]] = {"from": t["from"], "sha256": t["sha256"]}
    return takes, {"dir": fleet["node_dir"], "builds": share} if share else None


def _link_target(link):
    try:
        return os.readlink(link)
    except (OSError, TypeError):
        return ""


def write_rollback(path, before, lib, check):
    """After an install that changed the driver record or the link: the release before it (the driver record it
    replaced, the link's target before) as the rollback record, through a temporary file and a rename. Nothing
    when there was no install before (no record or no link target)."""
    if check or not before["record"] or not before["target"]:
        return False
    text = json.dumps({"driver": before["record"], "link": lib["link"], "target": before["target"]}, indent=4,
                      sort_keys=True) + "\n"
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.chmod(path + ".tmp", 0o644)
    os.rename(path + ".tmp", path)
    return True


def rollback(params, check=False, modules_root=P.MODULES_ROOT, run=None, rollback_record=None):
    """O(rollback): the release before the last change back in place, from the rollback record. (result, error)."""
    given = [k for k in ("driver", "lib", "fleet", "files", "groups") if params.get(k)]
    if given or not params.get("record") or params.get("replay") or not params["install"]:
        raise P.PipelineError("rollback takes the release from the rollback record alone: %s" % (
            "leave out " + ", ".join(given) if given else "record is required, with install and without replay"))
    path = rollback_record or P.PATHS["rollback_record"]
    saved = P.read_json(path)
    if not saved:
        raise P.PipelineError("there is no release to roll back to (%s is missing or unreadable): the release before "
                              "this one was never installed here, or a rollback used it already" % path)
    try:
        spec = P.check_driver_spec(saved.get("driver"), "the rollback record's driver options")
        link, target = saved["link"], saved["target"]
    except (KeyError, AttributeError, TypeError):
        raise P.PipelineError("%s is not a rollback record: remove it" % path)
    release_dir = os.path.join(os.path.dirname(link.rstrip("/")), target)
    if not os.path.isfile(os.path.join(release_dir, P.INSTALL_STAMP_FILE)):
        raise P.PipelineError("the release to roll back to, %s, is no longer installed (pruned: gdrcopy_keep_releases "
                              "below 2)" % release_dir)
    kwargs = {"run": run} if run else {}
    try:
        result = P.converge(spec, params["kernels"], lib=None, install=True, check=check, modules_root=modules_root,
                            **kwargs)
    except P.PipelineError as e:
        empty = {"changed": False, "lib": None, "kernels": [], "diff": [], "seconds": {}}
        return summarize(e.results or empty), "rolling back to %s failed: %s" % (target, e)
    out = summarize(result)
    out["lib"] = {"link": "current", "ldconfig": False}
    before = _link_target(link)
    if P.point_link(link, target, check):
        out["changed"] = True
        out["lib"]["link"] = "would point" if check else "pointed"
        out["diff"].append({"before_header": link, "after_header": link, "before": "-> %s\n" % before,
                            "after": "-> %s\n" % target})
        if not check:
            r = (run or subprocess.run)(["ldconfig"], capture_output=True, text=True, errors="replace", check=False)
            if r.returncode != 0:
                return out, "ldconfig failed after the rollback: %s" % P.last_words(r.stdout, r.stderr)
            out["lib"]["ldconfig"] = True
    changed, text = P.write_record(params["record"], spec, check)
    out["record"] = changed
    out["changed"] = out["changed"] or changed
    if not check:
        os.unlink(path)
    out["rolled_back"] = {"release": target, "link": link}
    return out, None


def build(params, check=False, modules_root=P.MODULES_ROOT, run=None, module=None, rollback_record=None):
    """The module's work for its params: (result, error message or None). Every option is checked before anything
    is written; then O(helpers) (with module), the tarball, the pipeline."""
    if params.get("rollback"):
        return rollback(params, check, modules_root, run, rollback_record)
    kwargs = {"run": run} if run else {}
    spec = driver_spec(params)
    P.check_kernels(params["kernels"])
    if params.get("lib"):
        P.check_lib_spec(params["lib"])
    takes, pack = fleet_args(params, spec)
    signed = signed_args(params, spec)
    files, groups = params.get("files") or [], params.get("groups") or []
    if files or groups:
        check_files(params, module)
    helpers = write_helpers(module, params) if module else []
    lib = params.get("lib")
    before = {"record": P.read_json(params["record"]) if params.get("record") else None,
              "target": _link_target(lib.get("link")) if lib and lib.get("link") else ""}
    if lib:
        # the release a rollback would go back to, which pruning keeps: the one in use until this call changes it,
        # else the one the rollback record names
        saved = P.read_json(rollback_record or P.PATHS["rollback_record"]) or {}
        new = os.path.basename(lib["install_dir"].rstrip("/"))
        lib = dict(lib, previous=before["target"] if before["target"] not in ("", new) else
                   (saved.get("target") if isinstance(saved, dict) else "") or "")
    try:
        tarball = put_tarball(spec, params.get("source"), check)
        result = P.converge(spec, params["kernels"], lib=lib, install=params["install"], check=check,
                            modules_root=modules_root, takes=takes, pack=pack, signed=signed,
                            hold_resigned=params.get("hold_resigned", False), **kwargs)
    except P.PipelineError as e:
        empty = {"changed": False, "lib": None, "kernels": [], "awaiting": [], "diff": [], "seconds": {}}
        return with_helpers(summarize(e.results or empty), helpers), str(e)
    out = with_helpers(summarize(result), helpers)
    out["source"] = tarball
    if tarball in ("copied", "would copy"):
        out["changed"] = True
        out["diff"].insert(0, {"before_header": spec["tarball"], "after_header": spec["tarball"], "before": "",
                               "after": "sha256 %s\n" % spec["stamp_base"]["sha256"]})
    if params.get("record") and params["install"] and not params.get("replay"):
        changed, text = P.write_record(params["record"], spec, check)
        if changed:
            out["record"] = out["changed"] = True
            out["diff"].append({"before_header": params["record"], "after_header": params["record"],
                                "before": "", "after": text})
        relinked = lib and lib.get("link") and before["target"] != _link_target(lib["link"])
        if changed or relinked:
            out["rollback_record"] = write_rollback(rollback_record or P.PATHS["rollback_record"], before, lib or {},
                                                    check)
    if files or groups:
        return put_files(module, files, groups, check, out)
    return out, None


def check_files(params, module):
    """O(files) and O(groups) go with an install (not with O(install) false or O(replay)), each entry sound."""
    if params.get("replay") or not params["install"]:
        raise P.PipelineError("files and groups are put in place with an install: leave them out with %s"
                              % ("replay" if params.get("replay") else "install: false"))
    if module is None:
        raise P.PipelineError("files and groups are written through the module")
    try:
        FO.check_files(params.get("files"), params.get("groups"))
    except FO.FilesError as e:
        raise P.PipelineError(str(e))


def put_files(module, files, groups, check, out):
    """The role's other files after the install (fileops.converge_files): (result, error message or None)."""
    try:
        done, error = FO.converge_files(module, files, groups, check=check, diff=True), None
    except FO.FilesError as e:
        done, error = dict({"files": [], "changed_files": [], "groups": [], "ran": [], "diff": []}, **e.result), str(e)
    for key in ("files", "changed_files", "groups", "ran"):
        out[key] = done[key]
    out["diff"].extend(done["diff"])
    out["changed"] = out["changed"] or bool(done["changed_files"]) or any(
        g["action"] == "created" for g in done["groups"])
    return out, error


def put_tarball(spec, source, check):
    """The verified tarball in place on the host (O(source)): 'current', 'copied', 'would copy', or 'not sent'
    (no O(source)). PipelineError when the copy sent is not the verified one."""
    if not source:
        return "not sent"
    want, dest = spec["stamp_base"]["sha256"], spec["tarball"]
    if P.sha256_or_empty(dest) == want:
        return "current"
    if check or not source.get("from"):
        return "would copy"
    got = P.sha256_or_empty(source["from"])
    if got != want:
        raise P.PipelineError("the tarball sent from %s has sha256 %s on the host, not the verified %s: nothing was "
                              "built or installed" % (source["src"], got or "(unreadable)", want))
    P.install_file(source["from"], dest)
    return "copied"


def driver_spec(params):
    """O(driver) checked, or with O(replay) the one O(record) holds; PipelineError naming what is wrong."""
    if not params.get("replay"):
        if not params.get("driver"):
            raise P.PipelineError("driver is required (unless replay is true)")
        return P.check_driver_spec(dict(params["driver"]), "driver")
    given = [k for k in ("driver", "lib", "fleet") if params.get(k)]
    if given or not params.get("record"):
        raise P.PipelineError("replay takes the driver options from record alone: %s" % (
            "leave out " + ", ".join(given) if given else "record is required"))
    try:
        return P.load_driver_record(params["record"])
    except P.PipelineError as e:
        raise P.PipelineError("replay: %s; run the playbook with gdrcopy_fast_rerun: false to build as the role "
                              "does" % e)


def summarize(result):
    result = dict(result)
    rows = result.get("kernels") or []
    result["built"] = [r["kernel"] for r in rows if r["build"] == "built"]
    result["taken"] = [r["kernel"] for r in rows if r["build"] == "taken"]
    result.setdefault("packed", [])
    result.setdefault("awaiting", [])
    result["installed"] = [r["kernel"] for r in rows if r["install"] == "installed"]
    result.setdefault("record", False)
    return result


def write_helpers(module, params):
    """O(helpers) in place (fileops.ensure_helpers): the ones written; PipelineError for a bad entry."""
    try:
        return ensure_helpers(module, params.get("helpers"), module.check_mode)
    except ValueError as e:
        raise P.PipelineError(str(e))


def with_helpers(result, helpers):
    """The result with the helpers written (each a diff entry)."""
    result["helpers"] = helpers
    if helpers:
        result["changed"] = True
        result.setdefault("diff", [])[:0] = [
            {"before_header": h, "after_header": h, "before": "", "after": "(written)\n"} for h in helpers]
    return result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        recorded = FO.record_packages(module, module.params["packages"], module.check_mode)
    except ValueError as e:
        module.fail_json(msg=str(e))
    try:
        result, error = build(module.params, check=module.check_mode, module=module)
    except P.PipelineError as e:
        module.fail_json(msg=str(e))
    diff = result.pop("diff", [])
    result["packages_recorded"] = recorded
    result["changed"] = result.get("changed", False) or recorded
    if module._diff:
        result["diff"] = diff
    if error:
        module.fail_json(msg=error, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
