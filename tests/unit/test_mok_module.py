"""plugins/modules/gdrcopy_mok and module_utils/gdrcopy_mok: which key signs, the refusals before anything is
written, the enrollment import, the DKMS drop-in and the report.

The decisions are pure; run() works on real files in a temporary key directory, makes real keys with the role's
mok-keygen and converts real certificates with openssl. What the firmware says (Secure Boot, the MOK list) and
mokutil's import are given by the test: the secureboot VM scenario runs them for real through MokManager."""

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_mok as MOK
from conftest import StubModule as Module
from ansible_collections.gpufleet.gdrcopy.plugins.modules import gdrcopy_mok as M

REPO = Path(__file__).resolve().parents[2]
KEYGEN = REPO / "roles" / "mok_signing" / "files" / "mok-keygen"
DKMS_PAIR = {"key": "/var/lib/dkms/mok.key", "cert": "/var/lib/dkms/mok.pub"}
pytestmark = pytest.mark.skipif(not shutil.which("openssl"), reason="needs openssl (the role installs it on hosts)")


def cand(cert, state="not_enrolled", exists=True, detail=""):
    return {"cert": cert, "exists": exists, "state": state, "detail": detail or state}


# --- the decisions ---------------------------------------------------------------------------------------------

def test_an_enrolled_host_pair_with_its_key_is_chosen_first():
    cands = [cand("/var/lib/dkms/mok.pub", "enrolled"), cand("/k/mok.der"), cand("/k/controller.der")]
    assert MOK.choose("auto", [DKMS_PAIR], cands, [True], "/k", True) == ("enrolled", DKMS_PAIR)
    # without its private key it cannot sign: the controller's, else a generated one
    assert MOK.choose("auto", [DKMS_PAIR], cands, [False], "/k", True) == (
        "controller", {"key": "/k/controller.key", "cert": "/k/controller.der"})
    assert MOK.choose("auto", [DKMS_PAIR], cands, [False], "/k", False) == (
        "generated", {"key": "/k/mok.key", "cert": "/k/mok.der"})
    # generate never takes the enrolled pair; controller never generates when its pair is given
    assert MOK.choose("generate", [DKMS_PAIR], cands, [True], "/k", True)[0] == "generated"
    assert MOK.choose("controller", [DKMS_PAIR], cands, [True], "/k", True)[0] == "controller"


def test_the_refusals_before_anything_is_written():
    cands = [cand("/var/lib/dkms/mok.pub", "not_enrolled"), cand("/k/mok.der", exists=False),
             cand("/k/controller.der", exists=False)]
    why = MOK.refusal("enrolled", "generated", cands, True, True, True)
    assert why.startswith("mok_signing_key_source is enrolled but none of mok_signing_host_key_paths is an enrolled "
                          "key with its private key on this host (/var/lib/dkms/mok.pub: not_enrolled;")
    why = MOK.refusal("auto", "generated", cands, True, True, False)
    assert why.startswith("Secure Boot is on and the generated key is not enrolled (not made yet), so it must be "
                          "imported for enrollment, and mok_signing_enrollment_password is empty")
    assert MOK.refusal("auto", "generated", cands, True, False, False) is None  # not enrolling: no password needed
    assert MOK.refusal("auto", "generated", cands, False, True, False) is None  # Secure Boot off
    cands[1] = cand("/k/mok.der", "pending")
    assert MOK.refusal("auto", "generated", cands, True, True, False) is None  # pending: nothing to import
    cands[1] = cand("/k/mok.der", "blocked")
    assert MOK.refusal("auto", "generated", cands, True, True, True).startswith(
        "the generated key's certificate is blocked by the firmware or MOK denylist")


def test_what_is_imported():
    assert MOK.import_needed(True, False, True, "not_enrolled") and MOK.import_needed(True, False, True, "unknown")
    for state in ("enrolled", "in_db", "pending", "blocked"):
        assert not MOK.import_needed(True, False, True, state)
    assert not MOK.import_needed(True, True, True, "not_enrolled")   # an image: the nodes enroll
    assert not MOK.import_needed(True, False, False, "not_enrolled")  # Secure Boot off
    assert not MOK.import_needed(False, False, True, "not_enrolled")


