"""What the secureboot scenario proves: after the key went through MokManager (side_effect), gdrdrv signed by it
loads at boot under Secure Boot, lockdown and sig_enforce, on the other installed kernel too (the VM runs it now),
while modules that are unsigned or signed by another key are refused; and no secret reached the play output."""

import json
import os
import re
from pathlib import Path

import pytest

LIBEXEC = "/usr/local/libexec/gdrcopy-ansible"
KEY_DIR = "/var/lib/gdrcopy-ansible/mok"
CN = "gdrcopy-ansible module signing key"
REJECTED = ("Key was rejected by service", "Required key not available")


def installed_kernels(host):
    return sorted(f.removeprefix("vmlinuz-") for f in host.file("/boot").listdir() if f.startswith("vmlinuz-"))


def serial_of(host, cert):
    text = host.check_output(f"openssl x509 -inform DER -in {cert} -noout -serial")
    return text.split("=", 1)[1].strip().upper().lstrip("0")


def test_secure_boot_lockdown_and_enforcement_are_on(host):
    assert "SecureBoot enabled" in host.check_output("mokutil --sb-state")
    assert "[integrity]" in host.file("/sys/kernel/security/lockdown").content_string
    assert host.file("/sys/module/module/parameters/sig_enforce").content_string.strip() == "Y"


def test_running_on_the_other_kernel_after_the_kernel_upgrade_reboot(host):
    default = host.check_output("readlink -f /boot/vmlinuz").removeprefix("/boot/vmlinuz-")
    assert host.check_output("uname -r") != default


def test_the_generated_key_is_enrolled_and_root_only(host):
    out = host.run(f"mokutil --test-key {KEY_DIR}/mok.der")
    assert "is already enrolled" in out.stdout + out.stderr
    assert host.run("mokutil --list-new").stdout.strip() == ""
    key = host.file(f"{KEY_DIR}/mok.key")
    assert key.user == "root" and key.mode == 0o600
    assert host.file(KEY_DIR).mode == 0o700
    assert CN in host.check_output("dmesg | grep 'Loaded X.509 cert'")


@pytest.mark.parametrize("kernel_index", [0, 1])
def test_gdrdrv_is_signed_by_our_key_for_every_kernel(host, kernel_index):
    kernel = installed_kernels(host)[kernel_index]
    ko = f"/lib/modules/{kernel}/updates/gdrcopy/gdrdrv.ko"
    assert host.check_output(f"modinfo -F signer {ko}") == CN
    assert host.check_output(f"modinfo -F sig_key {ko}").replace(":", "").upper().lstrip("0") == serial_of(
        host, f"{KEY_DIR}/mok.der")
    # one signature: the signing helper (check mode) finds nothing to do
    out = json.loads(host.check_output(
        f"{LIBEXEC}/mok-sign --check --key {KEY_DIR}/mok.key --cert {KEY_DIR}/mok.der {kernel}={ko}"))
    assert [r["action"] for r in out["results"]] == ["unchanged"]


def test_signed_gdrdrv_loaded_at_boot_with_its_device(host):
    modules = host.check_output("cut -d' ' -f1 /proc/modules").split()
    assert modules.index("gdrdrv") < modules.index("nvidia"), "/proc/modules lists the newest first"
    assert "Finished gdrcopy-ansible.service" in host.check_output("journalctl -b -u gdrcopy-ansible.service -o cat")
    assert host.run("test -c /dev/gdrdrv").rc == 0
    dev = host.file("/dev/gdrdrv")
    assert dev.mode == 0o660 and dev.group == "gdrcopy"
    # the kernel was not tainted by an unsigned module
    assert "module verification failed" not in host.check_output("dmesg")


def test_smoke_check_passes_for_a_member_of_the_group(host):
    host.run_test("usermod -aG gdrcopy gdrtest-member")
    r = host.run(f"runuser -u gdrtest-member -- {LIBEXEC}/gdrcopy-smoke")
    assert r.rc == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["passed"]


@pytest.fixture(scope="module")
def module_copies(host):
    """Copies of the installed gdrdrv: one stripped of its signature, one signed by a key nobody enrolled."""
    kernel = host.check_output("uname -r")
    ko = f"/lib/modules/{kernel}/updates/gdrcopy/gdrdrv.ko"
    host.run_test(f"""set -e; d=$(mktemp -d /tmp/sbneg.XXXXXX); cd $d
        python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(); n=struct.unpack(">I",d[-32:-28])[0]; \
open("unsigned.ko","wb").write(d[:len(d)-40-n])' {ko}
        openssl req -new -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=not-enrolled -outform DER \
            -keyout other.key -out other.der 2>/dev/null
        cp unsigned.ko other.ko
        /usr/src/linux-headers-{kernel}/scripts/sign-file sha256 other.key other.der other.ko
        ln -sfn $d /tmp/sbneg""")
    return "/tmp/sbneg"


@pytest.mark.parametrize("name, dmesg", [
    ("unsigned.ko", "Loading of unsigned module is rejected"),
    ("other.ko", "Loading of module with unavailable key is rejected"),
])
def test_the_kernel_refuses_gdrdrv_unsigned_or_signed_by_another_key(host, module_copies, name, dmesg):
    assert host.run(f"tail -c 28 {module_copies}/{name} | grep -q 'Module signature appended'").rc == (
        1 if name == "unsigned.ko" else 0)
    r = host.run(f"insmod {module_copies}/{name}")
    assert r.rc != 0
    assert any(text in r.stderr for text in REJECTED), r.stderr
    assert dmesg in host.check_output("dmesg | tail -n 20")


def play_output(log: Path) -> str:
    """The log of every ansible-playbook run, without the inventory listings molecule's verifier logs there
    (`ansible-inventory --list` prints the test inventory, which holds the test password in clear)."""
    entries = re.split(r"(?m)^(?=\d{4}-\d\d-\d\d [\d:,]+ p=\d+ u=\S+ n=\S+ \w+\| )", log.read_text(errors="replace"))
    return "".join(e for e in entries if not re.match(r"[^|]*\| \{\s*\"_meta\"", e))


def test_no_secret_in_the_play_output(host):
    log = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "ansible.log"
    text = play_output(log)
    key_lines = host.file(f"{KEY_DIR}/mok.key").content_string.splitlines()[1:-1]
    assert len(key_lines) > 10 and not any(line in text for line in key_lines)
    assert "TASK [gpufleet.gdrcopy.mok_signing : " in text, "the log holds the runs of the role"
    assert "gdrcopy-Test-MOK-pw-4711" not in text
    assert not re.search(r"-----BEGIN [A-Z ]*PRIVATE KEY-----", text)
    assert "$6$" not in text, "the password hash must not show either"
