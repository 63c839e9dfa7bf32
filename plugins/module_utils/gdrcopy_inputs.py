# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""The inputs of the collection's roles, checked and normalised once, before anything changes (pure functions).

Each role's meta/argument_specs.yml says which inputs exist, their defaults, choices and sub-options; KINDS below
says what a value of each may look like, strictly: an anchored pattern for every string that reaches a path, a
shell, a config file, a systemd unit or an argv, a parsed number for modes and integers, and one normalisation of
every boolean (``-e gdrcopy_load=false`` is the string "false": it becomes False here, and nowhere else). The
action plugin gdrcopy_inputs runs check_role() on the controller and the roles read the normalised values from
its result; tests/unit/test_inputs.py feeds it generated hostile values.

A refused value gets one sentence that names the input and says what it may be. A value that passes is safe to
write verbatim into a file or an argv; the roles still quote it where it meets a shell.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_modsign import parse_pkcs11_uri
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_parsers import open_to_others
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import GROUP_NAME_RE


class Invalid(ValueError):
    """One refused value: str(err) is the sentence (without the trailing advice the plugin adds)."""


# ---------------------------------------------------------------------------------------------------------------
# Small helpers

# Characters no input may hold: C0 and C1 controls (newline, NUL, escape...), DEL, and the Unicode line and
# paragraph separators (str.splitlines() splits on them).
_CONTROL = re.compile(u"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def shown(value, secret=False, width=60):
    """A value as a message shows it: JSON (a newline reads \\n, a string keeps its quotes), cut at width."""
    if secret:
        return "(hidden)"
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    text = _CONTROL.sub(lambda m: "\\u%04x" % ord(m.group()), text)  # JSON leaves C1 and U+2028 as they are
    return text if len(text) <= width else text[:width - 3] + "..."


def _is_bool(value):
    return isinstance(value, bool)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_text(value):
    return isinstance(value, str)


def _type_name(value):
    if value is None:
        return "null"
    if _is_bool(value):
        return "a boolean"
    if _is_int(value) or isinstance(value, float):
        return "a number"
    if _is_text(value):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


# Ansible's boolean spellings (ansible.module_utils.parsing.convert_bool), compared lower-case.
_TRUE = ("true", "yes", "on", "1", "y", "t")
_FALSE = ("false", "no", "off", "0", "n", "f")


# ---------------------------------------------------------------------------------------------------------------
# Kinds: kind(name, value, spec) -> normalised value, or raise Invalid. spec is the option's argument spec.


def boolean(name, value, spec):
    if _is_bool(value):
        return value
    if _is_int(value) and value in (0, 1):
        return bool(value)
    if _is_text(value) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise Invalid("%s must be true or false (got %s)" % (name, shown(value)))


def _text(name, value, what, secret=False):
    if not _is_text(value):
        hint = ""
        if _is_int(value) or isinstance(value, float):
            hint = "; quote it in YAML"
        raise Invalid("%s must be %s, a string (got %s%s%s)" % (
            name, what, _type_name(value), "" if secret else " " + shown(value), hint))
    if _CONTROL.search(value):
        raise Invalid("%s must be %s, without newlines or other control characters (got %s)" % (
            name, what, shown(value, secret)))
    return value


def pattern(regex, what, optional=False, max_len=255):
    """A string that matches regex whole (re.fullmatch: a trailing newline does not slip through as with $)."""
    compiled = re.compile(regex)

    def kind(name, value, spec):
        value = _text(name, value, what)
        if optional and value == "":
            return value
        if len(value) > max_len or not compiled.fullmatch(value):
            raise Invalid("%s must be %s (got %s)" % (name, what + (', or ""' if optional else ""), shown(value)))
        return value
    kind.what = what
    return kind


def choice(name, value, spec):
    choices = [str(c) for c in spec.get("choices", ())]
    if "true" in choices:  # gdrcopy_install_tests: a YAML boolean, or -e ...=True, means the choice "true"/"false"
        if _is_bool(value):
            value = "true" if value else "false"
        elif _is_text(value) and value.strip().lower() in ("true", "false"):
            value = value.strip().lower()
    if not _is_text(value) or value not in choices:
        raise Invalid("%s must be one of %s (got %s)" % (name, ", ".join(choices), shown(value)))
    return value


def integer(low, high):
    def kind(name, value, spec):
        number = None
        if _is_int(value):
            number = value
        elif _is_text(value) and re.match(r"^-?[0-9]{1,9}\Z", value.strip()):
            number = int(value.strip())
        if number is None or not low <= number <= high:
            raise Invalid("%s must be a whole number from %d to %d (got %s)" % (name, low, high, shown(value)))
        return number
    return kind


# Paths on a node: absolute, plain characters only (they reach root shells, unit files and DKMS's framework
# config, where a space, a quote, $ or % would mean something), no "." or ".." part, no doubled or trailing slash.
_NODE_PATH = re.compile(r"^(/[A-Za-z0-9._+@-]+)+\Z")
_DOTS = re.compile(r"(^|/)\.\.?(/|\Z)")


def node_path(optional=False, not_under=()):
    what = "an absolute path on the node (letters, digits and . _ + @ -, no . or .. part)"

    def kind(name, value, spec):
        value = _text(name, value, what)
        if optional and value == "":
            return value
        if len(value) > 1024 or not _NODE_PATH.match(value) or _DOTS.search(value):
            raise Invalid("%s must be %s (got %s)" % (name, what + (', or ""' if optional else ""), shown(value)))
        for top in not_under:
            if value == top:
                raise Invalid("%s must not be %s: the role replaces what it installs there (got %s)" % (
                    name, top, shown(value)))
        return value
    kind.what = what
    return kind


def controller_path(optional=False):
    """A path on the controller: Ansible's own modules and lookups use it (never a shell), so a space is fine."""
    what = "an absolute path on the controller, with no .. part"

    def kind(name, value, spec):
        value = _text(name, value, what)
        if optional and value == "":
            return value
        if not value.startswith("/") or "/../" in value + "/" or len(value) > 4096:
            raise Invalid("%s must be %s%s (got %s)" % (name, what, ', or ""' if optional else "", shown(value)))
        return value
    kind.what = what
    return kind


def list_of(element):
    def kind(name, value, spec):
        if not isinstance(value, (list, tuple)):
            raise Invalid("%s must be a list (got %s %s)" % (name, _type_name(value), shown(value)))
        return [element("%s[%d]" % (name, i), item, spec) for i, item in enumerate(value)]
    return kind


# Release versions, as the release table keys them: 2.6, 2.3.1. An unquoted 2.10 in YAML is the number 2.1, so a
# number is refused rather than guessed at.
VERSION = r"^[0-9]{1,4}\.[0-9]{1,4}(\.[0-9]{1,4})?\Z"
SHA256 = r"^[0-9a-fA-F]{64}\Z"
COMMIT = r"^[0-9a-f]{40}\Z"


_version_text = pattern(VERSION, 'a release version such as "2.6" or "2.3.1"')
_sha256_text = pattern(SHA256, "the 64 hex digits that sha256sum prints", optional=True)


def version(name, value, spec):
    if isinstance(value, float) or _is_int(value):
        raise Invalid('%s must be a quoted version string such as "2.6" (got the number %s: unquoted in YAML, 2.10 '
                      'reads as 2.1)' % (name, shown(value)))
    return _version_text(name, value, spec)


def sha256(name, value, spec):
    return _sha256_text(name, value, spec).lower()


# A kernel release as `uname -r` prints it: it names /lib/modules/<release> and goes into KVER=.
kernel_release = pattern(r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._+~-]{0,127}\Z",
                         "a kernel release as `uname -r` prints it (such as 6.1.0-28-amd64)")
