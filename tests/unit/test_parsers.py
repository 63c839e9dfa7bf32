"""Unit tests of module_utils/gdrcopy_parsers.py with literal text and real captured text."""

from pathlib import Path

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_verdict as V

H200 = "hosts/h200-vm-modules-disabled"


def test_nvidia_proc_version_open_from_the_h200_capture(host_fixture):
    text = host_fixture(H200, "fs/proc/driver/nvidia/version")
    assert P.parse_nvidia_proc_version(text) == {"version": "580.159.04", "flavor": "open"}


def test_nvidia_proc_version_proprietary():
    text = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03  Release Build  (dvs-builder@U16-I3-B03-4-1)"
            "  Wed Jul 30 17:38:58 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n")
    assert P.parse_nvidia_proc_version(text) == {"version": "535.261.03", "flavor": "proprietary"}


@pytest.mark.parametrize("text", ["", "garbage\n", "NVRM version: no number here\n"])
def test_nvidia_proc_version_unparseable_is_empty(text):
    assert P.parse_nvidia_proc_version(text) == {}


def test_proc_devices_of_the_h200_capture_has_no_gdrdrv(host_fixture):
    devices = P.parse_proc_devices(host_fixture(H200, "fs/proc/devices"))
    assert devices["char"]["nvidia"] == 195
    assert devices["char"]["nvidia-uvm"] == 238
    assert "gdrdrv" not in devices["char"]
    assert devices["block"]["virtblk"] == 254


def test_proc_devices_dynamic_major():
    assert P.parse_proc_devices("Character devices:\n  1 mem\n509 gdrdrv\n\nBlock devices:\n  7 loop\n")["char"] == {
        "mem": 1, "gdrdrv": 509}


def test_proc_modules_of_the_h200_capture(host_fixture):
    mods = P.parse_proc_modules(host_fixture(H200, "fs/proc/modules"))
    assert set(mods) == {"nvidia_uvm", "nvidia"}
    assert mods["nvidia"]["state"] == "Live" and mods["nvidia"]["taints"] == "O"


def test_proc_modules_used_by_and_refcount():
    text = ("gdrdrv 24576 2 - Live 0xffffffffc0a00000 (OE)\n"
            "nvidia 16384 2 nvidia_peermem,gdrdrv, Live 0xffffffffc09f0000 (POE)\n")
    mods = P.parse_proc_modules(text)
    assert mods["nvidia"]["used_by"] == ["nvidia_peermem", "gdrdrv"]
    assert mods["gdrdrv"] == {"size": 24576, "refcount": 2, "used_by": [], "state": "Live", "taints": "OE"}


def test_gdrdrv_params():
    text = "Version: 2.6\nnvidia flavor: open\nuse persistent mapping: 1\ndbg traces: 0\ninfo traces: 1\n"
    p = P.parse_gdrdrv_params(text)
    assert (p["version"], p["flavor"], p["use_persistent_mapping"], p["dbg_enabled"], p["info_enabled"]) == (
        "2.6", "open", 1, 0, 1)


def test_gdrdrv_params_upstream_2_6_format():
    text = ("Version: 2.6\nBuilt for NVIDIA driver flavor: opensource\nUse persistent mapping: yes\n"
            "dbg_enabled: 0\ninfo_enabled: 0\n")
    p = P.parse_gdrdrv_params(text)
    assert (p["version"], p["flavor"], p["use_persistent_mapping"], p["dbg_enabled"], p["info_enabled"]) == (
        "2.6", "open", 1, 0, 0)
    assert P.parse_gdrdrv_params(text.replace("opensource", "proprietary").replace("yes", "no"))["flavor"] == (
        "proprietary")


def test_gdrdrv_params_absent():
    assert P.parse_gdrdrv_params("") == {"raw": {}}


@pytest.mark.parametrize("path,version", [
    ("/usr/src/nvidia-current-535.261.03/nvidia", "535.261.03"),
    ("/usr/src/nvidia-current-open-535.261.03/nvidia", "535.261.03"),
    ("/usr/src/nvidia-570.86.15", "570.86.15"),
    ("/usr/src/kernel-modules/nvidia-550.54/nvidia", "550.54"),
    ("/usr/src/linux-headers-6.1.0-50-amd64", ""),
])
def test_nvidia_source_version_from_path(path, version):
    assert P.nvidia_source_version_from_path(path) == version