def test_the_report_says_what_to_do():
    sign = {"source": "generated", "cn": "c", "serial": "4A", "cert": "/k/mok.der", "state": "pending"}
    msg = MOK.report(sign, True, False, True, True, False, "")
    assert msg.startswith('gdrdrv is signed with "c" (serial 4A, generated key, certificate /k/mok.der). Secure Boot '
                          "is on; the key is pending.")
    assert "this run imported the key again" in msg and "choose Enroll MOK, Continue, Yes" in msg
    assert msg.endswith("Reboot when someone is at the console (or set mok_signing_reboot_ok: true).")
    msg = MOK.report(dict(sign, state="unknown"), False, True, False, False, False, "not inspected in an image")
    assert "This is an image: Secure Boot and the MOK list belong to each node" in msg and "Secure Boot is" not in msg
    msg = MOK.report(dict(sign, state="not_enrolled"), True, False, False, False, False, "")
    assert msg.endswith("modules it signs will not load under Secure Boot until it is.")


# --- the module on real files ----------------------------------------------------------------------------------

class Host:
    """A running host whose firmware the test describes: mokutil's import is recorded, openssl and the key
    generator run for real."""

    def __init__(self, import_says="", import_rc=0):
        self.live, self.calls, self.import_says, self.import_rc = True, [], import_says, import_rc

    @staticmethod
    def exists(path):
        return os.path.exists(path)

    @staticmethod
    def tool(name):
        return shutil.which(name) or name

    def run(self, argv):
        self.calls.append(argv)
        if os.path.basename(argv[0]) == "mokutil":
            return self.import_rc, self.import_says, ""
        r = subprocess.run(argv, capture_output=True, text=True)
        return r.returncode, r.stdout, r.stderr


@pytest.fixture
def firmware(monkeypatch, tmp_path):
    """The firmware's answers: Secure Boot, and each certificate's MOK state (by path; not enrolled by default)."""
    fw = {"efi": True, "enabled": False, "states": {}}

    def state(h, cert, efi):
        return cand(cert, fw["states"].get(cert, "not_enrolled"), os.path.exists(cert))

    monkeypatch.setattr(M.F, "cert_mok_state", state)
    monkeypatch.setattr(M.F, "secure_boot_facts", lambda h, mok, candidates: {
        "efi": fw["efi"], "enabled": fw["enabled"], "candidates": [state(h, c, True) for c in candidates]})
    monkeypatch.setattr(M, "DKMS_FRAMEWORK", str(tmp_path / "etc/dkms/framework.conf"))
    monkeypatch.setattr(M, "DKMS_DROPIN", str(tmp_path / "etc/dkms/framework.conf.d/gdrcopy-ansible.conf"))
    monkeypatch.setattr(M, "DKMS_MODULES", str(tmp_path) + "/lib/modules/*/updates/dkms/*.ko*")
    return fw


def params(tmp_path, **kw):
    return dict({"key_source": "auto", "host_key_paths": [], "key_dir": str(tmp_path / "mok"),
                 "key_cn": "gdrcopy test key", "key_days": 30, "keygen": str(KEYGEN), "controller_cert": "",
                 "controller_key": "", "enroll": True, "enrollment_password": "", "mokmanager_timeout": 0,
                 "reboot_ok": False, "image": False, "record": str(tmp_path / "state/mok-signer.der"),
                 "dkms": True}, **kw)


def test_a_key_is_generated_once_and_linked_where_status_looks(tmp_path, firmware):
    r = M.run(Module(), params(tmp_path), Host())
    key_dir = tmp_path / "mok"
    assert r["source"] == "generated" and r["cert_path"] == str(key_dir / "mok.der") and r["changed"]
    assert oct(key_dir.stat().st_mode & 0o777) == "0o700" and oct((key_dir / "mok.key").stat().st_mode & 0o777) == "0o600"
    assert os.readlink(tmp_path / "state/mok-signer.der") == str(key_dir / "mok.der")
    assert r["signer"]["cn"] == "gdrcopy test key" and r["secure_boot"] is False and not r["enrollment_pending"]
    assert not (tmp_path / "etc").exists()  # no DKMS here: no drop-in
    again = M.run(Module(), params(tmp_path), Host())
    assert again["changed"] is False and again["changes"] == []