# A kernel module name (MODULE_NAME_LEN is 56 with its NUL): it reaches modprobe argv and the unit's ExecStart=.
module_name = pattern(r"^[A-Za-z0-9_-]{1,55}\Z", "a kernel module name (letters, digits, _ and -)")
# A group name as useradd/groupadd accept it (gdrcopy_files makes groups by the same rule).
group_name = pattern(GROUP_NAME_RE,
                     "a group name (a letter or _, then letters, digits, _ . or -, at most 32 characters)", max_len=32)
url = pattern(r"^(https?|ftp|file)://[^\s\"'<>\\`]+\Z", "an https://, http://, ftp:// or file:// URL",
              optional=True, max_len=2048)
git_url = pattern(r"^((https?|ssh|git|file)://[^\s\"'<>\\`]+|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[A-Za-z0-9._~/-]+)\Z",
                  "a git URL (https://, ssh://, git://, file:// or user@host:path)", max_len=2048)
# A git ref (tag, branch or commit) as git check-ref-format accepts it, restricted to plain characters.
git_ref = pattern(r"^(?!.*\.\.)(?!.*//)(?!.*\.lock\Z)(?!.*/\Z)[A-Za-z0-9][A-Za-z0-9._/+-]{0,199}\Z",
                  "a git tag, branch or 40-hex commit (letters, digits and . _ / + -)", optional=True)


