# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Files on the host, written the one way the collection's modules write them: compared first, then through a
temporary file in the same directory and a rename (AnsibleModule.atomic_move), so that a reader or a killed run
never sees half a file. Used by gdrcopy_files and gdrcopy_build (a role's files: converge_files), gdrcopy_mok and
gdrcopy_build (their helpers: ensure_helpers)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import grp
import json
import os
import re
import stat
import tempfile

from ansible.module_utils.common.text.converters import to_bytes, to_text

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import GROUP_NAME_RE, PATHS, point_link

MODE_RE = re.compile(r"^0?[0-7]{3}\Z")  # an octal mode as the roles write it ("0644")
# The helpers option (documented in plugins/doc_fragments/helpers.py): the programs a role runs, written by the
# module that runs first with them (ensure_helpers).
HELPERS_SPEC = dict(type="list", elements="dict", default=[], no_log=False, options=dict(
    dest=dict(type="path", required=True), content=dict(type="str", required=True, no_log=False),
    mode=dict(type="str", default="0755")))


def current(dest):
    """(bytes, mode, uid) of a regular file at dest; None when there is none; (None, None, None) for a link;
    'other' for a directory or the like."""
    try:
        st = os.lstat(dest)
    except OSError:
        return None
    if os.path.islink(dest):
        return (None, None, None)
    if not os.path.isfile(dest):
        return "other"
    with open(dest, "rb") as f:
        return (f.read(), st.st_mode & 0o7777, st.st_uid)


def same(dest, data, mode):
    """The file at dest holds data, with mode, owned by us."""
    have = current(dest)
    return isinstance(have, tuple) and have == (data, mode, os.geteuid())


def put(module, dest, data, mode):
    """Write data to dest through a temporary file in the same directory and a rename, with mode, owned by us.
    Missing parent directories are made (0755)."""
    parent = os.path.dirname(dest)
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=".%s." % os.path.basename(dest))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        module.atomic_move(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    os.chmod(dest, mode)  # atomic_move keeps the mode of a file it replaces
    if os.stat(dest).st_uid != os.geteuid():
        os.chown(dest, os.geteuid(), os.getegid())


def ensure(module, dest, data, mode, check_mode=False):
    """put() unless the file is already so: True when it changed (in check mode, would change)."""
    if same(dest, data, mode):
        return False
    if not check_mode:
        put(module, dest, data, mode)
    return True


def ensure_helpers(module, helpers, check_mode=False, option="helpers"):
    """Each of helpers ({dest, content, mode}: the programs a role runs) through ensure(), once every one was
    checked (an absolute path without '..', an octal mode): the destinations that changed. ValueError naming the
    option and the entry, before anything is written."""
    for helper in helpers or []:
        dest, mode = helper["dest"], helper.get("mode") or "0755"
        if not (dest.startswith("/") and ".." not in dest.split("/") and MODE_RE.match(mode)):
            raise ValueError("%s: %s wants an absolute path and an octal mode such as 0755" % (option, dest))
    return [h["dest"] for h in helpers or []
            if ensure(module, h["dest"], h["content"].encode("utf-8"), int(h.get("mode") or "0755", 8), check_mode)]


# --- the packages the roles installed (gdrcopy_build and gdrcopy_mok record them; gdrcopy_uninstall reads them) ---
PACKAGE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9+._-]{0,127}\Z")  # Debian's and RPM's package names, lower case
PACKAGES_SPEC = dict(type="list", elements="str", default=[])


def read_packages(path=PATHS["packages_record"]):
    """The package names the record holds, sorted ([] when it is missing or unreadable; bad names are dropped)."""
    try:
        with open(path) as handle:
            names = json.load(handle).get("installed", [])
    except (IOError, OSError, ValueError, AttributeError):
        return []
    return sorted(set(n for n in names if isinstance(n, str) and PACKAGE_NAME_RE.match(n)))


def record_packages(module, names, check_mode=False, path=PATHS["packages_record"]):
    """Add names (packages a role's package task installed in this run because the host lacked them) to the record:
    True when it changed. ValueError for a name that is no package name, before anything is written."""
    bad = [n for n in names or [] if not PACKAGE_NAME_RE.match(n)]
    if bad:
        raise ValueError("packages: %r is no package name" % bad[0])
    old = read_packages(path)
    if not names or set(names) <= set(old):
        return False
    data = json.dumps({"installed": sorted(set(old) | set(names))}, indent=1, sort_keys=True) + "\n"
    return ensure(module, path, data.encode("utf-8"), 0o644, check_mode)