def test_secure_boot_imports_with_a_hashed_password_and_reports_the_console_step(tmp_path, firmware, monkeypatch):
    firmware["enabled"] = True
    h = Host(import_says="")
    cert = str(tmp_path / "mok/mok.der")
    real_state = M.F.cert_mok_state

    def after_import(host, path, efi):  # the firmware lists the key as pending once mokutil took it
        return dict(real_state(host, path, efi), state="pending" if any("--import" in c for c in h.calls) else
                    "not_enrolled")
    monkeypatch.setattr(M.F, "cert_mok_state", after_import)
    r = M.run(Module(), params(tmp_path, enrollment_password="s3cret pass", mokmanager_timeout=30), h)
    imports = [c for c in h.calls if "--import" in c]
    assert len(imports) == 1 and imports[0][1:4] == ["--import", cert, "--hash-file"]
    assert os.path.dirname(imports[0][4]) == str(tmp_path / "mok")  # a 0600 file beside the keys, removed after
    assert not any("s3cret" in " ".join(c) for c in h.calls)  # never in an argv
    assert not os.path.exists(imports[0][4]) and (tmp_path / "mok/enrollment-requested").exists()
    assert [c[1:] for c in h.calls if "--timeout" in c] == [["--timeout", "30"]]
    assert r["enrollment_pending"] and r["signer"]["state"] == "pending" and not r["reimported"]
    assert "choose Enroll MOK, Continue, Yes" in r["msg"]
    assert "imported %s for enrollment" % cert in r["changes"]


def test_a_lapsed_request_is_imported_again_and_said(tmp_path, firmware):
    firmware["enabled"] = True
    M.run(Module(), params(tmp_path, enroll=False), Host())
    (tmp_path / "mok/enrollment-requested").write_text("earlier\n")
    r = M.run(Module(), params(tmp_path, enrollment_password="pw"), Host())
    assert r["reimported"] and "this run imported the key again" in r["msg"]


def test_no_password_stops_before_anything_is_written(tmp_path, firmware):
    firmware["enabled"] = True
    with pytest.raises(M.Failed, match="mok_signing_enrollment_password is empty"):
        M.run(Module(), params(tmp_path), Host())
    assert not (tmp_path / "mok").exists() and not (tmp_path / "state").exists()


def test_check_mode_predicts_and_writes_nothing(tmp_path, firmware):
    firmware["enabled"] = True
    h = Host()
    r = M.run(Module(check_mode=True), params(tmp_path, enrollment_password="pw"), h)
    assert r["changed"] and r["enrollment_pending"] and r["signer"]["state"] == "pending"
    assert r["changes"][:2] == ["made %s (0700)" % (tmp_path / "mok"), "generated %s" % (tmp_path / "mok/mok.key")]
    assert not (tmp_path / "mok").exists() and not (tmp_path / "state").exists() and h.calls == []


def test_the_controllers_pair_is_taken_and_its_der_made_again(tmp_path, firmware):
    src = tmp_path / "ctl"
    subprocess.run([str(KEYGEN), str(src), "fleet key", "30"], check=True, capture_output=True)
    pem, key = (src / "mok.pem").read_bytes(), (src / "mok.key").read_bytes()
    p = params(tmp_path, controller_cert=base64.b64encode(pem).decode(), controller_key=base64.b64encode(key).decode())
    r = M.run(Module(), p, Host())
    d = tmp_path / "mok"
    assert r["source"] == "controller" and r["key_path"] == str(d / "controller.key")
    assert (d / "controller.der").read_bytes() == (src / "mok.der").read_bytes()  # PEM converted to DER
    assert (d / "controller.key").read_bytes() == key and oct((d / "controller.key").stat().st_mode & 0o777) == "0o600"
    (d / "controller.der").write_bytes(b"changed on the host")
    r = M.run(Module(), p, Host())
    assert r["changes"] == ["wrote %s" % (d / "controller.der")]
    assert (d / "controller.der").read_bytes() == (src / "mok.der").read_bytes()


