# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""The mok_signing role's decisions, pure: which key signs (an enrolled pair on the host, the controller's, or one
generated on the host), the sentences that stop a host before anything is written, whether the certificate is
imported for enrollment, the signer the role exports, and the report. The gdrcopy_mok module reads the host and
acts on these answers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shlex
import tempfile

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_commands import checked, must

SOURCES = ("auto", "enrolled", "controller", "generate")
# States of a certificate in which it is trusted already, or will be at the next boot.
TRUSTED = ("enrolled", "in_db")
NO_IMPORT = TRUSTED + ("pending", "blocked")


def own_pair(key_dir, source):
    """The pair the role keeps in key_dir for a controller or generated key."""
    name = "controller" if source == "controller" else "mok"
    return {"key": "%s/%s.key" % (key_dir, name), "cert": "%s/%s.der" % (key_dir, name)}


def candidate_certs(pairs, key_dir):
    """The certificates whose MOK state is read: the host's pairs, then the generated and the controller's."""
    return [p["cert"] for p in pairs] + [own_pair(key_dir, "generated")["cert"], own_pair(key_dir, "controller")["cert"]]


def choose(key_source, pairs, candidates, keys_present, key_dir, controller_given):
    """-> (source, pair): an enrolled host pair whose private key is here (auto, enrolled), else the controller's
    (auto, controller, when given), else a generated one."""
    if key_source in ("auto", "enrolled"):
        for pair, cand, present in zip(pairs, candidates, keys_present):
            if cand.get("state") in TRUSTED and present:
                return "enrolled", {"key": pair["key"], "cert": pair["cert"]}
    if key_source in ("auto", "controller") and controller_given:
        return "controller", own_pair(key_dir, "controller")
    return "generated", own_pair(key_dir, "generated")


def own_state(source, candidates):
    """The MOK state of the certificate a controller or generated source uses, from an earlier run."""
    cand = candidates[-1 if source == "controller" else -2]
    return cand.get("state", "unknown") if cand.get("exists") else "not made yet"


def refusal(key_source, source, candidates, secure_boot, enroll, password_set):
    """The sentence that stops the host before anything is written, or None."""
    if key_source == "enrolled" and source != "enrolled":
        return ("mok_signing_key_source is enrolled but none of mok_signing_host_key_paths is an enrolled key with its "
                "private key on this host (%s). Add the path of the enrolled pair to mok_signing_host_key_paths, or use "
                "key source auto, controller or generate." % "; ".join(
                    "%s: %s" % (c.get("cert", ""), c.get("detail", "")) for c in candidates))
    if source == "enrolled":
        return None
    state = own_state(source, candidates)
    if enroll and secure_boot and state not in NO_IMPORT and not password_set:
        return ("Secure Boot is on and the %s key is not enrolled (%s), so it must be imported for enrollment, and "
                "mok_signing_enrollment_password is empty: set it (in ansible-vault) to the one-time password the "
                "operator types in MokManager at the next boot, or set mok_signing_enroll: false to sign without "
                "enrolling. Nothing was changed." % (source, state))
    if state == "blocked":
        return ("the %s key's certificate is blocked by the firmware or MOK denylist (dbx or MokListX), so no module it "
                "signs can ever load under Secure Boot: sign with another key (another controller pair, or a new "
                "mok_signing_key_dir for a generated one). Nothing was changed." % source)
    return None


def import_needed(enroll, image, secure_boot, state):
    """Import the certificate for enrollment: Secure Boot on, a running host, and the key neither trusted nor
    pending (an unknown state is imported: mokutil answers SKIP for a key it already has)."""
    return bool(enroll and not image and secure_boot and state in ("not_enrolled", "unknown"))


def signer(source, cert, mok, key_cn):
    """The key that signs, as the role exports it (the public half only)."""
    return {"source": source, "cn": mok.get("subject") or (key_cn if source == "generated" else ""),
            "serial": mok.get("serial", ""), "cert": cert, "state": mok.get("state", "unknown")}