def test_dkms_conf_and_license():
    assert P.parse_dkms_conf_version('PACKAGE_NAME="nvidia-current"\nPACKAGE_VERSION="535.261.03"\n') == "535.261.03"
    assert P.parse_module_license('MODULE_LICENSE("NVIDIA");') == "NVIDIA"
    assert P.flavor_from_license("NVIDIA") == "proprietary"
    assert P.flavor_from_license("Dual MIT/GPL") == "open"
    assert P.flavor_from_license("") == ""


TREES = [
    {"dir": "/usr/src/nvidia-current-535.261.03/nvidia", "version": "535.261.03", "flavor": "proprietary"},
    {"dir": "/usr/src/nvidia-current-open-535.261.03/nvidia", "version": "535.261.03", "flavor": "open"},
    {"dir": "/usr/src/nvidia-550.163.01/nvidia", "version": "550.163.01", "flavor": "proprietary"},
]


@pytest.mark.parametrize("version,flavor,expected", [
    ("535.261.03", "open", TREES[1]["dir"]),
    ("535.261.03", "proprietary", TREES[0]["dir"]),
    ("550.163.01", "proprietary", TREES[2]["dir"]),
    ("550.163.01", "open", None),
    ("580.159.04", "open", None),
])
@pytest.mark.fault(4)
def test_choose_nvidia_source_matches_version_and_flavor(version, flavor, expected):
    tree, reason = P.choose_nvidia_source(TREES, version, flavor)
    assert (tree["dir"] if tree else None) == expected
    assert reason


@pytest.mark.fault(4)
def test_choose_nvidia_source_without_driver():
    assert P.choose_nvidia_source(TREES[:1], "", "")[0] == TREES[0]
    tree, reason = P.choose_nvidia_source(TREES, "", "")
    assert tree is None and "gdrcopy_nvidia_src_dir" in reason
    assert P.choose_nvidia_source([], "535.261.03", "open") == (None, "no NVIDIA kernel source tree (nv-p2p.h) was found")


def test_kconfig_of_the_h200_capture(host_fixture):
    conf = P.parse_kconfig(host_fixture(H200, "cmd/kconfig_subset.txt"))
    assert conf["CONFIG_MODULE_SIG_FORCE"] == "y"
    assert conf["CONFIG_MODVERSIONS"] == "n"


def test_kernel_release_order():
    names = ["6.1.0-50-amd64", "6.1.0-9-amd64", "6.12.57+deb13-amd64", "modules.load", "6.1.0-47-amd64"]
    assert P.parse_kernel_release_dirs(names) == ["6.1.0-9-amd64", "6.1.0-47-amd64", "6.1.0-50-amd64",
                                                  "6.12.57+deb13-amd64"]


@pytest.mark.parametrize("given,expected", [("2.6", "2.6"), ("v2.4.1", "2.4"), ("2.5.2", "2.5"), ("main", "")])
def test_major_minor(given, expected):
    assert P.major_minor(given) == expected


def test_modules_dep_index():
    text = ("kernel/drivers/misc/gdrdrv.ko.xz:\nupdates/gdrcopy/gdrdrv.ko: extra/gdrcopy-test-standins/nvidia.ko\n"
            "extra/gdrcopy-test-standins/nvidia.ko:\nkernel/fs/gdrdrv2.ko:\nkernel/net/nvidia-peermem.ko.zst:\n"
            "kernel/misc/notamodule.o:\n\n")
    index = P.modules_dep_index(text)
    assert index["gdrdrv"] == ["kernel/drivers/misc/gdrdrv.ko.xz", "updates/gdrcopy/gdrdrv.ko"]
    assert index["nvidia"] == ["extra/gdrcopy-test-standins/nvidia.ko"]
    assert index["gdrdrv2"] == ["kernel/fs/gdrdrv2.ko"]
    assert index["nvidia-peermem"] == ["kernel/net/nvidia-peermem.ko.zst"]  # the file name: - and _ stay apart
    assert "nvidia_peermem" not in index and "notamodule" not in index
    assert P.modules_dep_index("") == {} and P.modules_dep_index(None) == {}