def write_packages(module, names, check_mode=False, path=PATHS["packages_record"]):
    """The record holds exactly names (the uninstall keeps one it still needs): True when it changed."""
    data = json.dumps({"installed": sorted(set(names))}, indent=1, sort_keys=True) + "\n"
    return ensure(module, path, data.encode("utf-8"), 0o644, check_mode)


# --- Debian's reboot flag (gdrcopy_verify after a run, gdrcopy_uninstall) ---------------------------------------
REBOOT_FLAG = "/run/reboot-required"  # Debian's convention: unattended-upgrades, needrestart and motd read it
REBOOT_PKGS = REBOOT_FLAG + ".pkgs"   # one line per package (here: the project) that asks for the reboot
REBOOT_TEXT = b"*** System restart required ***\n"
REBOOT_NAME = "gdrcopy-ansible"


def reboot_flag(module, required, check_mode=False, root="/"):
    """Say on a Debian system whether this project needs a reboot: required adds REBOOT_NAME to REBOOT_PKGS and
    makes REBOOT_FLAG; not required takes the name out again, and removes both files when no other package is
    named there (a flag another package set stays). Nothing elsewhere (no /run, not Debian): False. True when it
    changed (in check mode, would change)."""
    run, flag, pkgs = (os.path.join(root, p.lstrip("/")) for p in ("/run", REBOOT_FLAG, REBOOT_PKGS))
    if not os.path.isdir(run) or not os.path.exists(os.path.join(root, "etc/debian_version")):
        return False
    try:
        with open(pkgs) as handle:
            names = [line.strip() for line in handle if line.strip()]
    except (IOError, OSError):
        names = []
    if required:
        changed = REBOOT_NAME not in names or not os.path.exists(flag)
        if changed and not check_mode:
            if REBOOT_NAME not in names:
                put(module, pkgs, "".join(n + "\n" for n in names + [REBOOT_NAME]).encode(), 0o644)
            if not os.path.exists(flag):
                put(module, flag, REBOOT_TEXT, 0o644)
        return changed
    if REBOOT_NAME not in names:
        return False
    if not check_mode:
        others = [n for n in names if n != REBOOT_NAME]
        if others:
            put(module, pkgs, "".join(n + "\n" for n in others).encode(), 0o644)
        else:
            os.unlink(pkgs)
            if os.path.exists(flag) and current(flag)[0] == REBOOT_TEXT:
                os.unlink(flag)
    return True


# --- a role's files (gdrcopy_files, and gdrcopy_build after its install; documented in doc_fragments/files.py) ------

# The first line of every file the roles render from a template (and of the DKMS drop-in gdrcopy_mok writes): what
# tells this project's files from others' at a name both use.
MARKER = b"Ansible managed (gdrcopy-ansible"

FILE_OPTIONS = dict(
    dest=dict(type="str", required=True),
    content=dict(type="str"),
    mode=dict(type="str", default="0644"),
    state=dict(type="str", choices=["present", "absent", "directory", "link", "retired"], default="present"),
    src=dict(type="str"),
    after=dict(type="str", choices=["none", "ldconfig", "daemon-reload"], default="none"),
)
FILES_SPEC = dict(type="list", elements="dict", default=[], options=FILE_OPTIONS)
GROUPS_SPEC = dict(type="list", elements="str", default=[])
GROUP_RE = re.compile(GROUP_NAME_RE)  # the rule the roles' inputs are checked with


class FilesError(Exception):
    """A file or group that cannot be put in place: the sentence, and the result so far."""

    def __init__(self, msg, result=None):
        super(FilesError, self).__init__(msg)
        self.result = result or {}


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
    elif entry["state"] == "retired":
        if entry["content"] is not None or not (entry["src"] is None or entry["src"].startswith("/")):
            return "files: %s is retired: no content, and src only as the absolute target of our link" % dest
    elif entry["src"] is not None:
        return "files: %s is no link and has no src" % dest
    if entry["state"] not in ("absent", "retired"):
        if not MODE_RE.match(entry["mode"] or ""):
            return "files: %s has mode %r, not an octal mode such as 0644" % (dest, entry["mode"])
    return None


def check_files(entries, groups):
    """FilesError with the first sentence that refuses an entry of files or groups (before anything is written)."""
    for entry in entries or []:
        error = check_entry(entry)
        if error:
            raise FilesError(error)
    bad = [g for g in groups or [] if not GROUP_RE.match(g)]
    if bad:
        raise FilesError("groups: %s is no group name (a letter or _, then letters, digits, _ . or -, at most 32)"
                         % bad[0])


def retired(dest, src):
    """What became of a name this project used to write, as current() has it for action_for: None when it is not
    ours (a file without MARKER, a link that does not point at src) or absent, else (None, None, None)."""
    if os.path.islink(dest):
        return (None, None, None) if src and os.readlink(dest) == src else None
    try:
        with open(dest, "rb") as handle:
            head = handle.read(200)
    except (IOError, OSError):
        return None
    return (None, None, None) if MARKER in head else None


