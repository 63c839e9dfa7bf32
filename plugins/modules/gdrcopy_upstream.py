#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrcopy_upstream
short_description: Remove upstream's own gdrcopy install (packages, DKMS, init script, unit, udev rules, libraries)
description:
  - Removes what upstream's packaging or source install left on a host, before the gdrcopy role installs this
    project's build (C(gdrcopy_upstream_packages=replace)) - what M(gpufleet.gdrcopy.gdrcopy_info) reports as
    RV(gpufleet.gdrcopy.gdrcopy_info#module:upstream).
  - First its packages (C(gdrdrv-dkms), C(libgdrapi), C(gdrcopy-tests), C(gdrcopy); C(gdrcopy), C(gdrcopy-kmod),
    C(gdrcopy-devel)) with their own scripts (C(apt-get purge), C(dnf remove)); then, read again, what they left or a
    source install put there - each DKMS registration of C(gdrdrv) (C(dkms remove --all)), each init script (out of
    the boot sequence, then the file), the unit, helper, modprobe.d file, udev rules, DKMS source trees and libraries,
    and each C(gdrdrv) file outside this project's C(updates/gdrcopy/) (then C(depmod) for its kernel); then
    C(ldconfig) and C(systemctl daemon-reload) when a library or a unit went.
  - A loaded upstream gdrdrv is left loaded; the gdrcopy role's load step reloads gdrdrv when nothing holds it.
  - Nothing to remove, nothing changes.
version_added: "0.3.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  image:
    description: The target is an image root (no running system), so no C(daemon-reload) runs.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Says what would be removed (what the packages' own scripts would take is listed as left over too).
  diff_mode:
    support: full
    description: Each path removed.
"""

EXAMPLES = r"""
- name: Remove upstream's gdrcopy install first
  gpufleet.gdrcopy.gdrcopy_upstream:
  register: upstream_removed
"""

RETURN = r"""
found:
  description: What upstream's install had on the host before (as gdrcopy_info's C(upstream)).
  returned: always
  type: dict
packages:
  description: The packages purged (in check mode, that would be).
  returned: always
  type: list
  elements: str
dkms:
  description: The DKMS versions of gdrdrv removed after the packages.
  returned: always
  type: list
  elements: str
removed:
  description: The files and directories removed after the packages.
  returned: always
  type: list
  elements: str
depmod:
  description: The kernels depmod ran for.
  returned: always
  type: list
  elements: str
ran:
  description: The other commands run (C(ldconfig), C(daemon-reload), the init script removals).
  returned: always
  type: list
  elements: str
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts as F
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_upstream as U
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_commands import Failed, checked

SBIN = ["/sbin", "/usr/sbin"]
ENV = {"LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}


def command(module, argv):
    """argv's output; Failed (gdrcopy_commands) when it exits non-zero."""
    return checked(argv, *module.run_command(argv, environ_update=ENV))


def package_manager(module):
    if os.path.exists("/var/lib/dpkg/status"):
        return module.get_bin_path("apt-get", required=True)
    return module.get_bin_path("dnf") or module.get_bin_path("yum", required=True)


def remove_path(path, check):
    if os.path.isdir(path) and not os.path.islink(path):
        if not check:
            shutil.rmtree(path)
        return True
    if os.path.lexists(path):
        if not check:
            os.unlink(path)
        return True
    return False


def run(module, image):
    check = module.check_mode
    before = F.upstream_facts(F.Host(module, "/", image=image))
    result = {"changed": False, "found": before, "packages": [], "dkms": [], "removed": [], "depmod": [], "ran": []}
    if not U.found(before):
        return result
    result["changed"] = True
    names = [p["name"] for p in before["packages"]]
    if names:
        if not check:
            command(module, U.package_argv(package_manager(module), names))
        result["packages"] = sorted(names)
    # what the packages' own scripts left (in check mode, everything found: they did not run)
    left = U.leftovers(before if check or not names else F.upstream_facts(F.Host(module, "/", image=image)))
    dkms = module.get_bin_path("dkms", opt_dirs=SBIN)
    for version in left["dkms"]:
        if not check:
            if dkms:
                command(module, [dkms, "remove", "-m", "gdrdrv", "-v", version, "--all"])
            remove_path("/var/lib/dkms/gdrdrv/" + version, check)
        result["dkms"].append(version)
    tool = module.get_bin_path("update-rc.d", opt_dirs=SBIN) or module.get_bin_path("chkconfig", opt_dirs=SBIN)
    for script in left["init"]:
        if tool and not check:
            command(module, U.init_argv(tool, script))
        if tool:
            result["ran"].append(" ".join(U.init_argv(tool, script)))
        if remove_path(script, check):
            result["removed"].append(script)
    for path in left["files"]:
        if remove_path(path, check):
            result["removed"].append(path)
    depmod = module.get_bin_path("depmod", required=True, opt_dirs=SBIN)
    for release, paths in sorted(left["modules"].items()):
        gone = [p for p in paths if remove_path(p, check)]
        if gone or release in [k for d in before["dkms"] for k in d["kernels"]]:
            if not check and os.path.isdir("/lib/modules/%s/kernel" % release):
                command(module, [depmod, release])
            result["depmod"].append(release)
        result["removed"] += gone
    if left["ldconfig"]:
        if not check:
            command(module, [module.get_bin_path("ldconfig", required=True, opt_dirs=SBIN)])
        result["ran"].append("ldconfig")
    if left["daemon_reload"] and not image and os.path.isdir("/run/systemd/system"):
        if not check:
            command(module, [module.get_bin_path("systemctl", required=True), "daemon-reload"])
        result["ran"].append("daemon-reload")
    return result


def main():
    module = AnsibleModule(argument_spec=dict(image=dict(type="bool", default=False)), supports_check_mode=True)
    try:
        result = run(module, module.params["image"])
    except (Failed, IOError, OSError) as err:
        module.fail_json(msg="removing upstream's gdrcopy install: %s. Run again once the cause is fixed (what was "
                             "removed stays removed)" % err)
    if module._diff:
        result["diff"] = [{"before_header": p, "after_header": p, "before": "(present)\n", "after": ""}
                          for p in result["packages"] + result["removed"]]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