def test_kconfig_forms():
    text = ('CONFIG_A=y\n  CONFIG_B="sha512"\n# CONFIG_C is not set\n# CONFIG_D is not set here\n'
            "#CONFIG_E is not set\n# comment\nCONFIG_F\n# CONFIG_G-H is not set\n")
    assert P.parse_kconfig(text) == {"CONFIG_A": "y", "CONFIG_B": "sha512", "CONFIG_C": "n"}


# --- captures of the device run (tests/fixtures/hosts) ----------------------------------------------------------

DEVICE = Path(__file__).resolve().parents[1] / "fixtures" / "hosts" / "h200-device-gdrcopy-2.6-tests" / "cmd"


def device(name):
    """A cmd/NAME.txt capture of the device run -> (output, rc)."""
    lines = (DEVICE / f"{name}.txt").read_text().splitlines(keepends=True)
    return "".join(lines[:-1]), int(lines[-1].strip().removeprefix("__rc="))


def test_proc_version_release_of_the_h200_capture(host_fixture):
    assert P.parse_proc_version_release(host_fixture(H200, "fs/proc/version")) == "6.18.44-fc-v657-gpu"
    assert P.parse_proc_version_release("") == ""


def test_load_order_is_oldest_first():
    assert P.load_order(device("proc_modules")[0]) == ["nvidia", "nvidia_uvm"]
    text = "gdrdrv 1 0 - Live 0x0\nnvidia_peermem 1 0 - Live 0x0\nnvidia 1 2 gdrdrv,nvidia_peermem, Live 0x0\n"
    assert P.load_order(text) == ["nvidia", "nvidia_peermem", "gdrdrv"]


MODINFO = """filename:       /lib/modules/6.1.0-50-amd64/updates/gdrcopy/gdrdrv.ko
version:        2.6
description:    GDRCopy kernel-mode driver
srcversion:     8D2E1F5C0B1B3A4A6C7D8E9
depends:        nvidia
vermagic:       6.1.0-50-amd64 SMP preempt mod_unload modversions
sig_id:         PKCS#7
signer:         gdrcopy-ansible module signing key
sig_key:        1D:6A:3B:0C:55:E2:19:8F:40:21:7B:90:AA:01:CD:EF:12:34:56:78
sig_hashalgo:   sha256
signature:      30:64:02:30:4F:1A:6B:2C:93:4E:27:0A:61:D5:92:0C:5B:1E:48:7F:
\t\t2A:D0:8B:4C
parm:           dbg_enabled:enable debug tracing (int)
parm:           info_enabled:enable info tracing (int)
"""


def test_modinfo_fields_with_continuations_and_repeats():
    f = P.parse_modinfo(MODINFO)
    assert f["signer"] == "gdrcopy-ansible module signing key"
    assert f["sig_key"] == "1D:6A:3B:0C:55:E2:19:8F:40:21:7B:90:AA:01:CD:EF:12:34:56:78"
    assert f["signature"].endswith("48:7F:2A:D0:8B:4C")
    assert f["parm"] == "dbg_enabled:enable debug tracing (int)\ninfo_enabled:enable info tracing (int)"
    assert P.parse_modinfo("filename: /x.ko\nversion: 2.6\n") == {"filename": "/x.ko", "version": "2.6"}


def test_module_signature_trailer():
    assert P.has_module_signature(b"\x7fELF" + b"\x00" * 40 + b"~Module signature appended~\n") is True
    assert P.has_module_signature(b"\x7fELF unsigned") is False
    assert P.has_module_signature(None) is False


@pytest.mark.parametrize("given,expected", [
    ("1D:6A:3B:0C", "1D6A3B0C"), ("serial=1D6A3B0C", "1D6A3B0C"), ("0x1d6a3b0c", "1D6A3B0C"),
    ("00:1D:6A", "1D6A"), ("not hex", ""), ("", ""),
])
def test_normalize_serial(given, expected):
    assert P.normalize_serial(given) == expected


def test_openssl_subject():
    assert P.parse_openssl_subject("serial=1D6A\nsubject=CN = gdrcopy-ansible module signing key\n") == (
        "gdrcopy-ansible module signing key")
    assert P.parse_openssl_subject("subject=/O=Example/CN=Build key\n") == "Build key"
    assert P.parse_openssl_subject("subject=O = Example\n") == "O = Example"
    assert P.parse_openssl_subject("") == ""