def test_signing_on_the_controller_leaves_only_the_certificate_on_the_host(tmp_path, firmware):
    """An earlier run kept the controller's key on the host (key source controller) and pointed DKMS at it: with
    signing on the controller the key and the drop-in go, the certificate stays, and nothing signs here."""
    src = tmp_path / "ctl"
    subprocess.run([str(KEYGEN), str(src), "fleet key", "30"], check=True, capture_output=True)
    pem, key = (src / "mok.pem").read_bytes(), (src / "mok.key").read_bytes()
    (tmp_path / "etc/dkms").mkdir(parents=True)
    (tmp_path / "etc/dkms/framework.conf").write_text("# the package's\n")
    cert = base64.b64encode(pem).decode()
    M.run(Module(), params(tmp_path, controller_cert=cert, controller_key=base64.b64encode(key).decode()), Host())
    d, dropin = tmp_path / "mok", tmp_path / "etc/dkms/framework.conf.d/gdrcopy-ansible.conf"
    assert (d / "controller.key").exists() and dropin.exists()
    p = params(tmp_path, controller_cert=cert, sign_on_controller=True)
    r = M.run(Module(), p, Host())
    assert r["source"] == "controller" and r["key_path"] == "" and r["cert_path"] == str(d / "controller.der")
    assert r["changes"] == ["removed %s (the controller signs)" % (d / "controller.key"),
                            "removed %s (the key is not on this host)" % dropin]
    assert not (d / "controller.key").exists() and not dropin.exists()
    assert (d / "controller.der").read_bytes() == (src / "mok.der").read_bytes()
    assert not [f for f in d.rglob("*") if f.is_file() and b"PRIVATE KEY" in f.read_bytes()]
    assert M.run(Module(), p, Host())["changed"] is False
    with pytest.raises(M.Failed, match="never its key"):
        M.run(Module(), dict(p, controller_key=base64.b64encode(key).decode()), Host())


def test_an_enrolled_host_pair_signs_and_nothing_is_made(tmp_path, firmware):
    pair = {"key": str(tmp_path / "dkms/mok.key"), "cert": str(tmp_path / "dkms/mok.pub")}
    subprocess.run([str(KEYGEN), str(tmp_path / "dkms"), "dkms key", "30"], check=True, capture_output=True)
    os.rename(tmp_path / "dkms/mok.der", pair["cert"])
    firmware.update(enabled=True, states={pair["cert"]: "enrolled"})
    r = M.run(Module(), params(tmp_path, host_key_paths=[pair]), Host())
    assert r["source"] == "enrolled" and r["key_path"] == pair["key"] and r["signer"]["state"] == "enrolled"
    assert not (tmp_path / "mok").exists() and not r["enrollment_pending"]


def test_dkms_is_pointed_at_the_same_pair(tmp_path, firmware):
    (tmp_path / "etc/dkms").mkdir(parents=True)
    (tmp_path / "etc/dkms/framework.conf").write_text("# the package's\n")
    r = M.run(Module(), params(tmp_path), Host())
    dropin = tmp_path / "etc/dkms/framework.conf.d/gdrcopy-ansible.conf"
    assert "wrote %s" % dropin in r["changes"]
    assert "mok_signing_key=%s/mok/mok.key\n" % tmp_path in dropin.read_text()
    assert M.run(Module(), params(tmp_path, dkms=False), Host())["changes"] == []


def test_the_chosen_certificate_is_read_once_when_the_call_leaves_it_as_it_was(tmp_path, firmware, monkeypatch):
    M.run(Module(), params(tmp_path), Host())  # the key exists from now on
    reads = []
    real = M.F.cert_mok_state
    monkeypatch.setattr(M.F, "cert_mok_state", lambda h, cert, efi: reads.append(cert) or real(h, cert, efi))
    r = M.run(Module(), params(tmp_path), Host())
    assert reads == [] and r["signer"]["state"] == "not_enrolled"  # the probe's answer, not a second mokutil call


def test_the_helpers_are_written_first_once_and_after_the_refusals(tmp_path, firmware):
    helper = {"dest": str(tmp_path / "libexec/mok-sign"), "content": "#!/bin/sh\necho signed\n", "mode": "0755"}
    firmware["enabled"] = True
    with pytest.raises(M.Failed, match="mok_signing_enrollment_password is empty"):
        M.run(Module(), params(tmp_path, helpers=[helper]), Host())
    assert not (tmp_path / "libexec").exists()
    firmware["enabled"] = False
    r = M.run(Module(check_mode=True), params(tmp_path, helpers=[helper]), Host())
    assert r["changes"][0] == "wrote " + helper["dest"] and not (tmp_path / "libexec").exists()
    r = M.run(Module(), params(tmp_path, helpers=[helper]), Host())
    assert r["changes"][0] == "wrote " + helper["dest"]
    assert (tmp_path / "libexec/mok-sign").read_text() == helper["content"]
    assert oct((tmp_path / "libexec/mok-sign").stat().st_mode & 0o777) == "0o755"
    assert M.run(Module(), params(tmp_path, helpers=[helper]), Host())["changed"] is False
    with pytest.raises(M.Failed, match="helpers: relative wants an absolute path"):
        M.run(Module(), params(tmp_path, helpers=[dict(helper, dest="relative")]), Host())


