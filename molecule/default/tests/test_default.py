"""What the default scenario proves on the VM: a real Debian kernel, the harness's kernels and stand-ins, and
what site.yml did. The verifier runs after converge, idempotence and two reboots (the second into the other
installed kernel, with no rerun in between). The trixie scenario runs these tests too (Debian 13, but the check-mode
test: it runs no --check)."""

import json
import os
import re
from pathlib import Path

import pytest

LIBEXEC = "/usr/local/libexec/gdrcopy-ansible"
BUILDS_LOG = "/var/lib/gdrcopy-ansible/build/builds.log"


@pytest.fixture(scope="module")
def source():
    """What prepare packed for the roles (tests/harness/pack_source.py): version, url, sha256, kind."""
    path = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "source" / "source.json"
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def api_version(source):
    return ".".join(source["version"].split(".")[:2])


def installed_kernels(host):
    return sorted(f.removeprefix("vmlinuz-") for f in host.file("/boot").listdir() if f.startswith("vmlinuz-"))


def nvidia_source_version(host):
    trees = [d for d in host.file("/usr/src").listdir() if re.fullmatch(r"nvidia-current-\d+\.\d+(\.\d+)?", d)]
    assert len(trees) == 1, trees
    return trees[0].removeprefix("nvidia-current-")


def test_runs_a_real_debian_kernel(host):
    release = host.check_output("uname -r")
    # bookworm: 6.1.0-<abi>-amd64; trixie: 6.12.<n>+deb13[.<rebuild>]-amd64
    assert re.fullmatch(r"\d+\.\d+\.\d+(-\d+|\+deb\d+(\.\d+)?)-amd64", release), release
    assert "Debian" in host.file("/proc/version").content_string
    assert release in installed_kernels(host)
    assert host.package(f"linux-image-{release}").is_installed


def test_two_kernels_are_installed_with_headers(host):
    kernels = installed_kernels(host)
    assert len(kernels) >= 2, kernels
    for k in kernels:
        assert host.package(f"linux-headers-{k}").is_installed, k
        assert host.file(f"/lib/modules/{k}/build/Makefile").exists, k


@pytest.mark.parametrize("kernel_index", [0, 1])
def test_standins_are_built_for_every_kernel(host, kernel_index):
    kernel = installed_kernels(host)[kernel_index]
    for name in ("nvidia", "nvidia-peermem"):
        out = host.check_output(f"modinfo -k {kernel} -F filename {name}")
        assert out.endswith(f"/extra/gdrcopy-test-standins/{name}.ko"), out


def test_nvidia_standin_loads_with_modprobe_and_carries_the_source_version(host):
    host.run_test("modprobe nvidia")
    version = nvidia_source_version(host)
    assert host.file("/sys/module/nvidia/version").content_string.strip() == version
    assert version in host.file("/proc/driver/nvidia/version").content_string
    # every function of the real nv-p2p.h is exported by the loaded stand-in
    exported = set(host.check_output("awk '$4 == \"[nvidia]\" {print $3}' /proc/kallsyms").split())
    header = host.file(f"/usr/src/nvidia-current-{version}/nvidia/nv-p2p.h").content_string
    declared = set(re.findall(r"^(?:int|void)\s+(nvidia_p2p_\w+)\s*\(", header, re.M))
    assert declared and declared <= exported, declared - exported


def test_nvidia_peermem_standin_loads_after_nvidia(host):
    host.run_test("modprobe nvidia-peermem")
    assert host.file("/sys/module/nvidia_peermem").is_directory
    assert host.file("/sys/module/nvidia/holders/nvidia_peermem").exists


def test_library_is_resolved_by_ldconfig(host, source):
    out = host.check_output("ldconfig -p")
    paths = re.findall(r"libgdrapi\.so\.2 .*=> (\S+)", out)
    assert paths == ["/opt/gdrcopy/current/lib/libgdrapi.so.2"], out
    assert host.file("/opt/gdrcopy/current").linked_to == f"/opt/gdrcopy/{source['version']}"
    assert host.file(f"/opt/gdrcopy/{source['version']}/include/gdrapi.h").is_file


def test_gdrdrv_is_installed_for_every_kernel(host, api_version):
    kernels = installed_kernels(host)
    assert len(kernels) >= 2
    for k in kernels:
        ko = host.file(f"/lib/modules/{k}/updates/gdrcopy/gdrdrv.ko")
        assert ko.is_file and ko.mode == 0o644, k
        assert host.check_output(f"modinfo -k {k} -F filename gdrdrv") == ko.path
        assert host.check_output(f"modinfo -k {k} -F version gdrdrv") == api_version
        # built against this kernel: vermagic names it
        assert host.check_output(f"modinfo -k {k} -F vermagic gdrdrv").split()[0] == k
    # no half-written or leftover build dirs
    assert host.run("ls -d /var/lib/gdrcopy-ansible/build/*/*/*.new /var/lib/gdrcopy-ansible/build/*/*.new").rc != 0


def test_gdrdrv_is_signed_by_the_generated_key_for_every_kernel(host):
    """No Secure Boot here: modules are signed anyway (turning Secure Boot on later just works), once."""
    mok = "/var/lib/gdrcopy-ansible/mok"
    assert host.file(f"{mok}/mok.key").mode == 0o600 and host.file(mok).mode == 0o700
    assert host.file("/var/lib/gdrcopy-ansible/mok-signer.der").linked_to == f"{mok}/mok.der"
    serial = host.check_output(f"openssl x509 -inform DER -in {mok}/mok.der -noout -serial").split("=")[1]
    for k in installed_kernels(host):
        ko = f"/lib/modules/{k}/updates/gdrcopy/gdrdrv.ko"
        assert host.check_output(f"modinfo -F signer {ko}") == "gdrcopy-ansible module signing key", k
        assert host.check_output(f"modinfo -F sig_key {ko}").replace(":", "").lstrip("0") == serial.lstrip("0"), k
        assert host.check_output(f"modinfo -F sig_hashalgo {ko}") == "sha256", k
        check = json.loads(host.check_output(
            f"{LIBEXEC}/mok-sign --check --key {mok}/mok.key --cert {mok}/mok.der {k}={ko}"))
        assert [r["action"] for r in check["results"]] == ["unchanged"], "signed exactly once, by our key"