# --- nvidia-smi, sysfs, procfs --------------------------------------------------------------------------------

def test_nvidia_smi_query_of_both_captures(host_fixture):
    for text in (host_fixture(H200, "cmd/nvidia_smi_query_csv.txt"), device("nvidia_smi_query_csv")[0]):
        rows = P.parse_nvidia_smi_query(text)
        assert rows == [{"index": 0, "name": "NVIDIA H200", "pci.bus_id": "00000000:00:06.0",
                         "driver_version": "580.159.04", "memory.total": 143771, "memory.used": 0,
                         "pcie.link.gen.current": 5, "pcie.link.gen.max": 5, "pcie.link.width.current": 16,
                         "pcie.link.width.max": 16}]


def test_nvidia_smi_query_rejects_an_error_and_keeps_na_as_none(host_fixture):
    assert P.parse_nvidia_smi_query(host_fixture(H200, "cmd/nvidia_smi_bar1_csv.txt")) == []
    text = "index, name, memory.total [MiB]\n0, Tesla T4, [N/A]\n"
    assert P.parse_nvidia_smi_query(text) == [{"index": 0, "name": "Tesla T4", "memory.total": None}]


def test_nvidia_smi_query_is_read_as_csv_so_a_quoted_comma_shifts_no_column():
    text = 'index, name, memory.total [MiB]\n0, "NVIDIA H200 NVL, 141GB", 143771 MiB\n\n1, x\n'
    assert P.parse_nvidia_smi_query(text) == [{"index": 0, "name": "NVIDIA H200 NVL, 141GB", "memory.total": 143771}]


def test_nvidia_smi_q_sections_of_the_full_h200_capture(host_fixture):
    q = P.parse_nvidia_smi_q(host_fixture(H200, "cmd/nvidia_smi_q.txt"))
    assert (q["driver_version"], q["cuda_version"]) == ("580.159.04", "13.0")
    gpu = q["gpus"]["00000000:00:06.0"]
    assert gpu["BAR1 Memory Usage"] == {"Total": "262144 MiB", "Used": "1 MiB", "Free": "262143 MiB"}
    assert gpu["FB Memory Usage"]["Total"] == "143771 MiB"
    assert P.mib(gpu["BAR1 Memory Usage"]["Total"]) == 262144 and P.mib("N/A") is None


def test_nvidia_smi_q_memory_of_the_device_run():
    q = P.parse_nvidia_smi_q(device("nvidia_smi_q_memory")[0])
    assert q["cuda_version"] == "13.0"
    assert list(q["gpus"]) == ["00000000:00:06.0"]
    assert q["gpus"]["00000000:00:06.0"]["BAR1 Memory Usage"]["Used"] == "1 MiB"


@pytest.mark.parametrize("given,expected", [
    ("00000000:00:06.0", "0000:00:06.0"), ("00000000:9A:00.0", "0000:9a:00.0"), ("00000001:17:00.1", "0001:17:00.1"),
    ("garbage", ""),
])
def test_smi_bus_to_sysfs(given, expected):
    assert P.smi_bus_to_sysfs(given) == expected


def test_link_speed_and_width_of_the_h200_capture(host_fixture):
    speed = P.parse_link_speed(host_fixture(H200, "fs/sys/bus/pci/devices/0000:00:06.0/current_link_speed"))
    assert speed == 32.0 and P.pcie_generation(speed) == 5
    assert P.parse_int(host_fixture(H200, "fs/sys/bus/pci/devices/0000:00:06.0/max_link_width")) == 16
    assert P.parse_int(host_fixture(H200, "fs/sys/bus/pci/devices/0000:00:06.0/numa_node")) == -1
    assert P.parse_link_speed("Unknown") is None and P.pcie_generation(None) is None
    assert P.parse_link_speed("8.0 GT/s PCIe") == 8.0 and P.pcie_generation(2.5) == 1
    assert P.parse_int("x", -1) == -1


def test_nvidia_gpu_information_of_the_h200_capture(host_fixture):
    info = P.parse_nvidia_gpu_information(host_fixture(H200, "fs/proc/driver/nvidia/gpus/0000:00:06.0/information"))
    assert (info["Model"], info["Bus Location"], info["Device Minor"]) == ("NVIDIA H200", "0000:00:06.0", "0")


