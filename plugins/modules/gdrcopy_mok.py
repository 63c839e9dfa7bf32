#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrcopy_mok
short_description: Find, take or make the Machine Owner Key that signs gdrdrv, and import it for enrollment
description:
  - The mok_signing role's work on a host, in one call. Reads Secure Boot and what the MOK list says of every
    candidate certificate (the text of C(mokutil --test-key), never its exit code), then picks the key by
    O(key_source) - a pair of O(host_key_paths) that is enrolled (or in db) and whose private key is on the host,
    else the controller's pair (O(controller_cert), O(controller_key)), else one generated on the host and kept in
    O(key_dir).
  - Stops with one sentence, before anything is written, when O(key_source=enrolled) finds no enrolled pair, when
    Secure Boot is on, the key will need enrolling and no O(enrollment_password) is set, or when the key's
    certificate is blocked (dbx, MokListX).
  - Then - each only when it differs - makes O(key_dir) (0700); writes the controller's certificate, its DER form
    and its private key (0600); or runs O(keygen) once; links O(record) to the certificate that signs; with Secure
    Boot on, imports the certificate (C(mokutil --import), the password hashed through C(openssl passwd -6 -stdin)
    into a 0600 file that is removed afterwards, never in an argv) unless it is trusted or pending already, leaves a
    marker so that a later run says when a request lapsed, and sets the MokManager timeout; points DKMS at the same
    pair (O(dkms)).
  - In an image (O(image)) nothing is imported - Secure Boot and the MOK list belong to the nodes that boot it.
  - O(helpers) are the role's C(mok-sign) and C(mok-keygen), written after the checks that refuse and before the
    key is made.
  - Its action plugin reads O(controller_cert) and O(controller_key) on the controller.