class RotatingHost(Host):
    """Host whose mokutil also answers --list-delete (the serials waiting for deletion) and records --delete."""

    def __init__(self):
        Host.__init__(self)
        self.delete_list = ""

    def live_tool(self, name):
        return self.tool(name)

    @staticmethod
    def path(p):
        return p

    @staticmethod
    def read(p):
        try:
            with open(p) as f:
                return f.read()
        except (IOError, OSError):
            return None

    @staticmethod
    def glob(pattern):
        import glob
        return sorted(glob.glob(pattern))

    def run(self, argv):
        if os.path.basename(argv[0]) == "mokutil" and argv[1] == "--list-delete":
            self.calls.append(argv)
            return 0, self.delete_list, ""
        return Host.run(self, argv)


def test_a_key_rotation_keeps_the_old_signature_until_the_new_key_is_enrolled_then_offers_the_old_ones_deletion(
        tmp_path, firmware, monkeypatch):
    """Generated key G signs and is enrolled; the fleet moves to the controller's key C (signing on the controller):
    C is imported and the signer link stays at G while C waits (the gdrcopy role keeps G's modules); once C is
    enrolled the link moves to C and G is recorded as replaced, kept while a module is signed by it, then offered,
    then (delete_replaced) its deletion requested, then dropped once MokManager deleted it."""
    firmware["enabled"] = True
    monkeypatch.setattr(M, "REPLACED", str(tmp_path / "state/mok-replaced.json"))
    signed_by = {"serial": None}  # which serial the installed gdrdrv is signed by
    monkeypatch.setattr(M.F, "kernel_facts", lambda h, serial: {"installed": [
        {"release": "6.1.0-50-amd64", "gdrdrv_modules": [{"ours": bool(serial) and serial == signed_by["serial"]}]}]})
    h = RotatingHost()
    g = str(tmp_path / "mok/mok.der")
    M.run(Module(), params(tmp_path, enrollment_password="Rotation-pw-4711"), h)
    firmware["states"][g] = "enrolled"
    serial_g = M.F.certificate_facts(h, g)[0]
    signed_by["serial"] = serial_g
    link = tmp_path / "state/mok-signer.der"
    assert os.readlink(link) == g
    src = tmp_path / "ctl"
    subprocess.run([str(KEYGEN), str(src), "fleet key", "30"], check=True, capture_output=True)
    c = str(tmp_path / "mok/controller.der")
    ctl = params(tmp_path, controller_cert=base64.b64encode((src / "mok.pem").read_bytes()).decode(),
                 sign_on_controller=True, enrollment_password="Rotation-pw-4711")
    r = M.run(Module(), ctl, h)
    assert r["rotation"] == {"from": g, "to": c, "phase": "pending"}
    assert os.readlink(link) == g and r["replaced"] is None  # the installed modules are still G's
    assert "imported %s for enrollment" % c in r["changes"]
    assert "is kept (it still loads) until the new key is enrolled" in r["msg"]
    # G's private half goes with the move: no key the firmware trusts stays on a host where the controller signs
    assert "removed %s (the controller signs)" % (tmp_path / "mok/mok.key") in r["changes"]
    assert not (tmp_path / "mok/mok.key").exists() and os.path.exists(g)
    firmware["states"][c] = "enrolled"  # the operator confirmed C in MokManager
    r = M.run(Module(), ctl, h)
    assert r["rotation"] == {"from": g, "to": c, "phase": "done"} and os.readlink(link) == c
    assert json.loads((tmp_path / "state/mok-replaced.json").read_text()) == {"cert": g, "serial": serial_g}
    assert r["replaced"]["step"] == "in use" and r["replaced"]["in_use"] == ["6.1.0-50-amd64"]
    signed_by["serial"] = "C"  # the gdrcopy role re-signed every module with C
    # but DKMS signed the NVIDIA driver with G while this role pointed it there: G stays in use for it
    dkms = tmp_path / "lib/modules/6.1.0-50-amd64/updates/dkms"
    dkms.mkdir(parents=True)
    (dkms / "nvidia.ko").write_bytes(b"\x7fELF")
    monkeypatch.setattr(M.F, "module_signature", lambda h, path, serial: {"ours": serial == serial_g})
    r = M.run(Module(), dict(ctl, delete_replaced=True), h)
    assert r["replaced"]["step"] == "in use" and len(r["replaced"]["in_use"]) == 1
    assert r["replaced"]["in_use"][0].endswith("(nvidia.ko)")
    assert not [call for call in h.calls if "--delete" in call]
    (dkms / "nvidia.ko").unlink()  # DKMS rebuilt it with its own key
    r = M.run(Module(), ctl, h)
    assert r["rotation"] is None and r["replaced"]["step"] == "offer"
    assert "mok_signing_delete_replaced: true (or mokutil --delete %s)" % g in r["msg"]
    assert not [call for call in h.calls if "--delete" in call]
    r = M.run(Module(), dict(ctl, delete_replaced=True), h)
    deletes = [call for call in h.calls if "--delete" in call]
    assert r["replaced"]["step"] == "request" and deletes[0][1:4] == ["--delete", g, "--hash-file"]
    assert not any("Rotation-pw-4711" in arg for call in h.calls for arg in call)
    h.delete_list = "[key 1]\nSHA1 Fingerprint: 00\n    Serial Number:\n        %s\n" % serial_g
    r = M.run(Module(), dict(ctl, delete_replaced=True), h)
    assert r["replaced"]["step"] == "pending" and len([c_ for c_ in h.calls if "--delete" in c_]) == 1
    firmware["states"][g] = "not_enrolled"  # MokManager deleted it at the boot
    r = M.run(Module(), dict(ctl, delete_replaced=True), h)
    assert r["replaced"]["step"] == "gone" and not (tmp_path / "state/mok-replaced.json").exists()
    assert M.run(Module(), dict(ctl, delete_replaced=True), h)["replaced"] is None