# --- Secure Boot and MOK (texts from docs/SECURE-BOOT.md: What mokutil prints) ---------------------------------

@pytest.mark.parametrize("text,enabled,setup", [
    ("SecureBoot enabled\n", True, False),
    ("SecureBoot disabled\n", False, False),
    ("SecureBoot disabled\nPlatform is in Setup Mode\n", False, True),
    ("EFI variables are not supported on this system\n", None, False),
])
def test_mokutil_sb_state(text, enabled, setup):
    assert P.parse_mokutil_sb_state(text) == {"enabled": enabled, "setup_mode": setup}


def test_efivar_secure_boot():
    assert P.parse_efivar_secure_boot(b"\x06\x00\x00\x00\x01") is True
    assert P.parse_efivar_secure_boot(b"\x06\x00\x00\x00\x00") is False
    assert P.parse_efivar_secure_boot(b"\x06\x00") is None and P.parse_efivar_secure_boot(None) is None


@pytest.mark.parametrize("text,state", [
    ("/var/lib/gdrcopy-ansible/mok/mok.der is not enrolled\n", "not_enrolled"),
    ("/var/lib/gdrcopy-ansible/mok/mok.der is already enrolled\n", "enrolled"),
    ("SKIP: /var/lib/gdrcopy-ansible/mok/mok.der is already in the enrollment request\n", "pending"),
    ("/var/lib/gdrcopy-ansible/mok/mok.der is already in db\n", "in_db"),
    ("/var/lib/gdrcopy-ansible/mok/mok.der is blocked in dbx\n", "blocked"),
    ("/var/lib/gdrcopy-ansible/mok/mok.der is blocked in MokListX\n", "blocked"),
    ("Failed to open /nowhere.der\n", "unknown"),
])
@pytest.mark.fault(11)
def test_mokutil_test_key_reads_the_text(text, state):
    assert P.parse_mokutil_test_key(text) == state


def test_mokutil_list_new():
    text = ("[key 1]\nSHA1 Fingerprint: 3b:1f:aa\nCertificate:\n    Data:\n        Version: 3 (0x2)\n"
            "        Subject: CN = gdrcopy-ansible module signing key\n[key 2]\nSHA1 Fingerprint: 44:01\n")
    assert P.parse_mokutil_list_new(text) == ["gdrcopy-ansible module signing key", "key 2"]
    assert P.parse_mokutil_list_new("MokNew is empty\n") == []


# --- the DMA-BUF backend and the verdict -----------------------------------------------------------------------

@pytest.mark.parametrize("cuda,lib,ok,why", [
    ("13.0", "2.6", False, "CUDA driver 13.0 < 13.3"),
    ("13.3", "2.6", True, "CUDA driver 13.3 >= 13.3 and gdrcopy 2.6 >= 2.6"),
    ("13.4", "2.5", False, "gdrcopy 2.5 < 2.6"),
    ("", "2.6", False, "CUDA driver version unknown (nvidia-smi gave none; 13.3+ needed)"),
    ("12.2", "", False, "CUDA driver 12.2 < 13.3; no gdrcopy release installed or pinned (2.6+ needed)"),
])
def test_dmabuf_availability(cuda, lib, ok, why):
    assert P.dmabuf_availability(cuda, lib) == (ok, why)


def test_choose_backend():
    assert P.choose_backend("", False, "x")["active"] == "gdrdrv"
    assert P.choose_backend("gdrdrv is not loaded", True, "CUDA ok") == {
        "active": "dmabuf", "reason": "gdrdrv is not loaded; the DMA-BUF path works instead (CUDA ok)"}
    assert P.choose_backend("gdrdrv is not loaded", False, "CUDA driver 13.0 < 13.3")["active"] == "none"


def gpu(index, numa, width=16, bar1=(1, 262144)):
    return {"index": index, "bus_id": "0000:%02x:00.0" % (index + 0x17), "numa_node": numa,
            "link": {"width": width, "max_width": 16}, "bar1_used_mib": bar1[0], "bar1_total_mib": bar1[1],
            "bar1_used_pct": int(round(100.0 * bar1[0] / bar1[1]))}