def device_mode(name, value, spec):
    """gdrcopy_device_mode: parsed as octal; no bits beyond rwx for owner, group and others."""
    what = 'a quoted octal mode such as "0660"'
    if not _is_text(value):
        raise Invalid("%s must be %s (got %s%s)" % (name, what, shown(value), "; unquoted in YAML, 0660 is read as the "
                                                    "number 432" if _is_int(value) else ""))
    if not re.match(r"^[0-7]{3,4}\Z", value):
        raise Invalid("%s must be %s (got %s)" % (name, what, shown(value)))
    mode = int(value, 8)
    if mode & 0o7000:
        raise Invalid("%s %s sets the set-user-ID, set-group-ID or sticky bit, which mean nothing on a device node "
                      'and are refused: use a mode such as "0660"' % (name, shown(value)))
    return "%04o" % mode


def common_name(name, value, spec):
    """An X.509 common name, 1 to 64 characters (ub-common-name counts characters, not bytes)."""
    value = _text(name, value, "a common name of 1 to 64 characters")
    if not 1 <= len(value) <= 64 or value != value.strip():
        raise Invalid("%s must be a common name of 1 to 64 characters, without leading or trailing spaces (got %d "
                      "characters: %s)" % (name, len(value), shown(value)))
    return value


def password(name, value, spec):
    """The MokManager one-time password: typed at the console, so printable, at most 256 characters (mokutil)."""
    value = _text(name, value, "a password", secret=True)
    if len(value) > 256:
        raise Invalid("%s must be at most 256 characters (mokutil's limit; got %d)" % (name, len(value)))
    return value


def pkcs11_uri(name, value, spec):
    """A PKCS#11 URI (RFC 7512) naming one private key, or "": read as gdrcopy_modsign reads it. It may hold a PIN
    (pin-value), so it is never shown."""
    value = _text(name, value, "a PKCS#11 URI", secret=True)
    if value == "":
        return value
    try:
        parse_pkcs11_uri(value)
    except ValueError as e:
        raise Invalid("%s is not a PKCS#11 URI of one private key: %s. Write it as "
                      "pkcs11:token=<token label>;object=<key label>" % (name, e))
    return value


def pin(name, value, spec):
    """A token's user PIN: never shown, one line, at most 256 characters."""
    value = _text(name, value, "a PIN", secret=True)
    if len(value) > 256:
        raise Invalid("%s must be at most 256 characters (got %d)" % (name, len(value)))
    return value


def controller_signer(name, value, spec):
    """gdrcopy_controller_signer: {} (the host signs, or nothing does), or {cert, node_cert, key or pkcs11_uri,
    pkcs11_module, pkcs11_pin} - what playbooks/mok_signing.yml hands over from the mok_signing role."""
    if not isinstance(value, dict):
        raise Invalid("%s must be a mapping (got %s)" % (name, _type_name(value)))
    if not value:
        return {}
    kinds = {"cert": controller_path(), "key": controller_path(optional=True), "pkcs11_uri": pkcs11_uri,
             "pkcs11_module": controller_path(optional=True), "pkcs11_pin": pin, "node_cert": node_path()}
    unknown = sorted((k for k in value if k not in kinds), key=str)
    if unknown:
        raise Invalid("%s may only set %s (got the key %s)" % (name, ", ".join(sorted(kinds)), shown(unknown[0])))
    out = {}
    for key in sorted(kinds):
        default = "" if key not in ("cert", "node_cert") else None
        if value.get(key, default) is None:
            raise Invalid("%s.%s is required" % (name, key))
        out[key] = kinds[key]("%s.%s" % (name, key), value.get(key, default), spec)
    if bool(out["key"]) == bool(out["pkcs11_uri"]):
        raise Invalid("%s needs one of key (a PEM file on the controller) or pkcs11_uri (a token key), not %s"
                      % (name, "both" if out["key"] else "neither"))
    return out