def dkms_dropin(key, cert):
    """/etc/dkms/framework.conf.d/gdrcopy-ansible.conf: DKMS sources it with bash, so the values are quoted."""
    return ("# Ansible managed (gdrcopy-ansible, role mok_signing): changes here are overwritten by the next run.\n"
            "# DKMS signs the modules it builds (the NVIDIA driver's among them) with this pair, the one that signs "
            "gdrdrv, so\n# one enrolled key covers every out-of-tree module. DKMS sources this file with bash: the "
            "values are quoted.\nmok_signing_key=%s\nmok_certificate=%s\n" % (shlex.quote(key), shlex.quote(cert)))


def report(sign, secure_boot, image, reimported, pending, reboot_ok, detail):
    """The one message of the role: the signer, Secure Boot and the MOK state, and what the operator must do."""
    state = sign["state"].replace("_", " ") if sign["state"] != "unknown" else "of unknown MOK state (%s)" % detail
    out = ['gdrdrv is signed with "%s" (serial %s, %s key, certificate %s).%s' % (
        sign["cn"], sign["serial"] or "to be made", sign["source"], sign["cert"],
        "" if image else " Secure Boot is %s; the key is %s." % ("on" if secure_boot else "off or absent", state))]
    if image:
        out.append("This is an image: Secure Boot and the MOK list belong to each node that boots it, so nothing was "
                   "imported here. On a Secure Boot node the key must be enrolled once: run mokutil --import %s on the "
                   "node and confirm it in MokManager at its next boot, or sign with a key the fleet already enrolled "
                   "(mok_signing_key_source: controller)." % sign["cert"])
    if reimported:
        out.append("The enrollment requested by an earlier run was not confirmed at the console (a request lasts one "
                   "boot): this run imported the key again.")
    if pending:
        out.append('An enrollment is pending: at the next boot, at the console of this host (screen, serial or BMC), '
                   'press a key when MokManager shows "Press any key to perform MOK management", then choose Enroll '
                   'MOK, Continue, Yes, type the enrollment password (mok_signing_enrollment_password) and choose '
                   'Reboot. The request lasts one boot only: if nobody confirms it during the MokManager countdown it '
                   'is dropped, and the next run of this playbook imports it again.')
        out.append("mok_signing_reboot_ok is true: rebooting now." if reboot_ok else
                   "Reboot when someone is at the console (or set mok_signing_reboot_ok: true).")
    elif secure_boot and sign["state"] not in TRUSTED:
        out.append("The key is not enrolled and mok_signing_enroll is false: modules it signs will not load under "
                   "Secure Boot until it is.")
    return " ".join(out)


def password_hash(run, openssl, password):
    """The MokManager password as mokutil's --hash-file wants it (openssl passwd -6, the password on stdin, never in
    an argv): one line. run is AnsibleModule.run_command; Failed when openssl fails. The enrollment (gdrcopy_mok)
    and the deletion (gdrcopy_uninstall) both hash it here."""
    argv = [openssl, "passwd", "-6", "-stdin"]
    return checked(argv, *run(argv, data=password)).strip() + "\n"


def mok_request(h, run, openssl, mokutil, verb, cert, password, directory=None):
    """mokutil --import or --delete of cert, the MokManager password hashed into a 0600 file in directory (never in
    an argv), removed afterwards: mokutil's output. Failed when a command fails. The enrollment and the deletion of a
    replaced certificate (gdrcopy_mok) and the uninstall's deletion (gdrcopy_uninstall) all ask through it."""
    hashed = password_hash(run, openssl, password)
    handle, hash_file = tempfile.mkstemp(prefix=".gdrcopy-mok-", dir=directory)
    try:
        os.write(handle, hashed.encode("ascii"))
        os.close(handle)
        return must(h, [mokutil, verb, cert, "--hash-file", hash_file])
    finally:
        os.unlink(hash_file)


