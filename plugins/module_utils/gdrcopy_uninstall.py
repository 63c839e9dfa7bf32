# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""What an uninstall removes, and the removal itself, under a root (/ on a host; a temporary tree in the tests).

    plan (reads only) -> unload gdrdrv when nothing holds it -> the packages the roles installed (their record is
    in the state directory) -> remove the files and directories -> prune the parents they emptied -> depmod /
    ldconfig / daemon-reload -> the group

The places come from the one table (gdrcopy_pipeline.PATHS, gdrcopy_converged.MANAGED_PATHS) and from the roles'
inputs (the install prefix, the build root, the key directory), so whatever a run of site.yml may write is found
here too; tests/unit/test_uninstall.py converges the roles' file list into a root and checks that the plan removes
every one of them. A file at one of the project's names that the project did not write (no "Ansible managed
(gdrcopy-ansible" header: upstream's own /etc/modprobe.d/gdrdrv.conf, say) is left in place and reported.

The packages: the roles record on the host the packages they installed because the host lacked them
(PATHS["packages_record"]); an uninstall removes those that are still installed, unless another installed package
needs one (apt's own simulation says), and then exactly the packages that this removal left unneeded (the
autoremove candidates that were not candidates before), so nothing the host had before the first run is touched.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re
import shutil

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import (
    MODULE_FILE, MODULE_SUBDIR, MODULES_ROOT, PATHS, RETIRED_FILES, RETIRED_LINKS)
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_converged import MANAGED_PATHS
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_fileops as FO
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P

MARKER = FO.MARKER
UNIT = PATHS["unit"]
LOADER_CONF = PATHS["loader_conf"]
DEVICE = "/dev/gdrdrv"
# Directories an emptied parent is never pruned at (nor above): the system's own, which the roles never make.
STOP_DIRS = frozenset((
    "/", "/etc", "/etc/modprobe.d", "/etc/ld.so.conf.d", "/etc/systemd", "/etc/systemd/system", "/etc/kernel",
    "/etc/dkms", "/etc/dkms/framework.conf.d", "/usr", "/usr/local", "/var", "/var/lib", "/lib", MODULES_ROOT, "/opt", "/run", "/dev", "/boot",
    "/home", "/root", "/tmp", "/srv", "/usr/lib", "/usr/share"))


class UninstallError(Exception):
    """A step that failed: the sentence, and the result so far."""

    def __init__(self, msg, result=None):
        super(UninstallError, self).__init__(msg)
        self.result = result or {}


def _under(root, path):
    return path if root == "/" else os.path.join(root, path.lstrip("/"))


def _seen(root, full):
    """A path found under root, as the host sees it."""
    return full if root == "/" else "/" + os.path.relpath(full, root)


def ours(root, path):
    """Whether a regular file at path was written by this project (its first 200 bytes carry MARKER)."""
    try:
        with open(_under(root, path), "rb") as handle:
            return MARKER in handle.read(200)
    except (IOError, OSError):
        return False


def _glob(root, pattern):
    return sorted(_seen(root, p) for p in glob.glob(_under(root, pattern)) if os.path.lexists(p))


def module_trees(root):
    """{kernel release: [gdrdrv files]} of every <MODULES_ROOT>/<k>/<MODULE_SUBDIR>, installed kernel or leftover."""
    trees = {}
    for sub in _glob(root, "%s/*/%s" % (MODULES_ROOT, MODULE_SUBDIR)):
        release = sub[len(MODULES_ROOT) + 1:].split("/", 1)[0]
        trees[release] = _glob(root, "%s/%s*" % (sub, os.path.splitext(MODULE_FILE)[0]))
    return trees


def plan(root, prefix, build_root, key_dir, keep_key, keep_paths=()):
    """What an uninstall removes on the tree at root, read only: {files, dirs, foreign, kernels, ldconfig, unit}.

    files: files and links, removed one by one; dirs: directories of the project, removed whole; foreign: files at
    the project's names that it did not write (kept); kernels: installed kernels whose gdrdrv goes (depmod);
    ldconfig / unit: whether the loader path or the boot unit goes."""
    prefix, build_root, key_dir = (p.rstrip("/") for p in (prefix, build_root, key_dir))
    files, dirs, foreign = set(), set(), set()
    keep = ({key_dir} if keep_key else set()) | set(keep_paths)
    for pattern in MANAGED_PATHS:
        for path in _glob(root, pattern):
            if any(path == k or path.startswith(k + "/") for k in keep):
                continue
            if os.path.isdir(_under(root, path)) and not os.path.islink(_under(root, path)):
                dirs.add(path)
            elif path in RETIRED_LINKS and not (os.path.islink(_under(root, path))
                                                and os.readlink(_under(root, path)) == RETIRED_LINKS[path]):
                foreign.add(path)  # another unit's (upstream's gdrcopy.service) wants link
            elif path in RETIRED_FILES and not ours(root, path):
                foreign.add(path)
            else:
                files.add(path)
    kernels = []
    for release, modules in sorted(module_trees(root).items()):
        dirs.add("%s/%s/%s" % (MODULES_ROOT, release, MODULE_SUBDIR))
        if modules and os.path.isdir(_under(root, "%s/%s/kernel" % (MODULES_ROOT, release))):
            kernels.append(release)
    # The project's own directories, whole: the helpers, the records, the build dirs, the key (unless kept).
    for d in (PATHS["libexec"], PATHS["config_dir"], build_root) + (() if keep_key else (key_dir,)):
        if os.path.isdir(_under(root, d)):
            dirs.add(d)
    state = PATHS["state_dir"]
    if os.path.isdir(_under(root, state)):
        if any(k == state or k.startswith(state + "/") for k in keep):
            for child in sorted(os.listdir(_under(root, state))):
                path = state + "/" + child
                if not any(k == path or k.startswith(path + "/") for k in keep):
                    (dirs if os.path.isdir(_under(root, path)) and not os.path.islink(_under(root, path))
                     else files).add(path)
        else:
            dirs.add(state)
    # The library: each release that gdrcopy-install put under the prefix (its stamp), its staging leftovers, and
    # the stable link.
    for stamp in _glob(root, prefix + "/*/.gdrcopy-install.json"):
        dirs.add(os.path.dirname(stamp))
    for left in _glob(root, prefix + "/.*.new") + _glob(root, prefix + "/.*.old"):
        dirs.add(left)
    current = prefix + "/current"
    if os.path.islink(_under(root, current)):
        files.add(current)
    # Nothing inside a directory that goes anyway is listed on its own.
    dirs = set(d for d in dirs if not any(d.startswith(o + "/") for o in dirs))
    files = set(f for f in files if not any(f.startswith(d + "/") for d in dirs))
    return {"files": sorted(files), "dirs": sorted(dirs), "foreign": sorted(foreign), "kernels": kernels,
            "ldconfig": LOADER_CONF in files, "unit": UNIT in files or PATHS["retired_unit"] in files}


def remove(root, result_plan):
    """Remove what plan() listed, then the parents that it emptied (below STOP_DIRS): the paths removed."""
    removed = []
    for path in result_plan["files"]:
        full = _under(root, path)
        if os.path.lexists(full):
            os.unlink(full)
            removed.append(path)
    for path in result_plan["dirs"]:
        full = _under(root, path)
        if os.path.islink(full):
            os.unlink(full)
        elif os.path.isdir(full):
            shutil.rmtree(full)
        else:
            continue
        removed.append(path)
    return removed + prune_parents(root, removed)


def prune_parents(root, removed):
    """Each parent of a removed path that is now empty, upwards, stopping at STOP_DIRS, an installed kernel's own
    module tree (<MODULES_ROOT>/<k>) and anything not empty: the directories removed."""
    pruned = []
    for parent in sorted(set(os.path.dirname(p) for p in removed), key=lambda p: -p.count("/")):
        while parent not in STOP_DIRS and parent not in pruned:
            full = _under(root, parent)
            kernel_tree = os.path.dirname(parent) == MODULES_ROOT
            if kernel_tree and os.path.isdir(os.path.join(full, "kernel")):
                break
            try:
                os.rmdir(full)
            except OSError:
                break
            pruned.append(parent)
            parent = os.path.dirname(parent)
    return pruned


# --- packages ------------------------------------------------------------------------------------------------

def read_record(root):
    """The packages the roles installed (PATHS["packages_record"] under root)."""
    return FO.read_packages(_under(root, PATHS["packages_record"]))


def apt_removals(text):
    """The packages an `apt-get -s` run would remove or purge ("Remv name [...]" / "Purg name [...]")."""
    return sorted(set(m.group(1).split(":")[0] for m in re.finditer(r"^(?:Remv|Purg) (\S+)", text, re.M)))


def removable(wanted, simulate):
    """The part of wanted that apt removes without taking any other package along, and the rest (kept).

    simulate(names) -> what `apt-get -s purge names` would remove, or None when apt refuses (an essential package,
    a dependency it cannot break). Each name is simulated on its own, since apt names the dependents it would take
    but not which of ours they need; then the part that passed, together, kept whole when it would still take
    another package."""
    wanted = sorted(set(wanted))

    def alone(names):
        gone = simulate(names)
        return gone is not None and set(gone) <= set(wanted)

    names = [n for n in wanted if alone([n])]
    if len(names) > 1 and not alone(names):
        names = []
    return names, [n for n in wanted if n not in names]


# --- the MOK ---------------------------------------------------------------------------------------------------

def list_serials(text):
    """The serial numbers `mokutil --list-delete` (or --list-new) prints, normalised as gdrcopy_parsers does: one per
    key, "Serial Number:" followed by the number on the same line or the next."""
    serials, want = [], False
    for line in (text or "").splitlines():
        m = re.match(r"^\s*Serial Number:\s*(\S.*)?$", line)
        if m:
            if m.group(1):
                serials.append(P.normalize_serial(m.group(1).split()[0]))
            else:
                want = True
            continue
        if want and line.strip():
            serials.append(P.normalize_serial(line.strip().split()[0]))
            want = False
    return serials


def mok_deletion(state, serial, pending_serials):
    """What an uninstall does about the certificate that signs this project's modules, from its MOK state (the text
    of mokutil --test-key, gdrcopy_parsers.parse_mokutil_test_key) and the deletions already requested: request
    (enrolled, no request yet), pending (requested, waiting for MokManager), absent (not enrolled), or unknown."""
    if serial and serial in pending_serials:
        return "pending"
    if state == "enrolled":
        return "request"
    if state in ("not_enrolled", "in_db", "blocked", "pending"):
        return "absent"
    return "unknown"


def mok_message(action, cert):
    """The sentence the uninstall says about the certificate."""
    return {
        "request": "the deletion of %s from the MOK list is requested: confirm it at the console at the next boot "
                   "(MokManager: Delete MOK, then the enrollment password); modules it signed stop loading once it "
                   "is deleted" % cert,
        "pending": "the deletion of %s from the MOK list waits for the console: confirm it in MokManager (Delete "
                   "MOK) at the next boot" % cert,
        "absent": "%s is not enrolled: nothing to delete from the MOK list" % cert,
        "unknown": "the MOK state of %s is not known (no EFI, no mokutil, or no certificate): nothing was requested"
                   % (cert or "the signing certificate"),
    }[action]