_arguments = list_of(lambda n, v, s: _text(n, v, "an argument"))


def argv(name, value, spec):
    """An argv list: strings without control characters; the program (first item) an absolute node path."""
    value = _arguments(name, value, spec)
    if value and not _NODE_PATH.match(value[0]):
        raise Invalid("%s[0] must be the absolute path of the program on the node (got %s)" % (name, shown(value[0])))
    return value


def module_params(name, value, spec):
    """gdrcopy_module_params: only the sub-options of the spec, each 0 or 1 (true/false/"1"/"0" read as such)."""
    if not isinstance(value, dict):
        raise Invalid("%s must be a mapping of gdrdrv options (got %s %s)" % (name, _type_name(value), shown(value)))
    known = spec.get("options", {})
    out = {}
    for key in sorted(value, key=str):
        if key not in known:
            raise Invalid("%s may only set %s (got the key %s)" % (name, ", ".join(sorted(known)), shown(key)))
        item = value[key]
        if _is_bool(item):
            item = int(item)
        elif _is_text(item) and item.strip() in ("0", "1"):
            item = int(item.strip())
        if not _is_int(item) or item not in (0, 1):
            raise Invalid("%s.%s must be 0 or 1 (got %s)" % (name, key, shown(item)))
        out[key] = item
    return out


_any_node_path = node_path()


def key_paths(name, value, spec):
    """mok_signing_host_key_paths: a list of {key, cert}, both absolute node paths."""
    if not isinstance(value, (list, tuple)):
        raise Invalid("%s must be a list of {key, cert} (got %s %s)" % (name, _type_name(value), shown(value)))
    out = []
    for i, pair in enumerate(value):
        if not isinstance(pair, dict) or sorted(pair) != ["cert", "key"]:
            raise Invalid("%s[%d] must be a mapping with exactly key and cert (got %s)" % (name, i, shown(pair)))
        out.append(dict((k, _any_node_path("%s[%d].%s" % (name, i, k), pair[k], spec)) for k in ("key", "cert")))
    return out


RELEASE_FIELDS = ("tag", "commit", "sha256", "url", "top_dir", "tests", "gdrdrv_params")
_PARAM_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}\Z")


def param_defaults(name, value, spec):
    """A release row's gdrdrv_params: parameter name -> its built-in default (an integer)."""
    if not isinstance(value, dict):
        raise Invalid("%s must be a mapping of gdrdrv parameter -> its default (got %s %s)" % (
            name, _type_name(value), shown(value)))
    out = {}
    for key in sorted(value, key=str):
        if not _is_text(key) or not _PARAM_NAME_RE.match(key):
            raise Invalid("%s: %s is not a module parameter name (lowercase letters, digits, _)" % (name, shown(key)))
        if not _is_int(value[key]) or not -2 ** 31 <= value[key] < 2 ** 31:
            raise Invalid("%s.%s must be the parameter's default, an int (got %s)" % (name, key, shown(value[key])))
        out[key] = value[key]
    return out


_RELEASE_ROW = {
    "tag": pattern(r"^v[0-9]{1,4}\.[0-9]{1,4}(\.[0-9]{1,4})?\Z", "v<version>"),
    "commit": pattern(COMMIT, "40 lowercase hex digits"),
    "sha256": pattern(r"^[0-9a-f]{64}\Z", "64 lowercase hex digits"),
    "url": pattern(r"^(https?|ftp|file)://[^\s\"'<>\\`]+\Z", "an https, http, ftp or file URL", max_len=2048),
    "top_dir": pattern(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}\Z", "the tarball's top folder (a plain name)"),
    "tests": list_of(pattern(r"^[A-Za-z0-9_]{1,64}\Z", "a test program name")),
    "gdrdrv_params": param_defaults,
}