def action_for(entry, have, uid):
    """What has to happen to one file: created, updated, mode, removed or ok (pure)."""
    if entry["state"] in ("absent", "retired"):
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
                raise FilesError("%s failed (exit %d): %s" % (" ".join(argv), rc, (stderr or stdout).strip()),
                                 {"groups": out})
        out.append({"name": name, "action": "created"})
    return out


def after_commands(module, needed):
    """Run ldconfig and systemd's daemon-reload once each when a changed file asked for them (daemon-reload only
    where systemd runs: not in a chroot)."""
    ran = []
    for what in ("ldconfig", "daemon-reload"):
        if what not in needed:
            continue
        if what == "daemon-reload":
            if not os.path.isdir("/run/systemd/system") or chrooted():
                continue  # no running systemd here (an image root): it reads the unit when it boots
            argv = [module.get_bin_path("systemctl", required=True), "daemon-reload"]
        else:
            argv = [module.get_bin_path("ldconfig", required=True, opt_dirs=["/sbin", "/usr/sbin"])]
        rc, out, err = module.run_command(argv)
        if rc != 0:
            raise FilesError("%s failed (exit %d): %s" % (" ".join(argv), rc, (err or out).strip()), {"ran": ran})
        ran.append(what)
    return ran


def chrooted():
    """Whether this runs in a chroot (an image root: no systemd to reload there). gdrcopy_facts is imported here, not
    at the top: the modules that write files need only this of it, and each module start compiles what it imports."""
    from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_facts import in_chroot
    return in_chroot()


def converge_files(module, entries, groups, check=False, diff=False):
    """The groups made, then each file of entries as wanted, then the commands the changed ones ask for: the result
    {changed, files: [{dest, action}], changed_files, groups, ran, diff: [...]}. FilesError (with the result so far)
    for a bad entry (before anything is written) or a step that fails."""
    check_files(entries, groups)
    uid = os.geteuid()
    result = {"changed": False, "files": [], "changed_files": [], "ran": [], "diff": [], "groups": []}
    try:
        result["groups"] = make_groups(module, groups or [], check)
    except FilesError as e:
        result.update(e.result)
        raise FilesError(str(e), result)
    result["changed"] = any(g["action"] == "created" for g in result["groups"])
    needed = set()
    for entry in entries or []:
        dest = entry["dest"]
        have = (retired(dest, entry["src"]) if entry["state"] == "retired" else
                {"directory": current_directory, "link": current_link}.get(entry["state"], current)(dest))
        if have == "other":
            raise FilesError("%s is there and is no %s: move it away, then run again" % (
                dest, {"directory": "directory", "link": "symbolic link"}.get(entry["state"], "regular file")),
                result)
        action = action_for(entry, have, uid)
        result["files"].append({"dest": dest, "action": action})
        if action == "ok":
            continue
        result["changed"] = True
        result["changed_files"].append(dest)
        needed.add(entry["after"])
        if diff and entry["state"] == "link":
            result["diff"].append({"before_header": dest, "after_header": dest,
                                   "before": "-> %s\n" % have[1] if have else "", "after": "-> %s\n" % entry["src"]})
        elif diff and action in ("created", "updated", "removed") and entry["state"] != "directory":
            before = text_of(have[0]) if have and have[0] is not None else (
                "(written by gdrcopy-ansible before 0.3.0)\n" if entry["state"] == "retired" else "")
            result["diff"].append({"before_header": dest, "after_header": dest, "before": before,
                                   "after": "" if entry["state"] == "absent" else entry["content"]})
        if check:
            continue
        write_entry(module, entry, action, uid)
    if result["changed"] and not check:
        try:
            result["ran"] = after_commands(module, needed)
        except FilesError as e:
            result.update(e.result)
            raise FilesError(str(e), result)
    return result


def write_entry(module, entry, action, uid):
    """Put one file entry in place for action (created, updated, mode or removed)."""
    dest = entry["dest"]
    if entry["state"] == "directory":
        if action == "created":
            os.makedirs(dest, int(entry["mode"], 8))
        os.chmod(dest, int(entry["mode"], 8))
        if os.stat(dest).st_uid != uid:
            os.chown(dest, uid, os.getegid())
    elif entry["state"] == "link":
        point_link(dest, entry["src"])
    elif action == "removed":
        if os.path.lexists(dest):
            os.unlink(dest)
    elif action == "mode":
        os.chmod(dest, int(entry["mode"], 8))
        os.chown(dest, uid, os.getegid())
    else:
        put(module, dest, to_bytes(entry["content"]), int(entry["mode"], 8))
