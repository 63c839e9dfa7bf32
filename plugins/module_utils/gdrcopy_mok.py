# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""The mok_signing role's decisions, pure: which key signs (an enrolled pair on the host, the controller's, or one
generated on the host), the sentences that stop a host before anything is written, whether the certificate is
imported for enrollment, the signer the role exports, and the report. The gdrcopy_mok module reads the host and
acts on these answers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_commands import checked

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