def releases(name, value, spec):
    """gdrcopy_releases: version -> a mapping of row fields (each checked; merged over the shipped row later)."""
    if not isinstance(value, dict):
        raise Invalid("%s must be a mapping of version -> release row (got %s %s)" % (
            name, _type_name(value), shown(value)))
    out = {}
    for key in sorted(value, key=str):
        where = "%s[%s]" % (name, shown(key))
        if not _is_text(key) or not re.match(VERSION, key):
            raise Invalid('%s: the key must be a quoted version such as "2.7"' % where)
        row = value[key]
        if not isinstance(row, dict):
            raise Invalid("%s must be a mapping of %s (got %s)" % (where, ", ".join(RELEASE_FIELDS), shown(row)))
        extra = sorted(set(row) - set(RELEASE_FIELDS), key=str)
        if extra:
            raise Invalid("%s has the unknown field %s (a row has %s)" % (where, shown(extra[0]),
                                                                          ", ".join(RELEASE_FIELDS)))
        out[key] = dict((field, _RELEASE_ROW[field]("%s.%s" % (where, field), row[field], spec)) for field in row)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Every input of every role: its kind. tests/unit/test_inputs.py checks that this covers each argument spec
# exactly and that the kinds agree with the specs' types.
_SYSTEM = ("/", "/usr", "/etc", "/var", "/lib", "/bin", "/sbin", "/boot", "/opt", "/home", "/root", "/tmp", "/dev",
           "/proc", "/sys", "/run", "/var/lib", "/usr/local", "/usr/lib")

KINDS = {
    "gdrcopy": {
        "gdrcopy_version": version,
        "gdrcopy_source_type": choice,
        "gdrcopy_source_url": url,
        "gdrcopy_source_sha256": sha256,
        "gdrcopy_source_git_url": git_url,
        "gdrcopy_source_git_ref": git_ref,
        "gdrcopy_allow_unpinned": boolean,
        "gdrcopy_cache_dir": controller_path(optional=True),
        "gdrcopy_releases": releases,
        "gdrcopy_artifact_dir": controller_path(optional=True),
        "gdrcopy_fleet_builders": pattern(r"^[A-Za-z_][A-Za-z0-9_-]{0,127}\Z", "an inventory group name", optional=True),
        "gdrcopy_mode": choice,
        "gdrcopy_kernels": list_of(kernel_release),
        "gdrcopy_install_kernel_headers": boolean,
        "gdrcopy_nvidia_src_dir": node_path(optional=True),
        "gdrcopy_nvidia_flavor": choice,
        "gdrcopy_install_nvidia_source": boolean,
        "gdrcopy_build_root": node_path(not_under=_SYSTEM),
        "gdrcopy_prefix": node_path(not_under=_SYSTEM),
        "gdrcopy_keep_releases": integer(0, 100),
        "gdrcopy_upstream_packages": choice,
        "gdrcopy_backend": choice,
        "gdrcopy_install_tests": choice,
        "gdrcopy_cuda_home": node_path(),
        "gdrcopy_module_params": module_params,
        "gdrcopy_device_mode": device_mode,
        "gdrcopy_device_world_access": boolean,
        "gdrcopy_device_group": group_name,
        "gdrcopy_device_group_create": boolean,
        "gdrcopy_load": boolean,
        "gdrcopy_chain_modules": list_of(module_name),
        "gdrcopy_kernel_hook": boolean,
        "gdrcopy_sign_command": argv,
        "gdrcopy_controller_signer": controller_signer,
        "gdrcopy_hold_resigned": boolean,
        "gdrcopy_reboot_ok": boolean,
        "gdrcopy_verify_gpu_id": integer(0, 1023),
        "gdrcopy_verify_timeout": integer(1, 86400),
        "gdrcopy_fast_rerun": boolean,
        "gdrcopy_uninstall_group": boolean,
        "gdrcopy_uninstall_key": boolean,
        "gdrcopy_uninstall_key_dir": node_path(not_under=_SYSTEM),
        "gdrcopy_uninstall_packages": boolean,
        "gdrcopy_uninstall_mok": boolean,
        "gdrcopy_uninstall_mok_password": password,
    },
    "mok_signing": {
        "mok_signing_enabled": boolean,
        "mok_signing_key_source": choice,
        "mok_signing_host_key_paths": key_paths,
        "mok_signing_controller_key": controller_path(optional=True),
        "mok_signing_controller_cert": controller_path(optional=True),
        "mok_signing_key_dir": node_path(not_under=_SYSTEM),
        "mok_signing_key_cn": common_name,
        "mok_signing_key_days": integer(1, 73000),
        "mok_signing_sign_on_controller": boolean,
        "mok_signing_pkcs11_uri": pkcs11_uri,
        "mok_signing_pkcs11_module": controller_path(optional=True),
        "mok_signing_pkcs11_pin": pin,
        "mok_signing_delete_replaced": boolean,
        "mok_signing_enroll": boolean,
        "mok_signing_enrollment_password": password,
        "mok_signing_mokmanager_timeout": integer(-1, 32767),
        "mok_signing_configure_dkms": boolean,
        "mok_signing_secure_logging": boolean,
        "mok_signing_reboot_ok": boolean,
    },
    "nvidia_peermem": {
        "nvidia_peermem_state": choice,
        "nvidia_peermem_legacy_nv_peer_mem": choice,
        "nvidia_peermem_persist": boolean,
    },
}

