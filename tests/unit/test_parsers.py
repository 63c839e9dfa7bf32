"""Unit tests of module_utils/gdrcopy_parsers.py with literal text and real captured text."""

import pytest

import gdrcopy_parsers as P

H200 = "hosts/h200-vm-modules-disabled"


def test_nvidia_proc_version_open_from_the_h200_capture(shared_fixture):
    text = shared_fixture(H200, "fs/proc/driver/nvidia/version")
    assert P.parse_nvidia_proc_version(text) == {"version": "580.159.04", "flavor": "open"}


def test_nvidia_proc_version_proprietary():
    text = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03  Release Build  (dvs-builder@U16-I3-B03-4-1)"
            "  Wed Jul 30 17:38:58 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n")
    assert P.parse_nvidia_proc_version(text) == {"version": "535.261.03", "flavor": "proprietary"}


@pytest.mark.parametrize("text", ["", "garbage\n", "NVRM version: no number here\n"])
def test_nvidia_proc_version_unparseable_is_empty(text):
    assert P.parse_nvidia_proc_version(text) == {}


def test_proc_devices_of_the_h200_capture_has_no_gdrdrv(shared_fixture):
    devices = P.parse_proc_devices(shared_fixture(H200, "fs/proc/devices"))
    assert devices["char"]["nvidia"] == 195
    assert devices["char"]["nvidia-uvm"] == 238
    assert "gdrdrv" not in devices["char"]
    assert devices["block"]["virtblk"] == 254


def test_proc_devices_dynamic_major():
    assert P.parse_proc_devices("Character devices:\n  1 mem\n509 gdrdrv\n\nBlock devices:\n  7 loop\n")["char"] == {
        "mem": 1, "gdrdrv": 509}


def test_proc_modules_of_the_h200_capture(shared_fixture):
    mods = P.parse_proc_modules(shared_fixture(H200, "fs/proc/modules"))
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
def test_choose_nvidia_source_matches_version_and_flavor(version, flavor, expected):
    tree, reason = P.choose_nvidia_source(TREES, version, flavor)
    assert (tree["dir"] if tree else None) == expected
    assert reason


def test_choose_nvidia_source_without_driver():
    assert P.choose_nvidia_source(TREES[:1], "", "")[0] == TREES[0]
    tree, reason = P.choose_nvidia_source(TREES, "", "")
    assert tree is None and "gdrcopy_nvidia_src_dir" in reason
    assert P.choose_nvidia_source([], "535.261.03", "open") == (None, "no NVIDIA kernel source tree (nv-p2p.h) was found")


def test_kconfig_of_the_h200_capture(shared_fixture):
    conf = P.parse_kconfig(shared_fixture(H200, "cmd/kconfig_subset.txt"))
    assert conf["CONFIG_MODULE_SIG_FORCE"] == "y"
    assert conf["CONFIG_MODVERSIONS"] == "n"


def test_kernel_release_order():
    names = ["6.1.0-50-amd64", "6.1.0-9-amd64", "6.12.57+deb13-amd64", "modules.load", "6.1.0-47-amd64"]
    assert P.parse_kernel_release_dirs(names) == ["6.1.0-9-amd64", "6.1.0-47-amd64", "6.1.0-50-amd64",
                                                  "6.12.57+deb13-amd64"]


@pytest.mark.parametrize("given,expected", [("2.6", "2.6"), ("v2.4.1", "2.4"), ("2.5.2", "2.5"), ("main", "")])
def test_major_minor(given, expected):
    assert P.major_minor(given) == expected


def test_modules_dep_paths():
    text = ("kernel/drivers/misc/gdrdrv.ko.xz:\nupdates/gdrcopy/gdrdrv.ko: extra/gdrcopy-test-standins/nvidia.ko\n"
            "extra/gdrcopy-test-standins/nvidia.ko:\nkernel/fs/gdrdrv2.ko:\n")
    assert P.modules_dep_paths(text, "gdrdrv") == ["kernel/drivers/misc/gdrdrv.ko.xz", "updates/gdrcopy/gdrdrv.ko"]
    assert P.modules_dep_paths(text, "nvidia") == ["extra/gdrcopy-test-standins/nvidia.ko"]
    assert P.modules_dep_paths("", "gdrdrv") == []
