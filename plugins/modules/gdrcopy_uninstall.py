#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrcopy_uninstall
short_description: Remove what gdrcopy-ansible put on a host or an image, in one call
description:
  - Unloads gdrdrv (C(rmmod), then removes C(/dev/gdrdrv)) when nothing holds it; when a process holds
    C(/dev/gdrdrv) it stays loaded until the next boot (RV(pending)), which loads nothing of this project any more.
  - Removes every file the collection's roles write (module_utils/gdrcopy_converged.py C(MANAGED_PATHS)) - the
    helpers, C(/etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf) and the nvidia_peermem role's C(gdrcopy-ansible-*.conf), the boot unit
    and its C(.wants) link, the loader path, the kernel hook, the driver record, the DKMS drop-in, the signer link -
    and gdrdrv under C(/lib/modules/<kernel>/updates/gdrcopy/) for every kernel, the libraries that C(gdrcopy-install)
    put under O(prefix) and its C(current) link, O(build_root), and the state directory. Then the parent
    directories that this emptied, C(depmod) for each installed kernel that lost gdrdrv, C(ldconfig) and
    C(systemctl daemon-reload) (not in an image root).
  - A file at one of the names this project used before 0.3.0, which upstream's packaging uses too
    (C(/etc/modprobe.d/gdrdrv.conf), C(/etc/systemd/system/gdrcopy.service) and its C(.wants) link), is removed only
    when this project wrote it; otherwise it is kept and named in RV(foreign).
  - The signing key in O(key_dir) is kept unless O(keep_key) is false; the device group only goes when O(group) names
    it. With O(packages), the packages the roles installed because the host lacked them (their record on the host)
    are purged with apt, except one that another installed package needs, and then the packages that this left
    unneeded (and only those).
  - A second call finds nothing and changes nothing.