# The argument spec type each kind stands for (test_inputs.py compares them with the specs).
KIND_TYPES = {boolean: "bool", choice: "str", version: "str", sha256: "str", device_mode: "str", common_name: "str",
              password: "str", argv: "list", module_params: "dict", key_paths: "list", releases: "dict",
              pkcs11_uri: "str", pin: "str", controller_signer: "dict"}


# ---------------------------------------------------------------------------------------------------------------
# The rules that involve several inputs: rules(values, context) -> list of sentences.


def merged_release_table(shipped, added):
    """The shipped release table (files/releases.yml) with gdrcopy_releases' rows merged over it, field by field."""
    table = dict((k, dict(v)) for k, v in shipped.get("releases", {}).items())
    for key, row in added.items():
        table[key] = dict(table.get(key, {}), **row)
    return table


def _gdrcopy_rules(values, context):
    errors = []
    table = context["releases"]
    for key, row in sorted(table.items()):
        missing = [f for f in RELEASE_FIELDS if f not in row]
        if missing:
            errors.append('gdrcopy_releases["%s"] is not a whole release row: it lacks %s (a new version needs %s, '
                          "as in roles/gdrcopy/files/releases.yml)" % (
                              key, ", ".join(missing), ", ".join(RELEASE_FIELDS)))
    version_ = values["gdrcopy_version"]
    release = table.get(version_, {})
    errors += _unknown_gdrdrv_params(values["gdrcopy_module_params"], version_, release, table)
    if values["gdrcopy_sign_command"] and values["gdrcopy_controller_signer"]:
        errors.append("gdrcopy_sign_command (signing on the host) and gdrcopy_controller_signer (signing on the "
                      "controller) are both set: set one of them")
    if values["gdrcopy_source_type"] == "tarball":
        if not release and not (values["gdrcopy_source_url"] and values["gdrcopy_source_sha256"]):
            errors.append('gdrcopy_version "%s" is not in the release table (%s): pick one of those, add the release '
                          "with gdrcopy_releases (see src/README.md), or set both gdrcopy_source_url and "
                          "gdrcopy_source_sha256 for your own tarball" % (version_, ", ".join(sorted(table))))
    else:
        ref = values["gdrcopy_source_git_ref"]
        pinned = (re.match(COMMIT, ref) or (release and ref in ("", release.get("tag"))))
        if not pinned and not values["gdrcopy_allow_unpinned"]:
            errors.append('gdrcopy_source_git_ref "%s" is not pinned for gdrcopy_version "%s": use the release\'s tag '
                          'from the release table (leave gdrcopy_source_git_ref ""), a full 40-hex commit, or set '
                          "gdrcopy_allow_unpinned: true to build a moving ref" % (ref or "v" + version_, version_))
    if open_to_others(int(values["gdrcopy_device_mode"], 8)) and not values["gdrcopy_device_world_access"]:
        errors.append('gdrcopy_device_mode "%s" gives every local user access to /dev/gdrdrv (its ioctls pin and map '
                      'GPU memory): use "0660" and add the users to gdrcopy_device_group ("%s"), or set '
                      "gdrcopy_device_world_access: true to accept it" % (values["gdrcopy_device_mode"],
                                                                          values["gdrcopy_device_group"]))
    return errors