def test_a_new_controller_certificate_under_the_same_name_is_a_rotation_too(tmp_path, firmware, monkeypatch):
    """The fleet moves from controller key C1 to C2: both land at <key_dir>/controller.der. C1's certificate is kept
    (replaced-<sha12>.der), the link stays on it and the modules it signed are held while C2 waits; once C2 is
    enrolled, C1's copy is recorded as replaced (what its deletion will name)."""
    import hashlib
    firmware["enabled"] = True
    monkeypatch.setattr(M, "REPLACED", str(tmp_path / "state/mok-replaced.json"))
    monkeypatch.setattr(M.F, "kernel_facts", lambda h, serial: {"installed": []})
    by_content = {}  # the firmware knows certificates by what they are, not by where a host keeps them

    def state(h, cert, efi):
        data = Path(cert).read_bytes() if os.path.exists(cert) else b""
        return cand(cert, by_content.get(hashlib.sha256(data).hexdigest(), "not_enrolled"), bool(data))

    monkeypatch.setattr(M.F, "cert_mok_state", state)
    monkeypatch.setattr(M.F, "secure_boot_facts", lambda h, mok, candidates: {
        "efi": True, "enabled": True, "candidates": [state(h, c, True) for c in candidates]})
    keys = {}
    for name in ("c1", "c2"):
        subprocess.run([str(KEYGEN), str(tmp_path / name), "fleet key " + name, "30"], check=True, capture_output=True)
        keys[name] = (base64.b64encode((tmp_path / name / "mok.pem").read_bytes()).decode(),
                      hashlib.sha256((tmp_path / name / "mok.der").read_bytes()).hexdigest())
    h, link, c = RotatingHost(), tmp_path / "state/mok-signer.der", str(tmp_path / "mok/controller.der")
    ctl = params(tmp_path, controller_cert=keys["c1"][0], sign_on_controller=True, enrollment_password="pw")
    M.run(Module(), ctl, h)
    by_content[keys["c1"][1]] = "enrolled"
    assert M.run(Module(), ctl, h)["rotation"] is None and os.readlink(link) == c
    ctl2 = dict(ctl, controller_cert=keys["c2"][0])
    r = M.run(Module(), ctl2, h)
    kept = str(tmp_path / "mok" / ("replaced-%s.der" % keys["c1"][1][:12]))
    assert "kept the certificate %s replaced as %s" % (c, kept) in r["changes"]
    assert Path(kept).read_bytes() == (tmp_path / "c1" / "mok.der").read_bytes()
    assert r["rotation"] == {"from": kept, "to": c, "phase": "pending"} and os.readlink(link) == kept
    assert M.run(Module(), ctl2, h)["rotation"]["phase"] == "pending" and os.readlink(link) == kept  # a rerun
    by_content[keys["c2"][1]] = "enrolled"  # the operator enrolled C2
    r = M.run(Module(), ctl2, h)
    assert r["rotation"] == {"from": kept, "to": c, "phase": "done"} and os.readlink(link) == c
    assert json.loads((tmp_path / "state/mok-replaced.json").read_text())["cert"] == kept