version_added: "0.3.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  prefix:
    description: The install prefix of the library (the gdrcopy role's C(gdrcopy_prefix)).
    type: path
    default: /opt/gdrcopy
  build_root:
    description: The build directories (the gdrcopy role's C(gdrcopy_build_root)).
    type: path
    default: /var/lib/gdrcopy-ansible/build
  key_dir:
    description: Where a generated or controller signing key is kept (the mok_signing role's C(mok_signing_key_dir)).
    type: path
    default: /var/lib/gdrcopy-ansible/mok
  keep_key:
    description: Keep O(key_dir) (the key may be enrolled in the host's firmware; a later install can sign with it).
    type: bool
    default: true
  group:
    description: The device group to delete (C(groupdel)); empty keeps every group.
    type: str
    default: ""
  packages:
    description: Purge the packages the roles installed (their record on the host), when nothing else needs them.
    type: bool
    default: true
  mok_delete:
    description:
      - Also ask for the deletion of the certificate that signs this project's modules (the one the signer link
        C(/var/lib/gdrcopy-ansible/mok-signer.der) points at) from the MOK list, as the enrollment was asked for -
        C(mokutil --delete) with O(mok_password) hashed into a 0600 file that is removed afterwards. The operator
        confirms it at the next boot (MokManager, Delete MOK); until then RV(mok) says so and the reboot flag is set.
      - Nothing is requested for a certificate that is not enrolled, or whose deletion is requested already; nothing on
        an image or a host without EFI or mokutil.
    type: bool
    default: false
  mok_password:
    description: The password MokManager asks for to confirm the deletion (the mok_signing role's
      C(mok_signing_enrollment_password)); required when a deletion is requested.
    type: str
    default: ""
  image:
    description: The root is an image (a chroot), not a running system - nothing is unloaded or reloaded.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Says what would be unloaded and removed (the packages included, from apt's own simulation).
  diff_mode:
    support: full
    description: The paths that go, one per line.
"""

EXAMPLES = r"""
- name: Remove gdrcopy-ansible from the host, the device group and the generated key too
  gpufleet.gdrcopy.gdrcopy_uninstall:
    group: gdrcopy
    keep_key: false
"""

RETURN = r"""
removed:
  description: The files and directories removed (in check mode, that would be), the emptied parents included.
  returned: always
  type: list
  elements: str
foreign:
  description: Files at the project's names that it did not write, kept.
  returned: always
  type: list
  elements: str
kept:
  description: The key directory when O(keep_key) kept it and it exists.
  returned: always
  type: list
  elements: str
unloaded:
  description: Whether gdrdrv was unloaded (in check mode, would be).
  returned: always
  type: bool
pending:
  description: gdrdrv stays loaded until the next boot - a process holds it.
  returned: always
  type: bool
depmod:
  description: The kernels depmod ran for.
  returned: always
  type: list
  elements: str
ran:
  description: The other steps taken - C(stop) (the boot unit), C(reboot-flag) (C(/run/reboot-required) written or
    cleared, on Debian), C(ldconfig), C(daemon-reload).
  returned: always
  type: list
  elements: str
group:
  description: What happened to O(group) - C(removed), C(absent), C(kept) (no group named), or why it stays.
  returned: always
  type: str
packages:
  description: C(removed) (the recorded packages and those their removal left unneeded), C(kept) (another package
    needs them), C(manager) (C(apt), or why nothing was removed).
  returned: always
  type: dict
  sample: {"removed": ["zstd"], "kept": [], "manager": "apt"}
mok:
  description: With O(mok_delete), the signing certificate (C(cert)), what was done about it (C(action) - C(request)
    the deletion was asked for, C(pending) it was asked for before and waits for MokManager, C(absent) not enrolled,
    C(unknown) no EFI, mokutil or certificate; C(kept) without O(mok_delete)) and the sentence about it (C(msg)).
  returned: always
  type: dict
msg:
  description: One sentence on what is left to do (gdrdrv held, kept files, a MOK deletion to confirm), or empty.
  returned: always
  type: str
"""

import grp
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_fileops as FO
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_mok as MOK
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_commands import Failed
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_uninstall as U
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import PATHS

ARGUMENT_SPEC = dict(
    prefix=dict(type="path", default="/opt/gdrcopy"),
    build_root=dict(type="path", default=PATHS["state_dir"] + "/build"),
    key_dir=dict(type="path", default=PATHS["state_dir"] + "/mok"),
    keep_key=dict(type="bool", default=True),
    group=dict(type="str", default=""),
    packages=dict(type="bool", default=True),
    mok_delete=dict(type="bool", default=False),
    mok_password=dict(type="str", default="", no_log=True),
    image=dict(type="bool", default=False),
)
APT_ENV = {"LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}


def command(module, argv, what, ok=(0,)):
    rc, out, err = module.run_command(argv, environ_update=APT_ENV)
    if rc not in ok:
        raise U.UninstallError("%s failed (exit %d): %s" % (what or " ".join(argv), rc, (err or out).strip()[-400:]))
    return rc, out


def live(image):
    from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_facts import in_chroot
    return not image and not in_chroot()


def unload(module, result, check, sysfs="/sys/module/gdrdrv", device=U.DEVICE):
    """rmmod gdrdrv when it is loaded and nothing holds it, then the node; else (held, or taken between the read and
    rmmod) pending."""
    if not os.path.isdir(sysfs):
        return
    try:
        with open(sysfs + "/refcnt") as handle:
            refcount = int(handle.read().strip() or "0")
    except (IOError, OSError, ValueError):
        refcount = -1
    if refcount == 0 and not check:
        rc, out, err = module.run_command(
            [module.get_bin_path("rmmod", required=True, opt_dirs=["/sbin", "/usr/sbin"]), "gdrdrv"])
        if rc != 0:  # a program opened /dev/gdrdrv since the read: the same as held
            refcount = -1
    if refcount != 0:
        result["pending"] = True
        result["msg"] = ("gdrdrv stays loaded until the next boot: %s holds it; its files are gone, so nothing loads "
                         "it again. Stop the programs that use GPUDirect copies and run `rmmod gdrdrv`, or reboot."
                         % ("%d open handle(s) on /dev/gdrdrv" % refcount if refcount > 0 else "something"))
        return
    result["unloaded"] = True
    if os.path.lexists(device):
        if not check:
            os.unlink(device)
        result["removed"].append(device)


def remove_group(module, name, check):
    if not name:
        return "kept"
    try:
        grp.getgrnam(name)
    except KeyError:
        return "absent"
    if check:
        return "removed"
    rc, out, err = module.run_command([module.get_bin_path("groupdel", required=True, opt_dirs=["/usr/sbin", "/sbin"]),
                                       name])
    return "removed" if rc == 0 else "kept: groupdel %s failed: %s" % (name, (err or out).strip()[-200:])


def remove_packages(module, names, check):
    """The recorded packages purged with apt (see module_utils/gdrcopy_uninstall.py), and what that left unneeded."""
    out = {"removed": [], "kept": [], "manager": "apt"}
    apt, dpkg_query = module.get_bin_path("apt-get"), module.get_bin_path("dpkg-query")
    if not names:
        return out
    if not apt or not dpkg_query:
        out["manager"] = "left in place: removing packages is done with apt only"
        out["kept"] = names
        return out
    rc, text = command(module, [dpkg_query, "-W", "-f", "${Package}\t${db:Status-Abbrev}\n"] + names, "", ok=(0, 1))
    installed = sorted(line.split("\t")[0] for line in text.splitlines() if line.split("\t")[-1].startswith("ii"))
    if not installed:
        return out

    def simulate(pkgs):  # None when apt refuses (an essential package, a dependency it cannot break)
        rc, text, dummy = module.run_command([apt, "-s", "purge"] + pkgs, environ_update=APT_ENV)
        return U.apt_removals(text) if rc == 0 else None

    def orphans():
        return U.apt_removals(command(module, [apt, "-s", "autoremove", "--purge"], "apt-get -s autoremove")[1])

    names_, out["kept"] = U.removable(installed, simulate)
    if not names_:
        return out
    before = orphans()
    if check:
        out["removed"] = simulate(names_)
        return out
    command(module, [apt, "-y", "-q", "purge"] + names_, "apt-get purge")
    left = [n for n in orphans() if n not in before]
    if left:
        command(module, [apt, "-y", "-q", "purge"] + left, "apt-get purge (what the removal left unneeded)")
    out["removed"] = sorted(set(names_) | set(left))
    return out


def delete_mok(module, params, check):
    """mok_delete: the deletion of the signing certificate from the MOK list requested (or found requested), as
    {cert, action, msg}; UninstallError, before anything changes, when a request needs a password that is not given."""
    from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts as F
    h = F.Host(module, "/", image=params["image"])
    link = PATHS["mok_signer"]
    # the certificate that signs (the signer link), else the generated or controller one kept in key_dir (an earlier
    # uninstall removed the link and kept the key)
    efi = os.path.isdir("/sys/firmware/efi")
    if os.path.islink(link) and os.path.exists(link):
        cert = os.path.realpath(link)
        state = F.cert_mok_state(h, cert, efi)
    else:  # of those kept (a rotation keeps the one it replaced), the one the firmware still trusts
        kept = [(c, F.cert_mok_state(h, c, efi)) for c in MOK.candidate_certs([], params["key_dir"])
                if os.path.isfile(c)]
        cert, state = MOK.kept_cert(kept)
        state = state or F.cert_mok_state(h, cert, efi)
    pending = []
    mokutil = h.live_tool("mokutil")
    if state["state"] != "unknown" and mokutil:
        pending = U.list_serials(h.run([mokutil, "--list-delete"])[1])
    action = U.mok_deletion(state["state"], state["serial"], pending)
    out = {"cert": cert, "action": action, "msg": U.mok_message(action, cert)}
    if action != "request":
        return out
    if not params["mok_password"]:
        raise U.UninstallError("gdrcopy_uninstall_mok asks for the deletion of %s from the MOK list, which needs the "
                               "password MokManager asks for: set mok_signing_enrollment_password (vault it), or "
                               "leave gdrcopy_uninstall_mok false. Nothing was changed." % cert)
    if check:
        return out
    try:
        MOK.mok_request(h, module.run_command, module.get_bin_path("openssl", required=True), mokutil, "--delete",
                        cert, params["mok_password"], "/run" if os.path.isdir("/run") else None)
    except Failed as err:
        raise U.UninstallError(str(err))
    return out


def uninstall(module, params):
    check, is_live = module.check_mode, live(params["image"])
    result = {"changed": False, "removed": [], "foreign": [], "kept": [], "unloaded": False, "pending": False,
              "depmod": [], "ran": [], "group": "kept", "packages": {"removed": [], "kept": [], "manager": "apt"},
              "msg": ""}
    # first, before anything changes (a request without its password stops here), and while the certificate and the
    # signer link are still there
    mok = delete_mok(module, params, check) if params["mok_delete"] and is_live else None
    result["mok"] = mok or {"cert": "", "action": "kept", "msg": ""}
    recorded = U.read_record("/") if params["packages"] else []
    # mokutil stays (and stays recorded) while the MOK deletion waits: the next uninstall reads its state with it,
    # and purges it once the deletion is done
    waits = result["mok"]["action"] in ("request", "pending")
    keep_for_mok = [n for n in recorded if waits and n == "mokutil"]
    found = U.plan("/", params["prefix"], params["build_root"], params["key_dir"], params["keep_key"],
                   keep_paths=(PATHS["packages_record"],) if keep_for_mok else ())
    result["foreign"] = found["foreign"]
    if params["keep_key"] and os.path.isdir(params["key_dir"]):
        result["kept"].append(params["key_dir"].rstrip("/"))
    try:
        if is_live and found["unit"] and os.path.isdir("/run/systemd/system"):
            if not check:  # a oneshot unit without ExecStop: this only marks it inactive
                command(module, [module.get_bin_path("systemctl", required=True), "stop",
                                 os.path.basename(PATHS["unit"])], "", ok=(0, 5))
            result["ran"].append("stop")
        if is_live:
            unload(module, result, check)
            # Debian's /run/reboot-required names the project while the held gdrdrv or a MOK deletion waits for a
            # reboot, else not
            if FO.reboot_flag(module, result["pending"] or result["mok"]["action"] in ("request", "pending"), check):
                result["ran"].append("reboot-flag")
        # the packages first: their record is in the state directory, which goes next (a failed purge, say with
        # dpkg's lock held, leaves the record for the next run)
        result["packages"] = remove_packages(module, [n for n in recorded if n not in keep_for_mok], check)
        if keep_for_mok:
            result["packages"]["kept"] += keep_for_mok
            if FO.write_packages(module, keep_for_mok, check):
                result["ran"].append("packages-record")
        result["removed"] += (found["files"] + found["dirs"]) if check else U.remove("/", found)
        if found["kernels"]:
            depmod = module.get_bin_path("depmod", required=True, opt_dirs=["/sbin", "/usr/sbin"])
            for release in found["kernels"]:
                if not check:
                    command(module, [depmod, release], "depmod %s" % release)
                result["depmod"].append(release)
        if found["ldconfig"]:
            if not check:
                command(module, [module.get_bin_path("ldconfig", required=True, opt_dirs=["/sbin", "/usr/sbin"])], "")
            result["ran"].append("ldconfig")
        if found["unit"] and is_live and os.path.isdir("/run/systemd/system"):
            if not check:
                command(module, [module.get_bin_path("systemctl", required=True), "daemon-reload"], "")
            result["ran"].append("daemon-reload")
        result["group"] = remove_group(module, params["group"], check)
    except (U.UninstallError, IOError, OSError) as err:
        result["changed"] = True
        raise U.UninstallError(str(err), result)
    result["changed"] = bool(result["removed"] or result["unloaded"] or result["group"] == "removed"
                             or result["packages"]["removed"] or "reboot-flag" in result["ran"]
                             or result["mok"]["action"] == "request" or "packages-record" in result["ran"])
    kept = result["foreign"] + [n for n in result["packages"]["kept"] if n not in keep_for_mok]
    if kept and not result["msg"]:
        result["msg"] = "kept: %s (%s)" % (", ".join(kept), "not written by gdrcopy-ansible, or needed by another "
                                           "installed package")
    if keep_for_mok:
        result["msg"] = (result["msg"] + ". " if result["msg"] else "") + (
            "mokutil stays installed until the MOK deletion is confirmed; the next uninstall purges it")
    if result["mok"]["msg"]:
        result["msg"] = (result["msg"] + ". " if result["msg"] else "") + result["mok"]["msg"][0].upper() + \
            result["mok"]["msg"][1:] + "."
    return result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = uninstall(module, module.params)
    except U.UninstallError as err:
        module.fail_json(msg=str(err), **err.result)
    if module._diff and result["removed"]:
        result["diff"] = {"before_header": "gdrcopy-ansible", "after_header": "gdrcopy-ansible",
                          "before": "".join(p + "\n" for p in result["removed"]), "after": ""}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