def _unknown_gdrdrv_params(params, version_, release, table):
    """gdrcopy_module_params that the pinned release's gdrdrv does not take (a version outside the table: unknown,
    so not checked)."""
    if "gdrdrv_params" not in release:
        return []
    errors = []
    for key in sorted(set(params) - set(release["gdrdrv_params"])):
        having = sorted((v for v, row in table.items() if key in row.get("gdrdrv_params", {})), key=version_key)
        errors.append('gdrcopy_module_params.%s: gdrdrv %s has no such parameter (it takes %s): leave it out, or pin '
                      "a release that has it (%s)" % (key, version_, ", ".join(sorted(release["gdrdrv_params"])),
                                                      ", ".join(having) or "none in the release table"))
    return errors


def version_key(text):
    """"2.4.1" -> (2, 4, 1), for ordering release versions."""
    return tuple(int(part) for part in re.findall(r"[0-9]+", text))


def gdrdrv_params(values, release):
    """The gdrdrv options a loaded gdrdrv should show: the release's built-in defaults with gdrcopy_module_params
    over them (only what the user set when the release is not in the table)."""
    return dict(release.get("gdrdrv_params", {}), **values["gdrcopy_module_params"])


def _gdrcopy_concerns(values, context):
    if open_to_others(int(values["gdrcopy_device_mode"], 8)):
        return ['gdrcopy_device_mode "%s" with gdrcopy_device_world_access: true lets every local user open /dev/gdrdrv '
                "and pin GPU memory through it" % values["gdrcopy_device_mode"]]
    return []


def _mok_signing_rules(values, context):
    if not values["mok_signing_enabled"]:
        return []
    errors = []
    if bool(values["mok_signing_controller_key"] or values["mok_signing_pkcs11_uri"]) != bool(
            values["mok_signing_controller_cert"]):
        errors.append("mok_signing_controller_key and mok_signing_controller_cert go together: set both (the private "
                      "key and its certificate on the controller) or neither")
    if values["mok_signing_key_source"] == "controller" and not values["mok_signing_controller_key"]:
        errors.append("mok_signing_key_source is controller but mok_signing_controller_key and "
                      "mok_signing_controller_cert are not set: set them, or use key source auto, enrolled or generate")
    on_controller = values["mok_signing_sign_on_controller"]
    if on_controller and not (values["mok_signing_controller_cert"] and (
            bool(values["mok_signing_controller_key"]) != bool(values["mok_signing_pkcs11_uri"]))):
        errors.append("mok_signing_sign_on_controller: true signs with the controller's key: set "
                      "mok_signing_controller_cert and one of mok_signing_controller_key (a PEM file) or "
                      "mok_signing_pkcs11_uri (a key on a PKCS#11 token)")
    if on_controller and values["mok_signing_key_source"] not in ("auto", "controller"):
        errors.append("mok_signing_sign_on_controller: true signs with the controller's key, but "
                      "mok_signing_key_source is %s: set it to controller (or auto)" % values["mok_signing_key_source"])
    if values["mok_signing_pkcs11_uri"] and not on_controller:
        errors.append("mok_signing_pkcs11_uri is a key on a token the controller reaches: set "
                      "mok_signing_sign_on_controller: true to sign with it (or leave the URI empty)")
    return errors