def texts(found):
    return [f["text"] for f in found]


def test_gpu_findings_thresholds():
    assert V.gpu_findings([gpu(0, 0)], []) == []
    assert texts(V.gpu_findings([gpu(0, -1, width=8)], [])) == ["GPU 0 (0000:17:00.0) runs its PCIe link at x8 of x16"]
    assert V.gpu_findings([gpu(0, -1, bar1=(89, 100))], []) == []
    assert V.gpu_findings([gpu(0, -1, bar1=(90, 100))], []) == [{
        "code": "bar1_full", "severity": "concern", "remedy": V.CODES["bar1_full"][2],
        "text": "BAR1 of GPU 0 is 90% used (90 of 100 MiB): gdrcopy cannot pin more GPU memory once it is full"}]


@pytest.mark.parametrize("state, status, blocked", [
    ("N/A", "N/A", False),                 # no NVSwitch (PCIe GPUs, the H100 and H200 device machines)
    ("Completed", "Success", False),       # the fabric manager registered the GPU
    ("In Progress", "N/A", True),          # still registering, or the fabric manager is not running
    ("Not Started", "N/A", True),
    ("Completed", "Failure", True),
])
def test_a_gpu_fabric_that_is_not_registered_blocks(state, status, blocked):
    found = V.gpu_findings([dict(gpu(0, 0), fabric={"state": state, "status": status})], [])
    assert [f["code"] for f in found] == (["fabric_manager_inactive"] if blocked else [])
    assert all(f["severity"] == "blocker" for f in found)


def test_inactive_nvlinks_are_a_concern():
    g = dict(gpu(0, 0), nvlink={"active": 16, "inactive": 2, "peers": {"GPU1": 18}})
    assert texts(V.gpu_findings([g], [])) == ["GPU 0 (0000:17:00.0) has 2 of 18 NVLinks inactive"]


def test_numa_mismatches():
    nics = [{"name": "mlx5_0", "numa_node": 0}, {"name": "mlx5_1", "numa_node": 0}]
    assert P.numa_mismatches([gpu(0, 0), gpu(1, 1)], nics) == [
        {"gpu": "GPU 1 (0000:18:00.0)", "numa_node": 1, "rdma": "mlx5_0: node 0, mlx5_1: node 0"}]
    assert P.numa_mismatches([gpu(0, 1)], []) == []  # no NIC: nothing to match
    assert P.numa_mismatches([gpu(0, -1)], nics) == []  # GPU node unknown
    assert P.numa_mismatches([gpu(0, 1)], [{"name": "mlx5_0", "numa_node": -1}]) == []


def peermem(nvidia_peermem=False, nv_peer_mem=False, api=None):
    return {"peermem": {"nvidia_peermem": {"loaded": nvidia_peermem}, "nv_peer_mem": {"loaded": nv_peer_mem},
                        "ib_core": {"peer_memory_api": api}}, "rdma": [{"name": "mlx5_0"}]}


def test_peermem_findings():
    assert V.peermem_findings(peermem(nvidia_peermem=True, api=True)) == []
    assert texts(V.peermem_findings(peermem(api=True))) == [
        "nvidia-peermem is not loaded: RDMA NICs cannot register GPU memory (gdrcopy itself does not need it)"]
    assert "no peer-memory API (inbox RDMA stack)" in texts(V.peermem_findings(peermem(api=False)))[0]
    assert "deprecated nv_peer_mem" in texts(V.peermem_findings(peermem(nv_peer_mem=True, api=True)))[0]
    assert V.peermem_findings(dict(peermem(api=False), rdma=[])) == []  # no RDMA device: nothing to say


# --- gdrcopy's own test programs -------------------------------------------------------------------------------

# Upstream's README (v2.6) shows this summary for a passing run; 2.4.x prints the same form.
SANITY_PASSED = "Total: 28, Passed: 28, Failed: 0, Waived: 0\n\nList of passed tests:\n    basic_cumemalloc\n"
# gdrcopy 2.3 (libcheck), as upstream's v2.3 README shows it, and a failing libcheck run.
LIBCHECK_PASSED = "Running suite(s): Sanity\n100%: Checks: 27, Failures: 0, Errors: 0\n"
LIBCHECK_FAILED = ("Running suite(s): Sanity\n92%: Checks: 27, Failures: 1, Errors: 1\n"
                   "sanity.cpp:190:F:Basic:basic_cumemalloc:0: Assertion 'gdr_pin_buffer(...) == 0' failed\n"
                   "sanity.cpp:402:E:Invalidation:invalidation_fork_after_gdr_map_cumemalloc:0: (after this point) "
                   "Received signal 11 (Segmentation fault)\n")