version_added: "0.2.0"
author: gdrcopy-ansible contributors (@gpufleet)
extends_documentation_fragment: [gpufleet.gdrcopy.helpers]
options:
  key_source:
    description: Where the key comes from (C(auto) - enrolled, else controller, else generate).
    type: str
    choices: [auto, enrolled, controller, generate]
    default: auto
  host_key_paths:
    description: Pairs (C(key), C(cert)) that may already be enrolled on the host (DKMS's, shim-signed's).
    type: list
    elements: dict
    default: []
  key_dir:
    description: Where the role keeps a generated or the controller's pair (made 0700).
    type: path
    required: true
  key_cn:
    description: The common name of a generated key.
    type: str
    default: gdrcopy-ansible module signing key
  key_days:
    description: The validity of a generated key, in days.
    type: int
    default: 36500
  keygen:
    description: The helper that makes a key pair (C(keygen DIR CN DAYS) writes C(mok.key), C(mok.pem), C(mok.der)).
    type: path
  controller_cert:
    description:
      - The controller's certificate (PEM or DER), a path on the controller (absolute, or found as the copy module
        finds C(src)). The action plugin reads it and hands the module its content.
    type: str
    default: ""
  controller_key:
    description:
      - The controller's private key, a path on the controller, read like O(controller_cert). It reaches the host
        0600 and is never logged. Not with O(sign_on_controller).
    type: str
    default: ""
  sign_on_controller:
    description:
      - The controller signs (the gdrcopy role's C(gdrcopy_controller_signer)) - only the controller's certificate
        is written on the host, and a private key an earlier run wrote into O(key_dir) is removed, as is this
        role's DKMS drop-in (DKMS cannot sign with a key the host does not hold). RV(key_path) is empty.
    type: bool
    default: false
  enroll:
    description: Import the certificate for enrollment when Secure Boot is on and it is not trusted yet.
    type: bool
    default: true
  enrollment_password:
    description: The one-time password the operator types in MokManager.
    type: str
    default: ""
  mokmanager_timeout:
    description: Seconds MokManager waits at the console (C(mokutil --timeout)); 0 leaves it as it is.
    type: int
    default: 0
  reboot_ok:
    description: The role reboots into MokManager when an enrollment is pending (only changes the report).
    type: bool
    default: false
  image:
    description: The root is an image, not a running host - nothing is imported.
    type: bool
    default: false
  record:
    description: The link to the certificate that signs (the status playbook reads it).
    type: path
    default: /var/lib/gdrcopy-ansible/mok-signer.der
  dkms:
    description: Where C(/etc/dkms/framework.conf) exists, write the drop-in that makes DKMS sign with the same pair.
    type: bool
    default: true
  delete_replaced:
    description:
      - After a key rotation, ask for the deletion of the replaced certificate from the MOK list (C(mokutil
        --delete), the password hashed into a 0600 file) once no installed gdrdrv is signed by it; the operator
        confirms it in MokManager at the next boot. V(false) says how to do it instead.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Decides and refuses as a real run does, writes and imports nothing; a key not made yet is predicted
      not enrolled, and an import predicts a pending enrollment.
  diff_mode:
    support: none
    description: The files it writes are keys and certificates; RV(changes) names them.
"""

EXAMPLES = r"""
- name: Find, take or make the signing key, and import it for enrollment
  gpufleet.gdrcopy.gdrcopy_mok:
    key_dir: /var/lib/gdrcopy-ansible/mok
    keygen: /usr/local/libexec/gdrcopy-ansible/mok-keygen
    host_key_paths: [{key: /var/lib/dkms/mok.key, cert: /var/lib/dkms/mok.pub}]
    enrollment_password: "{{ vault_mok_password }}"
  register: mok
"""

RETURN = r"""
source:
  description: Where the key came from - C(enrolled), C(controller) or C(generated).
  returned: success
  type: str
key_path:
  description: The private key that signs, on the host.
  returned: success
  type: str
cert_path:
  description: Its certificate (DER), on the host.
  returned: success
  type: str
signer:
  description: C(source), C(cn), C(serial), C(cert) and C(state) (enrolled, in_db, pending, blocked, not_enrolled, unknown).
  returned: success
  type: dict
secure_boot:
  description: Secure Boot is on.
  returned: success
  type: bool
enrollment_pending:
  description: The certificate waits for a person to confirm it in MokManager at the next boot.
  returned: success
  type: bool
reimported:
  description: This run imported it again because an earlier request lapsed.
  returned: success
  type: bool
changes:
  description: What the call wrote, made or imported (in check mode, would).
  returned: always
  type: list
  elements: str
rotation:
  description:
    - The key rotation this run is in (the certificate that signed until now, the signer link's target, differs from
      the one chosen, and is trusted) - C(from), C(to) and C(phase) - C(pending) (the new key waits for its
      enrollment; the gdrcopy role keeps the installed gdrdrv signed by the old one) or C(done) (the new key is
      trusted; every installed gdrdrv is re-signed with it and the old certificate is recorded as replaced).
      None when the key did not change.
  returned: success
  type: dict
replaced:
  description:
    - The certificate a rotation replaced (C(/var/lib/gdrcopy-ansible/mok-replaced.json)) - C(cert), C(serial),
      C(in_use) (the kernels whose installed gdrdrv it still signs) and C(step) (C(in use), C(pending),
      C(request), C(offer) or C(gone), the record then dropped). None when there is none.
  returned: success
  type: dict
msg:
  description: The role's report - the signer, Secure Boot and the MOK state, and the console step when pending.
  returned: success
  type: str
"""

import base64
import hashlib
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_commands as C
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_commands import Failed, checked, must
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts as F
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_mok as MOK
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_uninstall as U
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_fileops import (
    HELPERS_SPEC, PACKAGES_SPEC, ensure, ensure_helpers, record_packages)
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import PATHS, PipelineError, point_link

DKMS_FRAMEWORK = "/etc/dkms/framework.conf"
DKMS_DROPIN = "/etc/dkms/framework.conf.d/gdrcopy-ansible.conf"
MARKER = "enrollment-requested"
REPLACED = PATHS["mok_replaced"]  # the certificate a key rotation replaced, until it is deleted from the MOK list

ARGUMENT_SPEC = dict(
    key_source=dict(type="str", choices=list(MOK.SOURCES), default="auto", no_log=False),
    host_key_paths=dict(type="list", elements="dict", default=[], no_log=False),
    key_dir=dict(type="path", required=True, no_log=False),
    key_cn=dict(type="str", default="gdrcopy-ansible module signing key", no_log=False),
    key_days=dict(type="int", default=36500, no_log=False),
    keygen=dict(type="path", no_log=False),
    helpers=HELPERS_SPEC,
    packages=PACKAGES_SPEC,
    # the action plugin puts the files' content here, base64-encoded
    controller_cert=dict(type="str", default=""),
    controller_key=dict(type="str", default="", no_log=True),
    sign_on_controller=dict(type="bool", default=False),
    enroll=dict(type="bool", default=True),
    enrollment_password=dict(type="str", default="", no_log=True),
    mokmanager_timeout=dict(type="int", default=0),
    reboot_ok=dict(type="bool", default=False),
    image=dict(type="bool", default=False),
    record=dict(type="path", default=PATHS["mok_signer"]),
    dkms=dict(type="bool", default=True),
    delete_replaced=dict(type="bool", default=False),
)


def take_controller_pair(module, h, p, pair, changes):
    """The controller's certificate (as given, then as DER, made again on every run and replaced when it differs)
    and private key (0600) in key_dir."""
    key_dir, check_mode = p["key_dir"], module.check_mode
    crt = key_dir + "/controller.crt"
    if ensure(module, crt, base64.b64decode(p["controller_cert"]), 0o644, check_mode):
        changes.append("wrote " + crt)
    if not check_mode:
        openssl = h.tool("openssl") or "openssl"
        new = pair["cert"] + ".new"
        for form in ("PEM", "DER"):
            rc, out, err = h.run([openssl, "x509", "-inform", form, "-in", crt, "-outform", "DER", "-out", new])
            if rc == 0:
                break
        checked(["openssl", "x509", "-in", crt, "-outform", "DER"], rc, out, err)
        with open(new, "rb") as f:
            der = f.read()
        os.unlink(new)
        if ensure(module, pair["cert"], der, 0o644):
            changes.append("wrote " + pair["cert"])
    elif not os.path.exists(pair["cert"]):
        changes.append("wrote " + pair["cert"])
    if p.get("sign_on_controller"):
        # an earlier run kept the controller's key here, or generated one: no private key that the firmware may
        # trust stays on a host where the controller signs (modules signed with it keep their signatures)
        for key in (pair["key"], MOK.own_pair(key_dir, "generated")["key"]):
            if os.path.lexists(key):
                changes.append("removed %s (the controller signs)" % key)
                if not check_mode:
                    os.unlink(key)
    elif ensure(module, pair["key"], base64.b64decode(p["controller_key"]), 0o600, check_mode):
        changes.append("wrote " + pair["key"])


def keep_replaced_controller_cert(module, h, p, pair, previous, trusted, changes):
    """take_controller_pair, and the certificate that signs until now (the signer link's target) when the
    controller's certificate changes under the same name (a fleet moving from one controller key to the next) while
    the firmware trusts it: it is kept as <key_dir>/replaced-<sha256[:12]>.der, still enrolled, for the rotation to
    hold the modules it signed and to name in their deletion later. Returns the previous certificate's path."""
    before = None
    if trusted and previous and previous == os.path.realpath(pair["cert"]) and os.path.isfile(pair["cert"]):
        with open(pair["cert"], "rb") as f:
            before = f.read()
    take_controller_pair(module, h, p, pair, changes)
    if before is None or module.check_mode:
        return previous
    with open(pair["cert"], "rb") as f:
        if f.read() == before:
            return previous
    keep = "%s/replaced-%s.der" % (p["key_dir"], hashlib.sha256(before).hexdigest()[:12])
    if ensure(module, keep, before, 0o644):
        changes.append("kept the certificate %s replaced as %s" % (pair["cert"], keep))
    return keep


def make_key(module, h, p, pair, changes):
    """A generated pair, made once and kept for later runs."""
    if os.path.exists(pair["key"]):
        return
    changes.append("generated " + pair["key"])
    if module.check_mode:
        return
    if not p["keygen"]:
        raise Failed("no key generator given (keygen) to make %s" % pair["key"])
    cmd = [p["keygen"], p["key_dir"], p["key_cn"], str(p["key_days"])]
    must(h, cmd)


def link_record(module, record, cert, changes):
    try:
        if point_link(record, cert, module.check_mode):
            changes.append("linked %s to %s" % (record, cert))
    except PipelineError as e:
        raise Failed(str(e))


def import_for_enrollment(module, h, p, cert, changes):
    """mokutil --import with the password hashed into a 0600 file (never in an argv), removed afterwards; a marker
    of the request; the MokManager timeout."""
    if module.check_mode:
        changes.append("imported %s for enrollment" % cert)
        return
    openssl, mokutil = h.tool("openssl") or "openssl", h.tool("mokutil") or "mokutil"
    out = MOK.mok_request(h, module.run_command, openssl, mokutil, "--import", cert, p["enrollment_password"],
                          p["key_dir"])
    ensure(module, p["key_dir"] + "/" + MARKER, to_bytes(
        "%s imported for enrollment; confirm it in MokManager at the next boot\n" % cert), 0o644)
    if "SKIP" not in out:  # mokutil skips a key it has already
        changes.append("imported %s for enrollment" % cert)
    if p["mokmanager_timeout"] != 0:
        cmd = [mokutil, "--timeout", str(p["mokmanager_timeout"])]
        must(h, cmd)
        changes.append("set the MokManager timeout to %d s" % p["mokmanager_timeout"])


def rotate(module, h, p, previous, candidates, cert, mok, secure_boot, efi, changes):
    """The rotation this run is in (MOK.rotation); when it is done, the old certificate is recorded as replaced."""
    if not previous or os.path.realpath(previous) == os.path.realpath(cert) or p["image"]:
        return None
    probed = next((c for c in candidates if c["cert"] == previous and c["exists"]), None)
    before = probed or F.cert_mok_state(h, previous, efi)
    rot = MOK.rotation(previous, before.get("state"), cert, mok["state"], secure_boot)
    if rot and rot["phase"] == "done":
        serial = before.get("serial") or F.certificate_facts(h, previous)[0]
        text = json.dumps({"cert": previous, "serial": serial}, sort_keys=True) + "\n"
        if ensure(module, REPLACED, to_bytes(text), 0o644, module.check_mode):
            changes.append("recorded %s as replaced by %s" % (previous, cert))
    return rot


# Where DKMS installs the modules it builds (Debian, Ubuntu; EL's DKMS uses extra/).
DKMS_MODULES = "/lib/modules/*/updates/dkms/*.ko*"


def replaced_certificate(module, h, p, efi, changes):
    """The certificate a rotation replaced (REPLACED): kept while an installed gdrdrv is signed by it, then offered
    for deletion (or its deletion requested, with delete_replaced), dropped once it is not enrolled any more."""
    try:
        with open(REPLACED) as f:
            record = json.load(f)
        cert, serial = record["cert"], P.normalize_serial(record.get("serial") or "")
    except (IOError, OSError, ValueError, KeyError, TypeError):
        return None
    state = F.cert_mok_state(h, cert, efi)
    serial = serial or state.get("serial", "")
    in_use = [k["release"] for k in F.kernel_facts(h, serial)["installed"]
              if any(m["ours"] for m in k["gdrdrv_modules"])] if serial else []
    # DKMS signed with the same key while this role pointed it there (the NVIDIA driver): deleting the certificate
    # would keep those modules from loading too
    in_use += ["%s (%s)" % (path.split("/")[3], os.path.basename(path)) for path in sorted(h.glob(DKMS_MODULES))
               if serial and F.module_signature(h, path, serial)["ours"]]
    mokutil = h.live_tool("mokutil")
    pending = U.list_serials(h.run([mokutil, "--list-delete"])[1]) if mokutil and state["state"] in MOK.TRUSTED else []
    step = MOK.replaced_step(state["state"], in_use, pending, serial, p.get("delete_replaced", False))
    if step == "request":
        if not p["enrollment_password"]:
            raise Failed("mok_signing_delete_replaced asks for the deletion of %s from the MOK list, which needs the "
                         "password MokManager asks for: set mok_signing_enrollment_password (vault it). Nothing else "
                         "was changed." % cert)
        changes.append("requested the deletion of %s from the MOK list" % cert)
        if not module.check_mode:
            MOK.mok_request(h, module.run_command, h.tool("openssl") or "openssl", mokutil, "--delete", cert,
                            p["enrollment_password"], p["key_dir"])
    elif step == "gone":
        changes.append("dropped the record of the replaced %s (not enrolled any more)" % cert)
        if not module.check_mode:
            os.unlink(REPLACED)
    return {"cert": cert, "serial": serial, "in_use": in_use, "step": step}


def run(module, p, h=None):
    """The module's work: the result (raises Failed)."""
    h = h or F.Host(module, "/", image=p["image"])
    pairs = p["host_key_paths"]
    # the certificate that signed until now (a rotation starts when the one chosen below differs)
    previous = os.path.realpath(p["record"]) if os.path.islink(p["record"]) and os.path.exists(p["record"]) else ""
    probe = F.secure_boot_facts(h, None, MOK.candidate_certs(pairs, p["key_dir"]))
    candidates = probe["candidates"]
    secure_boot = bool(probe.get("enabled"))
    keys_present = [h.exists(pair.get("key", "")) for pair in pairs]
    if p.get("sign_on_controller") and (p["controller_key"] or not p["controller_cert"]):
        raise Failed("sign_on_controller takes the controller's certificate and never its key")
    source, pair = MOK.choose("controller" if p.get("sign_on_controller") else p["key_source"], pairs, candidates,
                              keys_present, p["key_dir"], bool(p["controller_key"] or p.get("sign_on_controller")))
    why = MOK.refusal(p["key_source"], source, candidates, secure_boot, p["enroll"],
                      bool(p["enrollment_password"]))
    if why:
        raise Failed(why)
    changes = []
    try:
        if record_packages(module, p.get("packages"), module.check_mode):
            changes.append("recorded the packages installed: " + ", ".join(p["packages"]))
        changes += ["wrote " + dest for dest in ensure_helpers(module, p.get("helpers"), module.check_mode)]
    except ValueError as e:
        raise Failed(str(e))
    if source != "enrolled":
        if not os.path.isdir(p["key_dir"]) or (os.stat(p["key_dir"]).st_mode & 0o777) != 0o700:
            changes.append("made %s (0700)" % p["key_dir"])
            if not module.check_mode:
                if not os.path.isdir(p["key_dir"]):
                    os.makedirs(p["key_dir"], 0o700)
                os.chmod(p["key_dir"], 0o700)
    if source == "controller":
        was = next((c for c in candidates if c["cert"] == pair["cert"] and c["exists"]), {})
        previous = keep_replaced_controller_cert(module, h, p, pair, previous, was.get("state") in MOK.TRUSTED, changes)
    elif source == "generated":
        make_key(module, h, p, pair, changes)
    # The certificate's MOK state: the probe's when this call left it as the probe read it, else read again (a key
    # made or a DER written now); a key check mode would make now is not enrolled.
    probed = next((c for c in candidates if c["cert"] == pair["cert"] and c["exists"]), None)
    if not h.exists(pair["cert"]):
        mok = {"state": "not_enrolled", "serial": "", "subject": ""}
    elif probed and not any(pair["cert"] in change for change in changes):
        mok = probed
    else:
        mok = F.cert_mok_state(h, pair["cert"], probe["efi"])
    requested = os.path.exists(p["key_dir"] + "/" + MARKER)
    imported = MOK.import_needed(p["enroll"], p["image"], secure_boot, mok["state"])
    if imported:
        import_for_enrollment(module, h, p, pair["cert"], changes)
        if module.check_mode:
            mok = dict(mok, state="pending")
        else:
            mok = F.cert_mok_state(h, pair["cert"], probe["efi"])
    if p.get("sign_on_controller"):
        if os.path.exists(DKMS_DROPIN):
            changes.append("removed %s (the key is not on this host)" % DKMS_DROPIN)
            if not module.check_mode:
                os.unlink(DKMS_DROPIN)
    elif p["dkms"] and h.exists(DKMS_FRAMEWORK):
        if ensure(module, DKMS_DROPIN, to_bytes(MOK.dkms_dropin(pair["key"], pair["cert"])), 0o644, module.check_mode):
            changes.append("wrote " + DKMS_DROPIN)
    rot = rotate(module, h, p, previous, candidates, pair["cert"], mok, secure_boot, probe["efi"], changes)
    # the signer link names the certificate installed modules are signed with: the old one while a rotation waits
    link_record(module, p["record"], rot["from"] if rot and rot["phase"] == "pending" else pair["cert"], changes)
    replaced = replaced_certificate(module, h, p, probe["efi"], changes)
    sign = MOK.signer(source, pair["cert"], mok, p["key_cn"])
    pending = secure_boot and sign["state"] == "pending"
    reimported = bool(imported and requested)
    return {"changed": bool(changes), "changes": changes, "source": source,
            "key_path": "" if p.get("sign_on_controller") else pair["key"],
            "cert_path": pair["cert"], "signer": sign, "secure_boot": secure_boot, "enrollment_pending": pending,
            "reimported": reimported, "rotation": rot, "replaced": replaced,
            "msg": " ".join([MOK.report(sign, secure_boot, p["image"], reimported, pending, p["reboot_ok"],
                                        mok.get("detail", ""))] + MOK.rotation_report(
                rot, (replaced or {}).get("cert"), (replaced or {}).get("step"), (replaced or {}).get("in_use")))}


def main():
    C.main(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True), run)


if __name__ == "__main__":
    main()