def resolve_source(values, table):
    """The source a host builds, from its normalised inputs and the merged release table.

    tarball: the URL and sha256 (the user's, else the release row's) and the controller cache file, named by the
    checksum, so two pins never share a file. git: the repository, the ref (default: the release tag), the commit it
    must resolve to ("" when the release table does not pin it and the ref is not itself a commit), and a key and a
    clone directory of its own per repository. key names the source: hosts with equal keys share one fetch.
    """
    version_ = values["gdrcopy_version"]
    release = table.get(version_, {})
    if values["gdrcopy_source_type"] == "tarball":
        sha = (values["gdrcopy_source_sha256"] or release.get("sha256", "")).lower()
        url_ = values["gdrcopy_source_url"] or release.get("url", "")
        return {"type": "tarball", "version": version_, "url": url_, "sha256": sha,
                "file": "gdrcopy-%s-%s.tar.gz" % (version_, sha), "key": "tarball-%s-%s" % (version_, sha),
                "release_sha256": release.get("sha256", "")}
    repo = values["gdrcopy_source_git_url"]
    ref = values["gdrcopy_source_git_ref"] or release.get("tag") or "v" + version_
    if release.get("tag") and ref == release["tag"]:
        pin = release.get("commit", "")
    else:
        pin = ref if re.match(COMMIT, ref) else ""
    ident = hashlib.sha256(json.dumps([repo, ref, version_]).encode("utf-8")).hexdigest()[:16]
    return {"type": "git", "version": version_, "repo": repo, "ref": ref, "pin": pin, "key": "git-" + ident,
            "clone": "git/" + hashlib.sha256(repo.encode("utf-8")).hexdigest()[:16]}


RULES = {"gdrcopy": _gdrcopy_rules, "mok_signing": _mok_signing_rules, "nvidia_peermem": lambda values, context: []}
CONCERNS = {"gdrcopy": _gdrcopy_concerns}


# ---------------------------------------------------------------------------------------------------------------


def check_role(role, options, values, shipped_releases=None):
    """Check one role's inputs.

    options: the role's argument spec options (meta/argument_specs.yml); values: name -> value as the play has
    them (a missing name takes the spec's default). Returns (normalised, errors, concerns, context): normalised
    holds every option; errors are sentences (empty when all passed); concerns are sentences about accepted but
    risky values; context holds what the rules derived (the merged release table for gdrcopy).
    """
    kinds = KINDS[role]
    normalised, errors = {}, []
    for name in sorted(options):
        spec = options[name]
        value = values[name] if name in values else spec.get("default")
        try:
            normalised[name] = kinds[name](name, value, spec)
        except Invalid as err:
            errors.append(str(err))
    context = {}
    if role == "gdrcopy" and "gdrcopy_releases" in normalised:
        context["releases"] = merged_release_table(shipped_releases or {}, normalised["gdrcopy_releases"])
    if errors:
        return normalised, errors, [], context
    errors = RULES[role](normalised, context)
    if role == "gdrcopy" and not errors:
        context["source"] = resolve_source(normalised, context["releases"])
        context["gdrdrv_params"] = gdrdrv_params(normalised, context["releases"].get(normalised["gdrcopy_version"], {}))
    concerns = [] if errors else CONCERNS.get(role, lambda v, c: [])(normalised, context)
    return normalised, errors, concerns, context


# Inputs that change no state site.yml leaves (the fast-rerun switch, what playbooks/uninstall.yml removes): out of
# the digest, so that setting one does not make a converged host run every step.
NOT_STATE = ("gdrcopy_fast_rerun", "gdrcopy_uninstall_group", "gdrcopy_uninstall_key", "gdrcopy_uninstall_key_dir",
             "gdrcopy_uninstall_packages", "gdrcopy_uninstall_mok", "gdrcopy_uninstall_mok_password")


def digest(normalised, options, leave_out=(), files=None):
    """sha256 of the normalised inputs that describe the host's state: not the secret ones (no_log in the spec),
    not those named in leave_out (the fast-rerun switch itself); files: name -> sha256 of a controller file whose
    content is an input too (a certificate; never a private key)."""
    kept = dict((k, v) for k, v in normalised.items() if not options[k].get("no_log") and k not in leave_out)
    kept["files"] = dict(files or {})
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode("utf-8")).hexdigest()


def plain(value):
    """A templated value as plain Python data (ansible-core 2.19 hands out tagged str/dict/list subclasses)."""
    if isinstance(value, dict):
        return dict((plain(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value