def test_sanity_of_the_real_failing_run_names_every_failed_test():
    r = P.parse_sanity(*device("sanity"))
    assert (r["format"], r["total"], r["passed"], r["failed"], r["waived"], r["rc"], r["ok"]) == (
        "gdrcopy", 36, 0, 36, 0, 1, False)
    listed = device("sanity_list")[0].split("List of all available extended tests:")[0]
    assert r["failed_tests"] == [line.strip() for line in listed.splitlines()[1:] if line.strip()]
    assert r["msg"].startswith("36 of 36 tests failed: attributes_sanity, basic_child_thread_pins_buffer_cumemalloc")


def test_sanity_of_a_real_subset():
    r = P.parse_sanity(*device("sanity_d0"))
    assert (r["total"], r["failed_tests"]) == (2, ["basic_cumemalloc", "data_validation_cumemalloc"])


def test_sanity_passing_and_waived():
    r = P.parse_sanity(SANITY_PASSED, 0)
    assert (r["ok"], r["passed"], r["failed_tests"], r["msg"]) == (True, 28, [], "28 of 28 tests passed, 0 waived")
    r = P.parse_sanity("Total: 7, Passed: 6, Failed: 0, Waived: 1\n\nList of waived tests:\n    pin_gpu_memory\n", 0)
    assert (r["ok"], r["waived_tests"]) == (True, ["pin_gpu_memory"])


def test_sanity_exit_code_counts_even_when_the_summary_is_clean():
    r = P.parse_sanity(SANITY_PASSED, 1)
    assert r["ok"] is False and r["msg"] == "exit code 1 although no test failed"


def test_sanity_libcheck_form_of_2_3():
    r = P.parse_sanity(LIBCHECK_PASSED, 0)
    assert (r["format"], r["total"], r["passed"], r["failed"], r["ok"]) == ("libcheck", 27, 27, 0, True)
    r = P.parse_sanity(LIBCHECK_FAILED, 1)
    assert (r["passed"], r["failed"], r["ok"]) == (25, 2, False)
    assert r["failed_tests"] == ["basic_cumemalloc", "invalidation_fork_after_gdr_map_cumemalloc"]


def test_sanity_without_a_summary_line():
    r = P.parse_sanity("gdrcopy_sanity: error while loading shared libraries: libcuda.so.1\n", 127)
    assert r["ok"] is False and r["msg"] == "gdrcopy_sanity printed no summary line (exit code 127)"


# Upstream's README (v2.6) output of gdrcopy_copybw on a V100, trimmed to the lines that matter.
COPYBW = """GPU id:0; name: Tesla V100-SXM2-32GB; Bus id: 0000:06:00
selecting device 0
testing size: 131072
writing test, size=131072 offset=0 num_iters=10000
write BW: 9638.54MB/s
reading test, size=131072 offset=0 num_iters=100
read BW: 530.135MB/s
unmapping buffer
unpinning buffer
closing gdrdrv
"""


def test_copybw_figures():
    r = P.parse_copybw(COPYBW, 0)
    assert r == {"rc": 0, "ok": True, "error": "",
                 "results": [{"size": 131072, "write_MBps": 9638.54, "read_MBps": 530.135}]}


def test_copybw_of_the_real_failing_run():
    r = P.parse_copybw(*device("copybw"))
    assert r == {"rc": 1, "ok": False, "results": [], "error": "gdr_open error: Is gdrdrv driver installed and loaded?"}


def test_copybw_exit_0_without_figures_is_no_success():
    """Before 2.5 copybw exited 0 even when pinning failed."""
    r = P.parse_copybw("GPU id:0; name: Tesla V100\nselecting device 0\n", 0)
    assert (r["ok"], r["error"]) == (False, "no bandwidth figures in the output")