# --- key rotation ---------------------------------------------------------------------------------------------

def rotation(previous, previous_state, cert, state, secure_boot):
    """The key rotation a run is in, from the certificate that signed until now (previous: the signer link's target
    before this run, with its MOK state) and the one chosen now: None (no change of key), or {from, to, phase}:
      pending  Secure Boot is on and the new certificate is not trusted yet while the old one is: the new one is
               imported, gdrdrv is re-signed with it, but an installed gdrdrv that differs only in its signature is
               kept (it still loads) until the new key is enrolled;
      done     the new certificate is trusted (or Secure Boot is off): every installed gdrdrv is re-signed with it,
               and the old one is recorded as replaced, to be deleted from the MOK list once nothing is signed by it."""
    if not previous or previous == cert or previous_state not in TRUSTED:
        return None
    phase = "pending" if secure_boot and state not in TRUSTED else "done"
    return {"from": previous, "to": cert, "phase": phase}


def kept_cert(kept):
    """Of the certificates kept in the key directory with their MOK states [(cert, state)], the one an uninstall
    asks to delete when the signer link is gone: the first the firmware trusts (after a rotation the replaced one
    may be deleted already while the new one is enrolled), else the first kept; ("", None) when none is kept."""
    return next((cs for cs in kept if cs[1]["state"] in TRUSTED), kept[0] if kept else ("", None))


def replaced_step(state, in_use, pending_serials, serial, delete):
    """What becomes of the certificate a rotation replaced (the replaced record): its MOK state, the kernels whose
    installed gdrdrv it still signs (in_use), the deletions already requested, and mok_signing_delete_replaced ->
      in use     some installed gdrdrv is still signed by it: kept (a run that re-signs them comes first)
      pending    its deletion waits for MokManager at the next boot
      request    nothing is signed by it, delete is on: mokutil --delete now
      offer      nothing is signed by it: the report says how to delete it
      gone       it is not enrolled any more (deleted at the console, or never was): the record is dropped."""
    if state not in TRUSTED:
        return "gone"
    if serial and serial in pending_serials:
        return "pending"
    if in_use:
        return "in use"
    return "request" if delete else "offer"


def rotation_report(rot, replaced, step, in_use):
    """The sentences about a rotation and the replaced certificate, for the role's message."""
    out = []
    if rot and rot["phase"] == "pending":
        out.append("Key rotation: %s replaces %s, which stays enrolled; every gdrdrv is re-signed with the new key, but "
                   "an installed gdrdrv signed by the old one is kept (it still loads) until the new key is enrolled "
                   "at the console and the next run installs the re-signed modules." % (rot["to"], rot["from"]))
    elif rot:
        out.append("Key rotation: %s is trusted now, so every installed gdrdrv is re-signed with it; %s is recorded as "
                   "replaced." % (rot["to"], rot["from"]))
    if replaced and step:
        out.append({
            "in use": "The replaced certificate %s still signs gdrdrv for %s: it stays enrolled until those are re-signed "
                      "(this run does that)." % (replaced, ", ".join(in_use)),
            "pending": "The deletion of the replaced certificate %s from the MOK list waits for the console: confirm it "
                       "in MokManager (Delete MOK) at the next boot." % replaced,
            "request": "Nothing is signed by the replaced certificate %s any more: its deletion from the MOK list is "
                       "requested; confirm it at the console at the next boot (MokManager: Delete MOK, then the "
                       "enrollment password)." % replaced,
            "offer": "Nothing is signed by the replaced certificate %s any more: delete it from the MOK list with "
                     "mok_signing_delete_replaced: true (or mokutil --delete %s), then confirm it in MokManager at the "
                     "next boot." % (replaced, replaced),
            "gone": "The replaced certificate %s is not enrolled any more: the rotation is complete." % replaced,
        }[step])
    return out