def test_running_on_the_other_kernel_after_the_kernel_upgrade_reboot(host):
    kernels = installed_kernels(host)
    default = host.check_output("readlink -f /boot/vmlinuz").removeprefix("/boot/vmlinuz-")
    assert host.check_output("uname -r") in kernels
    assert host.check_output("uname -r") != default, "the side effect boots the non-default kernel"


def test_chain_loaded_at_boot_in_order_without_a_rerun(host):
    modules = host.check_output("cut -d' ' -f1 /proc/modules").split()
    assert "nvidia" in modules and "nvidia_peermem" in modules and "gdrdrv" in modules
    # /proc/modules lists the newest first: nvidia, then nvidia-peermem, then gdrdrv
    assert modules.index("gdrdrv") < modules.index("nvidia_peermem") < modules.index("nvidia"), modules
    unit = host.file("/etc/systemd/system/gdrcopy-ansible.service").content_string
    assert re.findall(r"^ExecStart=(.*)$", unit, re.M)[:3] == [
        "/sbin/modprobe nvidia", "-/sbin/modprobe nvidia-peermem", "/sbin/modprobe gdrdrv"]
    assert host.file("/sys/module/gdrdrv").is_directory
    assert "gdrdrv" in host.file("/sys/module/nvidia/holders").listdir()
    assert host.service("gdrcopy-ansible.service").is_enabled
    assert host.run("systemctl is-active gdrcopy-ansible.service").stdout.strip() == "active"
    assert "Finished gdrcopy-ansible.service" in host.check_output("journalctl -b -u gdrcopy-ansible.service -o cat")


def test_device_node_has_the_configured_mode_group_and_major(host):
    dev = host.file("/dev/gdrdrv")
    assert dev.exists and host.run("test -c /dev/gdrdrv").rc == 0
    assert dev.mode == 0o660
    assert dev.group == "gdrcopy" and dev.user == "root"
    major = int(host.check_output("awk '$2 == \"gdrdrv\" {print $1}' /proc/devices"))
    assert host.check_output("stat -c '%t:%T' /dev/gdrdrv") == f"{major:x}:0"


def test_gdrdrv_runs_with_the_releases_defaults_and_no_option_is_written(host):
    """gdrcopy_module_params is {} by default: the modprobe.d file names no option (so a release whose gdrdrv lacks
    one never logs "unknown parameter"), and gdrdrv reports 2.6's built-in defaults (the release table's row)."""
    params = host.file("/proc/driver/gdrdrv/params").content_string
    assert "dbg_enabled: 0" in params and "info_enabled: 0" in params
    assert re.search(r"^Use persistent mapping: (yes|1)$", params, re.M), params
    conf = host.file("/etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf")
    assert conf.contains("^install gdrdrv ") and not conf.contains("^options")
    assert "unknown parameter" not in host.check_output("journalctl -k -b --no-pager | grep gdrdrv || true")


@pytest.fixture(scope="module")
def member(host):
    host.run_test("usermod -aG gdrcopy gdrtest-member")
    return "gdrtest-member"


def test_smoke_check_passes_for_a_member_of_the_group(host, member, api_version):
    r = host.run(f"runuser -u {member} -- {LIBEXEC}/gdrcopy-smoke --expect {api_version}")
    assert r.rc == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["passed"] and result["runtime_version"] == result["driver_version"] == api_version


def test_smoke_check_fails_for_a_user_outside_the_group(host, api_version):
    r = host.run(f"runuser -u gdrtest-outsider -- {LIBEXEC}/gdrcopy-smoke --expect {api_version}")
    assert r.rc == 1
    assert "not accessible" in json.loads(r.stdout)["msg"]


def test_a_manual_reload_makes_the_node_again(host):
    """gdrdrv makes no device: the modprobe.d install line must make it after a plain `modprobe gdrdrv`."""
    host.run_test("rmmod gdrdrv && rm -f /dev/gdrdrv")
    host.run_test("modprobe gdrdrv")
    dev = host.file("/dev/gdrdrv")
    assert host.run("test -c /dev/gdrdrv").rc == 0 and dev.mode == 0o660 and dev.group == "gdrcopy"


def test_converge_compiled_once_per_component_and_idempotence_compiled_nothing(host):
    """builds.log has one line per compile: lib once, gdrdrv once per kernel, none in the reruns."""
    lines = host.file(BUILDS_LOG).content_string.splitlines()
    kernels = installed_kernels(host)
    assert len(lines) == 1 + len(kernels), lines
    assert sum(" make lib" in ln for ln in lines) == 1
    for k in kernels:
        assert sum(f"KVER={k} " in ln for ln in lines) == 1, k


def test_check_mode_on_the_fresh_vm_changed_nothing(host):
    before_check = host.file("/var/lib/gdrcopy-test/before-check.txt").content_string
    before_converge = host.file("/var/lib/gdrcopy-test/before-converge.txt").content_string
    assert before_check and before_check == before_converge
    assert "/opt/gdrcopy" not in before_converge