# Upstream's README output of gdrcopy_copylat (the 2.3-2.5 'Avg.Time' form), trimmed.
COPYLAT_AVG = """gdr_copy_to_mapping num iters for each size: 10000
Test             Size(B)     Avg.Time(us)
gdr_copy_to_mapping             1         0.0889
gdr_copy_to_mapping             8         0.0884

gdr_copy_from_mapping num iters for each size: 100
Test             Size(B)     Avg.Time(us)
gdr_copy_from_mapping           1         0.9069
gdr_copy_from_mapping           8         1.7164
"""
# The 2.6 form: copylat.cpp prints "%s \\t %8zu \\t %11.4f \\t %11.4f" under 'Median Time(us)' and 'Min. Time(us)'.
COPYLAT_MEDIAN = ("Test \t\t\t Size(B) \t Median Time(us) \t Min. Time(us)\n"
                  "gdr_copy_to_mapping \t        8 \t      0.0890 \t      0.0850\n"
                  "Test \t\t\t Size(B) \t Median Time(us) \t Min. Time(us)\n"
                  "gdr_copy_from_mapping \t        8 \t      1.7000 \t      1.6500\n")


def test_copylat_average_form():
    r = P.parse_copylat(COPYLAT_AVG, 0)
    assert (r["ok"], r["statistic"]) == (True, "average")
    assert r["results"]["gdr_copy_to_mapping"] == [{"size": 1, "us": 0.0889, "min_us": None},
                                                   {"size": 8, "us": 0.0884, "min_us": None}]
    assert r["results"]["gdr_copy_from_mapping"][1] == {"size": 8, "us": 1.7164, "min_us": None}


def test_copylat_median_form_of_2_6():
    r = P.parse_copylat(COPYLAT_MEDIAN, 0)
    assert (r["ok"], r["statistic"]) == (True, "median")
    assert r["results"]["gdr_copy_from_mapping"] == [{"size": 8, "us": 1.7, "min_us": 1.65}]


def test_copylat_of_the_real_failing_run():
    r = P.parse_copylat(*device("copylat"))
    assert (r["ok"], r["results"], r["error"]) == (False, {}, "gdr_open error: Is gdrdrv driver installed and loaded?")


CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"


def test_mountinfo_of_a_host_has_its_root_and_a_chroots_has_none():
    """Captured on the controller and inside `vm.py root`'s chroot (with /proc, /sys, /dev mounted in it): the
    chroot sees its own mounts only, none on "/"."""
    assert P.mountinfo_has_root((CAPTURES / "mountinfo-controller.txt").read_text()) is True
    chroot = (CAPTURES / "mountinfo-chroot.txt").read_text()
    assert "/proc" in chroot and P.mountinfo_has_root(chroot) is False
    assert P.mountinfo_has_root("") is False


@pytest.mark.parametrize("mode, open_to_all", [("0660", False), ("0600", False), ("0640", False), ("", False),
                                               ("0666", True), ("0664", True), ("0644", True), ("0662", True),
                                               ("0661", True)])
def test_a_device_node_any_local_user_can_open_is_a_concern(mode, open_to_all):
    """Before: only o+w counted, so a world-readable 0644 node (gdrdrv's ioctls need no write access) read green."""
    concern = V.device_access_concern(mode)
    assert bool(concern) is open_to_all
    if open_to_all:
        assert concern.startswith("/dev/gdrdrv gives every local user access (mode %s)" % mode)


DPKG_STATUS = """Package: build-essential
Status: install ok installed
Priority: optional
Architecture: amd64
Version: 12.9

Package: mokutil
Status: deinstall ok config-files
Architecture: amd64
Version: 0.6.0-2

Package: zstd
Status: install ok unpacked
Version: 1.5.4+dfsg2-5

Package: openssl
Status: hold ok installed
Description: Secure Sockets Layer toolkit
 a continuation line that mentions Package: fake
"""


def test_dpkg_status_lists_installed_packages_only():
    assert P.parse_dpkg_status(DPKG_STATUS) == {"build-essential", "openssl"}
    assert P.parse_dpkg_status("") == set()


def test_rpm_query_lists_installed_packages_only():
    out = "installed gcc\npackage mokutil is not installed\ninstalled kmod\n"
    assert P.parse_rpm_installed(out) == {"gcc", "kmod"}
