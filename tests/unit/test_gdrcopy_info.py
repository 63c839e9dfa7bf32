"""gdrcopy_info against real captures (the shared H200 host; the device run under tests/fixtures/hosts) and small
synthetic roots: every field, with its argv, fed through a fake run_command."""

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts
from ansible_collections.gpufleet.gdrcopy.plugins.modules import gdrcopy_info
from conftest import FIXTURES, REPO, need, restore_names

H200 = FIXTURES / "hosts" / "h200-vm-modules-disabled"
DEVICE = REPO / "tests" / "fixtures" / "hosts" / "h200-device-gdrcopy-2.6-tests"
SMI = "/usr/local/nvidia/bin/nvidia-smi"
SMI_QUERY = (SMI, "--query-gpu=index,name,pci.bus_id,driver_version,memory.total,memory.used,pcie.link.gen.current,"
             "pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max", "--format=csv")
SMI_Q = (SMI, "-q")  # the whole -q: BAR1, the fabric state, the UUID


class FakeModule:
    """What gdrcopy_info uses of AnsibleModule: tool lookup and argv commands (recorded)."""

    def __init__(self, tools=None, outputs=None):
        self.tools, self.outputs, self.calls = tools or {}, outputs or {}, []

    def get_bin_path(self, name, opt_dirs=None):
        return self.tools.get(name)

    def run_command(self, argv, environ_update=None):
        assert environ_update == {"LC_ALL": "C"}
        assert isinstance(argv, list)
        self.calls.append(tuple(argv))
        return self.outputs.get(tuple(argv), (1, "", "not found"))


def captured(path):
    """A cmd/NAME.txt capture -> (rc, output): its last line is __rc=N."""
    lines = Path(path).read_text().splitlines(keepends=True)
    assert lines[-1].startswith("__rc="), path
    return int(lines[-1].strip()[5:]), "".join(lines[:-1]), ""


def copy_capture(src, dst):
    """A capture's fs/ as a root: '__unreadable' files (reading failed on the host) are left out."""
    def ignore(folder, names):
        return [n for n in names if os.path.isfile(os.path.join(folder, n))
                and Path(folder, n).read_bytes() == b"__unreadable\n"]
    shutil.copytree(src, dst, ignore=ignore)
    return str(restore_names(dst))


def params(root, **extra):
    p = {"root": root, "cuda_home": "/usr/local/cuda", "build_root": "/var/lib/gdrcopy-ansible/build",
         "prefix": "/opt/gdrcopy", "nvidia_src_dir": None, "release": "", "mok_cert": None, "run_tests": [],
         "gpu_id": 0, "tests_timeout": 900}
    p.update(extra)
    return p


@pytest.fixture
def h200(tmp_path, host_fixture):
    host_fixture("hosts/h200-vm-modules-disabled", "README.md")  # fails clearly when the capture is missing
    root = copy_capture(H200 / "fs", tmp_path / "h200")
    m = FakeModule(tools={"nvidia-smi": SMI}, outputs={
        SMI_QUERY: captured(H200 / "cmd" / "nvidia_smi_query_csv.txt"),
        SMI_Q: captured(H200 / "cmd" / "nvidia_smi_q.txt"),
    })
    return m, gdrcopy_facts.gather(m, params(root), gdrcopy_facts.Host(m, root, live=True))


@pytest.mark.fault(5)
def test_the_h200_capture_blocks_with_every_reason_at_once(h200):
    """Module loading disabled is not the only thing in the way there: the kernel has no module tree, the host no
    kmod tools, and signatures are enforced without EFI (no MOK can ever be enrolled); all are said, each with a
    remedy for a kernel that is managed from elsewhere (no reboot with other settings), then the DMA-BUF verdict."""
    _, r = h200
    assert r["health"] == "red"
    assert [f["code"] for f in r["findings"]] == [
        "modules_disabled", "no_module_tree", "no_kmod_tools", "sig_enforced_no_efi", "dmabuf_unavailable"]
    assert r["blockers"] == [f["text"] for f in r["findings"]]
    assert r["blockers"][0] == ("module loading is disabled on this host (kernel.modules_disabled=1): gdrdrv cannot "
                                "be loaded until reboot")
    assert r["blockers"][3] == (
        "module signatures are enforced on 6.18.44-fc-v657-gpu (module.sig_enforce=Y) and the host has no EFI: no "
        "Machine Owner Key can be enrolled, so only a key built into that kernel can sign gdrdrv")
    assert r["blockers"][4] == ("the 2.6 DMA-BUF path cannot replace gdrdrv here: CUDA driver 13.0 < 13.3; no gdrcopy "
                                "release installed or pinned (2.6+ needed)")
    remedy = dict((f["code"], f["remedy"]) for f in r["findings"])
    assert "reboot" not in remedy["modules_disabled"] and "whoever provides it" in remedy["modules_disabled"]
    assert r["concerns"] == []
    assert r["backend"]["active"] == "none"
    assert r["backend"]["dmabuf"] == {"available": False, "reason": (
        "CUDA driver 13.0 < 13.3; no gdrcopy release installed or pinned (2.6+ needed)")}
    assert r["backend"]["reason"].startswith("module loading is disabled")
    assert r["signing"] == {"enforced": True, "enforced_by": ["module.sig_enforce=Y"], "hash": "", "efi": False,
                            "secure_boot": False, "lockdown": "",
                            "gdrdrv": {"path": "", "signer": "", "sig_key": "", "hash": "", "ours": None,
                                       "accepted": None, "why": "no gdrdrv installed for the running kernel"}}


def test_the_h200_capture_kernel_and_driver(h200):
    m, r = h200
    k = r["kernel"]
    assert (k["running"], k["running_installed"], k["installed"]) == ("6.18.44-fc-v657-gpu", False, [])
    assert (k["modules_disabled"], k["sig_enforce"], k["efi"], k["lockdown"]) == (True, True, False, "")
    assert r["secure_boot"] == {"efi": False, "enabled": False, "setup_mode": False,
                                "source": "no EFI (Secure Boot does not apply)",
                                "mok": {"cert": "", "serial": "", "subject": "", "state": "unknown",
                                        "detail": "not an EFI system", "pending": []},
                                "candidates": []}
    assert (r["nvidia"]["loaded"], r["nvidia"]["version"], r["nvidia"]["flavor"]) == (True, "580.159.04", "open")
    assert r["nvidia"]["source_match"] == {"reason": "no NVIDIA kernel source tree (nv-p2p.h) was found"}
    assert r["cuda"]["driver_version"] == "13.0" and r["cuda"]["driver_version_source"] == "nvidia-smi"
    assert r["load_order"] == ["nvidia", "nvidia_uvm"]
    assert r["gdrdrv"]["loaded"] is False and r["gdrdrv"]["major"] == -1
    assert r["gdrdrv"]["device"]["exists"] is False and r["gdrdrv"]["device"]["ok"] is False
    assert r["library"] == {"paths": [], "version": ""}  # no ldconfig on the capture: not claimed missing
    assert r["gdrcopy"] == {"release": "", "installed_release": "", "library_version": "", "driver_version": "",
                            "skew": False, "tests_dir": "/opt/gdrcopy/current/bin",
                            "tests": {"sanity": "", "copybw": "", "copylat": ""}}
    assert r["builds"] == {} and r["installs"] == {}
    assert r["tools"]["nvidia-smi"] == SMI and r["tools"]["modinfo"] == ""
    assert m.calls == [SMI_QUERY, SMI_Q]


H200_GPU = {
    "index": 0, "name": "NVIDIA H200", "uuid": "GPU-415d7dc8-b97f-1844-0c94-2a13c0db575d", "bus_id": "0000:00:06.0",
    "driver_version": "580.159.04", "memory_total_mib": 143771, "memory_used_mib": 0,
    "bar1_total_mib": 262144, "bar1_used_mib": 1, "bar1_used_pct": 0, "numa_node": -1, "cpu_affinity": "0-15",
    "link": {"speed": 32.0, "max_speed": 32.0, "gen": 5, "max_gen": 5, "width": 16, "max_width": 16},
    "fabric": {"state": "N/A", "status": "N/A"}, "nvlink": {"active": 0, "inactive": 0, "peers": {}},
    "source": "nvidia-smi",
}


def test_the_h200_capture_gpu(h200):
    _, r = h200
    assert r["gpus"] == [H200_GPU]


def test_the_h200_capture_rdma_and_peermem(h200):
    _, r = h200
    assert r["rdma"] == [] and r["numa_mismatches"] == []
    pm = r["peermem"]
    assert pm["nvidia_peermem"] == {"loaded": False, "available": False, "files": [], "version": "",
                                    "refcount": -1, "kernels": {}}
    assert (pm["nv_peer_mem"]["loaded"], pm["nv_peer_mem"]["service"]) == (False, "")
    # ib_core is built into that kernel (its /sys/module dir, no initstate, not in /proc/modules); the capture
    # has no /proc/kallsyms, so the peer-memory API is unknown
    assert pm["ib_core"] == {"loaded": True, "builtin": True, "version": "", "peer_memory_api": None,
                             "peer_clients": [], "evidence": "/proc/kallsyms is not readable"}
    assert r["tests"] == {"ran": False, "reason": "no test asked for", "gpu_id": 0}


def test_without_nvidia_smi_the_gpu_comes_from_sysfs_and_procfs(tmp_path, host_fixture):
    host_fixture("hosts/h200-vm-modules-disabled", "README.md")
    root = copy_capture(H200 / "fs", tmp_path / "h200")
    m = FakeModule()
    r = gdrcopy_facts.gather(m, params(root), gdrcopy_facts.Host(m, root, live=True))
    gpu = r["gpus"][0]
    # the same schema and types as with nvidia-smi: what only nvidia-smi knows is None or ''
    assert gpu == dict(H200_GPU, memory_total_mib=None, memory_used_mib=None, bar1_used_mib=None, bar1_used_pct=None,
                       fabric={"state": "", "status": ""}, source="sysfs")
    assert r["cuda"]["driver_version"] == ""
    assert "CUDA driver version unknown (nvidia-smi gave none; 13.3+ needed)" in r["blockers"][-1]
    assert m.calls == []


# --- the device run: the real gdrcopy 2.6 test programs on the H200 without gdrdrv ----------------------------

@pytest.fixture
def device_root(tmp_path):
    """A live-looking root with gdrcopy installed the way the role does it (tests under <prefix>/current/bin)."""
    root = tmp_path / "host"
    for rel in ("proc/sys/kernel", "sys/module/nvidia", "sys/bus/pci/devices/0000:00:06.0",
                "opt/gdrcopy/2.6/bin", "proc/driver/nvidia"):
        (root / rel).mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text("6.18.44-fc-v657-gpu\n")
    (root / "proc/sys/kernel/modules_disabled").write_text("1\n")
    (root / "proc/modules").write_text(captured(DEVICE / "cmd" / "proc_modules.txt")[1])
    (root / "sys/module/nvidia/version").write_text("580.159.04\n")
    dev = root / "sys/bus/pci/devices/0000:00:06.0"
    for name, value in (("vendor", "0x10de"), ("class", "0x030200"), ("numa_node", "-1")):
        (dev / name).write_text(value + "\n")
    for prog in ("gdrcopy_sanity", "gdrcopy_copybw", "gdrcopy_copylat"):
        (root / "opt/gdrcopy/2.6/bin" / prog).write_text("")
    os.symlink("2.6", root / "opt/gdrcopy/current")
    return str(root)


def device_module(extra_outputs=None):
    outputs = {SMI_QUERY: captured(DEVICE / "cmd" / "nvidia_smi_query_csv.txt"),
               SMI_Q: captured(DEVICE / "cmd" / "nvidia_smi_q_memory.txt")}
    outputs.update(extra_outputs or {})
    return FakeModule(tools={"nvidia-smi": SMI, "timeout": "/usr/bin/timeout"}, outputs=outputs)


def test_the_real_tests_fail_without_gdrdrv_and_name_every_failed_test(device_root):
    bin_ = "/opt/gdrcopy/current/bin/"
    wrap = ("/usr/bin/timeout", "--kill-after=10", "600")
    m = device_module({
        wrap + (bin_ + "gdrcopy_sanity", "-d", "0"): captured(DEVICE / "cmd" / "sanity.txt"),
        wrap + (bin_ + "gdrcopy_copybw", "-d", "0"): captured(DEVICE / "cmd" / "copybw.txt"),
        wrap + (bin_ + "gdrcopy_copylat", "-d", "0"): captured(DEVICE / "cmd" / "copylat.txt"),
    })
    p = params(device_root, run_tests=["sanity", "copybw", "copylat"], tests_timeout=600)
    r = gdrcopy_facts.gather(m, p, gdrcopy_facts.Host(m, device_root, live=True))
    t = r["tests"]
    assert (t["ran"], t["reason"], t["gpu_id"]) == (True, "", 0)
    assert (t["sanity"]["total"], t["sanity"]["passed"], t["sanity"]["failed"], t["sanity"]["ok"]) == (36, 0, 36, False)
    assert len(t["sanity"]["failed_tests"]) == 36 and t["sanity"]["failed_tests"][0] == "attributes_sanity"
    assert t["sanity"]["argv"] == list(wrap + (bin_ + "gdrcopy_sanity", "-d", "0"))
    assert t["copybw"]["ok"] is False
    assert t["copybw"]["error"] == "gdr_open error: Is gdrdrv driver installed and loaded?"
    assert t["copylat"]["ok"] is False and t["copylat"]["results"] == {}
    assert r["gdrcopy"]["installed_release"] == "2.6"


def test_the_tests_use_gpu_id_and_skip_with_a_reason(device_root, tmp_path):
    m = device_module()
    p = params(device_root, run_tests=["copybw"], gpu_id=3)
    r = gdrcopy_facts.gather(m, p, gdrcopy_facts.Host(m, device_root, live=True))
    assert r["tests"]["copybw"]["argv"][-3:] == ["/opt/gdrcopy/current/bin/gdrcopy_copybw", "-d", "3"]
    os.unlink(os.path.join(device_root, "opt/gdrcopy/2.6/bin/gdrcopy_copylat"))
    r = gdrcopy_facts.gather(m, params(device_root, run_tests=["sanity", "copylat"]),
                            gdrcopy_facts.Host(m, device_root, live=True))
    assert r["tests"]["ran"] is False
    assert r["tests"]["reason"].startswith("gdrcopy's test programs (copylat) are not installed under "
                                           "/opt/gdrcopy/current/bin")
    no_gpu = FakeModule()
    shutil.rmtree(os.path.join(device_root, "sys/bus/pci/devices/0000:00:06.0"))
    r = gdrcopy_facts.gather(no_gpu, params(device_root, run_tests=["sanity"]),
                            gdrcopy_facts.Host(no_gpu, device_root, live=True))
    assert r["tests"]["reason"] == "no NVIDIA GPU on this host: only the GPU-less smoke check applies"


def test_sanity_of_2_4_takes_no_gpu_id(device_root):
    os.rename(os.path.join(device_root, "opt/gdrcopy/2.6"), os.path.join(device_root, "opt/gdrcopy/2.4.4"))
    os.unlink(os.path.join(device_root, "opt/gdrcopy/current"))
    os.symlink("2.4.4", os.path.join(device_root, "opt/gdrcopy/current"))
    m = device_module()
    r = gdrcopy_facts.gather(m, params(device_root, run_tests=["sanity"]), gdrcopy_facts.Host(m, device_root, live=True))
    assert r["tests"]["sanity"]["argv"][-1] == "/opt/gdrcopy/current/bin/gdrcopy_sanity"


# --- a host that works: gdrdrv loaded, signed modules, Secure Boot, RDMA ---------------------------------------

def write(root, rel, text=""):
    path = os.path.join(root, rel.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mode = "wb" if isinstance(text, bytes) else "w"
    with open(path, mode) as f:
        f.write(text)


KERNEL = "6.1.0-50-amd64"
MODINFO_SIGNED = """filename:       /lib/modules/6.1.0-50-amd64/updates/gdrcopy/gdrdrv.ko
version:        2.6
license:        Dual MIT/GPL
srcversion:     8D2E1F5C0B1B3A4A6C7D8E9
depends:        nvidia
vermagic:       6.1.0-50-amd64 SMP preempt mod_unload modversions
sig_id:         PKCS#7
signer:         gdrcopy-ansible module signing key
sig_key:        51:3A:0F:99:12
sig_hashalgo:   sha256
signature:      30:45:02:21:00:D2
\t\t4B:7A
parm:           dbg_enabled:enable debug tracing (int)
parm:           info_enabled:enable info tracing (int)
"""


@pytest.fixture
def working_root(tmp_path):
    root = str(tmp_path / "host")
    write(root, f"/boot/vmlinuz-{KERNEL}")
    write(root, f"/boot/config-{KERNEL}", 'CONFIG_MODULE_SIG=y\nCONFIG_MODULE_SIG_HASH="sha256"\n')
    os.makedirs(os.path.join(root, f"lib/modules/{KERNEL}/kernel"))
    write(root, f"/lib/modules/{KERNEL}/modules.dep", "updates/gdrcopy/gdrdrv.ko: extra/nvidia.ko\nextra/nvidia.ko:\n"
                                                     "kernel/drivers/infiniband/core/ib_core.ko:\n")
    write(root, f"/lib/modules/{KERNEL}/updates/gdrcopy/gdrdrv.ko", b"\x7fELF...~Module signature appended~\n")
    write(root, "/proc/sys/kernel/osrelease", KERNEL + "\n")
    write(root, "/proc/sys/kernel/modules_disabled", "0\n")
    write(root, "/sys/module/module/parameters/sig_enforce", "Y\n")
    write(root, "/sys/kernel/security/lockdown", "none [integrity] confidentiality\n")
    write(root, "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c", b"\x06\x00\x00\x00\x01")
    write(root, "/proc/modules", "gdrdrv 24576 0 - Live 0x0 (OE)\nnvidia_peermem 16384 0 - Live 0x0 (POE)\n"
                                 "ib_core 462848 1 nvidia_peermem, Live 0x0\nnvidia 56623104 2 gdrdrv,nvidia_peermem, "
                                 "Live 0x0 (POE)\n")
    for mod in ("gdrdrv", "nvidia_peermem", "ib_core", "nvidia"):
        write(root, f"/sys/module/{mod}/initstate", "live\n")
    write(root, "/sys/module/nvidia/version", "535.261.03\n")
    write(root, "/sys/module/gdrdrv/srcversion", "8D2E1F5C0B1B3A4A6C7D8E9\n")
    write(root, "/sys/module/gdrdrv/refcnt", "0\n")
    write(root, "/sys/module/ib_core/version", "24.10-1.1.4\n")
    write(root, "/sys/kernel/mm/memory_peers/nv_mem/version", "1.0\n")
    write(root, "/proc/devices", "Character devices:\n195 nvidia\n509 gdrdrv\n\nBlock devices:\n  7 loop\n")
    write(root, "/proc/driver/gdrdrv/params", "Version: 2.6\nBuilt for NVIDIA driver flavor: proprietary\n"
                                              "Use persistent mapping: yes\ndbg_enabled: 0\ninfo_enabled: 0\n")
    write(root, "/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03  Release "
                                               "Build  (dvs-builder@U16-I3-B03-4-1)\n")
    for bdf, numa in (("0000:17:00.0", "0"), ("0000:98:00.0", "1")):  # GPU 0 and GPU 1
        dev = f"/sys/bus/pci/devices/{bdf}/"
        for name, value in (("vendor", "0x10de"), ("class", "0x030200"), ("numa_node", numa),
                            ("current_link_speed", "32.0 GT/s PCIe"), ("max_link_speed", "32.0 GT/s PCIe"),
                            ("current_link_width", "8" if numa == "1" else "16"), ("max_link_width", "16")):
            write(root, dev + name, value + "\n")
    write(root, "/sys/class/infiniband/mlx5_0/device/numa_node", "0\n")
    for name, value in (("state", "4: ACTIVE"), ("link_layer", "InfiniBand"), ("rate", "400 Gb/sec (4X NDR)")):
        write(root, f"/sys/class/infiniband/mlx5_0/ports/1/{name}", value + "\n")
    write(root, "/opt/gdrcopy/2.6/lib/libgdrapi.so.2.6")
    os.symlink("libgdrapi.so.2.6", os.path.join(root, "opt/gdrcopy/2.6/lib/libgdrapi.so.2"))
    os.symlink("2.6", os.path.join(root, "opt/gdrcopy/current"))
    os.makedirs(os.path.join(root, "dev"))
    try:
        os.mknod(os.path.join(root, "dev/gdrdrv"), stat.S_IFCHR | 0o660, os.makedev(509, 0))
    except PermissionError:
        need(False, "making a character device needs root (CAP_MKNOD)")
    return root


def working_module(root):
    tools = {"modprobe": "/usr/sbin/modprobe", "modinfo": "/usr/sbin/modinfo", "ldconfig": "/usr/sbin/ldconfig", "mokutil": "/usr/bin/mokutil",
             "openssl": "/usr/bin/openssl", "nvidia-smi": SMI}
    ko = os.path.join(root, f"lib/modules/{KERNEL}/updates/gdrcopy/gdrdrv.ko")
    cert = os.path.join(root, "var/lib/gdrcopy-ansible/mok/mok.der")
    query = ("index, name, pci.bus_id, driver_version, memory.total [MiB], memory.used [MiB], pcie.link.gen.current, "
             "pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max\n"
             "0, NVIDIA H100 80GB HBM3, 00000000:17:00.0, 535.261.03, 81559 MiB, 0 MiB, 5, 5, 16, 16\n"
             "1, NVIDIA H100 80GB HBM3, 00000000:98:00.0, 535.261.03, 81559 MiB, 2 MiB, 5, 5, 8, 16\n")
    memory = ("Driver Version                            : 535.261.03\nCUDA Version                              : 12.2\n\n"
              "GPU 00000000:17:00.0\n    BAR1 Memory Usage\n        Total                             : 131072 MiB\n"
              "        Used                              : 122000 MiB\n        Free                              : 9072 MiB\n"
              "GPU 00000000:98:00.0\n    BAR1 Memory Usage\n        Total                             : 131072 MiB\n"
              "        Used                              : 2 MiB\n        Free                              : 131070 MiB\n")
    return FakeModule(tools=tools, outputs={
        ("/usr/sbin/modinfo", ko): (0, MODINFO_SIGNED, ""),
        ("/usr/sbin/modinfo", "-F", "srcversion", "gdrdrv"): (0, "8D2E1F5C0B1B3A4A6C7D8E9\n", ""),
        ("/usr/sbin/ldconfig", "-p"): (0, "2 libs found in cache `/etc/ld.so.cache'\n\tlibgdrapi.so.2 (libc6,x86-64) =>"
                                          " /opt/gdrcopy/current/lib/libgdrapi.so.2\n", ""),
        ("/usr/bin/mokutil", "--sb-state"): (0, "SecureBoot enabled\n", ""),
        ("/usr/bin/mokutil", "--list-new"): (1, "", "MokNew is empty\n"),
        ("/usr/bin/mokutil", "--test-key", cert): (1, f"{cert} is already enrolled\n", ""),
        ("/usr/bin/openssl", "x509", "-inform", "DER", "-in", cert, "-noout", "-serial", "-subject"): (
            0, "serial=513A0F9912\nsubject=CN = gdrcopy-ansible module signing key\n", ""),
        SMI_QUERY: (0, query, ""),
        SMI_Q: (0, memory, ""),
    })


def test_a_working_host_with_signed_modules_secure_boot_and_rdma(working_root):
    write(working_root, "/var/lib/gdrcopy-ansible/mok/mok.der", b"0\x82")
    m = working_module(working_root)
    r = gdrcopy_facts.gather(m, params(working_root, release="2.6", mok_cert="/var/lib/gdrcopy-ansible/mok/mok.der"),
                            gdrcopy_facts.Host(m, working_root, live=True))
    k = r["kernel"]["installed"][0]
    assert k["gdrdrv_modules"] == [{
        "path": f"/lib/modules/{KERNEL}/updates/gdrcopy/gdrdrv.ko", "signed": True,
        "signer": "gdrcopy-ansible module signing key", "sig_key": "51:3A:0F:99:12", "sig_hashalgo": "sha256",
        "version": "2.6", "srcversion": "8D2E1F5C0B1B3A4A6C7D8E9", "vermagic": f"{KERNEL} SMP preempt mod_unload modversions",
        "ours": True}]
    assert r["secure_boot"]["enabled"] is True and r["secure_boot"]["source"] == "mokutil --sb-state"
    assert r["secure_boot"]["mok"]["state"] == "enrolled" and r["secure_boot"]["mok"]["serial"] == "513A0F9912"
    assert r["secure_boot"]["mok"]["subject"] == "gdrcopy-ansible module signing key"
    assert r["kernel"]["lockdown"] == "integrity"
    assert r["load_order"] == ["nvidia", "ib_core", "nvidia_peermem", "gdrdrv"]
    assert r["backend"]["active"] == "gdrdrv"
    assert (r["gdrcopy"]["library_version"], r["gdrcopy"]["driver_version"], r["gdrcopy"]["skew"]) == ("2.6", "2.6", False)
    assert r["library"]["paths"] == ["/opt/gdrcopy/current/lib/libgdrapi.so.2"]
    assert r["peermem"]["nvidia_peermem"]["loaded"] is True
    assert r["peermem"]["ib_core"]["peer_memory_api"] is True
    assert r["peermem"]["ib_core"]["evidence"] == "/sys/kernel/mm/memory_peers lists nv_mem"
    assert r["peermem"]["ib_core"]["builtin"] is False and r["peermem"]["ib_core"]["version"] == "24.10-1.1.4"
    assert r["rdma"] == [{"name": "mlx5_0", "pci": "", "numa_node": 0, "ports": [
        {"port": "1", "state": "4: ACTIVE", "link_layer": "InfiniBand", "rate": "400 Gb/sec (4X NDR)"}]}]
    assert r["numa_mismatches"] == [{"gpu": "GPU 1 (0000:98:00.0)", "numa_node": 1, "rdma": "mlx5_0: node 0"}]
    assert r["gpus"][0]["bar1_used_pct"] == 93
    assert r["concerns"] == [
        "BAR1 of GPU 0 is 93% used (122000 of 131072 MiB): gdrcopy cannot pin more GPU memory once it is full",
        "GPU 1 (0000:98:00.0) runs its PCIe link at x8 of x16",
        "GPU 1 (0000:98:00.0) is on NUMA node 1 but no RDMA device is (mlx5_0: node 0): GPUDirect RDMA traffic "
        "crosses the CPU interconnect",
    ]
    assert [f["code"] for f in r["findings"]] == ["bar1_full", "pcie_link_narrow", "numa_no_rdma"]
    assert r["health"] == "amber"
    # the running kernel enforces signatures (sig_enforce, lockdown) and accepts gdrdrv: our key is enrolled
    assert r["signing"] == {
        "enforced": True, "enforced_by": ["module.sig_enforce=Y", "lockdown=integrity"], "hash": "sha256",
        "efi": True, "secure_boot": True, "lockdown": "integrity",
        "gdrdrv": {"path": f"/lib/modules/{KERNEL}/updates/gdrcopy/gdrdrv.ko",
                   "signer": "gdrcopy-ansible module signing key", "sig_key": "51:3A:0F:99:12", "hash": "sha256",
                   "ours": True, "accepted": True, "why": "signed by our key, which is enrolled"}}


def test_unloading_gdrdrv_turns_a_working_host_red(working_root):
    shutil.rmtree(os.path.join(working_root, "sys/module/gdrdrv"))
    m = working_module(working_root)
    r = gdrcopy_facts.gather(m, params(working_root), gdrcopy_facts.Host(m, working_root, live=True))
    assert r["health"] == "red"
    assert r["blockers"][0] == f"gdrdrv is installed for the running kernel {KERNEL} but not loaded"
    assert "CUDA driver 12.2 < 13.3" in r["blockers"][1]


def test_an_unsigned_gdrdrv_under_enforcement_is_a_blocker(working_root):
    shutil.rmtree(os.path.join(working_root, "sys/module/gdrdrv"))
    write(working_root, f"/lib/modules/{KERNEL}/updates/gdrcopy/gdrdrv.ko", b"\x7fELF unsigned")
    m = FakeModule(tools={})  # no modinfo: the trailer alone says unsigned
    r = gdrcopy_facts.gather(m, params(working_root), gdrcopy_facts.Host(m, working_root, live=True))
    assert r["kernel"]["installed"][0]["gdrdrv_modules"][0]["signed"] is False
    assert (f"module signatures are enforced on {KERNEL} and gdrdrv (/lib/modules/{KERNEL}/updates/gdrcopy/gdrdrv.ko)"
            " is not signed: the kernel refuses it") in r["blockers"]


@pytest.mark.parametrize("rc", [0, 1])
@pytest.mark.fault(11)
def test_the_mok_state_comes_from_mokutils_text_whatever_its_exit_code(working_root, rc):
    """mokutil up to 0.7.2 exits 1 for "already enrolled", later versions 0: the text decides."""
    cert = os.path.join(working_root, "var/lib/gdrcopy-ansible/mok/mok.der")
    write(working_root, "/var/lib/gdrcopy-ansible/mok/mok.der", b"0\x82")
    m = working_module(working_root)
    m.outputs[("/usr/bin/mokutil", "--test-key", cert)] = (rc, f"{cert} is already enrolled\n", "")
    r = gdrcopy_facts.gather(m, params(working_root, mok_cert="/var/lib/gdrcopy-ansible/mok/mok.der"),
                            gdrcopy_facts.Host(m, working_root, live=True))
    assert r["secure_boot"]["mok"]["state"] == "enrolled"


@pytest.mark.fault(11)
def test_a_blocked_signing_key_is_a_blocker(working_root):
    cert = os.path.join(working_root, "var/lib/gdrcopy-ansible/mok/mok.der")
    write(working_root, "/var/lib/gdrcopy-ansible/mok/mok.der", b"0\x82")
    m = working_module(working_root)
    m.outputs[("/usr/bin/mokutil", "--test-key", cert)] = (1, f"{cert} is blocked in dbx\n", "")
    r = gdrcopy_facts.gather(m, params(working_root, mok_cert="/var/lib/gdrcopy-ansible/mok/mok.der"),
                            gdrcopy_facts.Host(m, working_root, live=True))
    assert r["secure_boot"]["mok"]["state"] == "blocked"
    assert any("/var/lib/gdrcopy-ansible/mok/mok.der is blocked by the firmware or MOK denylist" in f["text"]
               and "sign with another one" in f["remedy"] and f["code"] == "key_blocked" for f in r["findings"])
    assert r["signing"]["gdrdrv"]["accepted"] is False
    assert r["health"] == "red"


def test_a_chroot_never_reports_the_build_hosts_runtime_as_the_images(working_root):
    """In a chroot the mounted /proc, /sys and /dev are the build host's: a loaded gdrdrv, EFI, lockdown or a GPU
    there says nothing about the image. Its files (kernels, modules, library) still count."""
    m = working_module(working_root)
    r = gdrcopy_facts.gather(m, params(working_root, release="2.6"), gdrcopy_facts.Host(m, working_root, live=False))
    assert r["live"] is False and r["kernel"]["running"] == ""
    assert r["load_order"] == [] and r["gdrdrv"]["loaded"] is False and r["nvidia"]["loaded"] is False
    assert r["secure_boot"]["efi"] is False and r["kernel"]["lockdown"] in ("", None)
    assert r["gpus"] == [] and r["rdma"] == [] and r["peermem"]["nvidia_peermem"]["loaded"] is False
    assert r["gdrdrv"]["device"]["exists"] is False
    assert [k["release"] for k in r["kernel"]["installed"]] == [KERNEL]
    assert r["kernel"]["installed"][0]["gdrdrv_modules"][0]["path"] == f"/lib/modules/{KERNEL}/updates/gdrcopy/gdrdrv.ko"
    assert [c[0] for c in m.calls if c[0] in ("/usr/bin/mokutil", SMI, "/usr/sbin/ldconfig")] == []
    # the library from the install prefix, not from the build host's loader
    assert r["library"] == {"paths": ["/opt/gdrcopy/current/lib/libgdrapi.so.2"], "version": "2.6"}
    assert r["gdrcopy"]["library_version"] == "2.6" and r["gdrcopy"]["driver_version"] == ""


def test_image_forces_a_root_of_slash_to_be_read_as_an_image():
    assert gdrcopy_facts.Host(FakeModule(), "/", image=True).live is False
    assert gdrcopy_facts.Host(FakeModule(), "/", image=True).read("/proc/modules") is None


# --- an image root: nothing live, commands only through modinfo -b -------------------------------------------

@pytest.fixture
def image_root(tmp_path):
    """An image with two kernels (one without headers), two NVIDIA source trees, a build stamp and an install stamp."""
    root = str(tmp_path)
    for k in ("6.1.0-47-amd64", "6.1.0-50-amd64"):
        write(root, f"/boot/vmlinuz-{k}")
        write(root, f"/boot/config-{k}", "CONFIG_MODULE_SIG=y\nCONFIG_MODULE_SIG_HASH=\"sha256\"\n")
        os.makedirs(os.path.join(root, f"lib/modules/{k}/kernel"))
    write(root, "/lib/modules/6.1.0-50-amd64/modules.dep", "updates/gdrcopy/gdrdrv.ko: extra/nvidia.ko\nextra/nvidia.ko:\n")
    write(root, "/lib/modules/6.1.0-50-amd64/updates/gdrcopy/gdrdrv.ko")
    os.makedirs(os.path.join(root, "usr/src/linux-headers-6.1.0-50-amd64"))
    write(root, "/usr/src/linux-headers-6.1.0-50-amd64/Makefile")
    os.symlink("/usr/src/linux-headers-6.1.0-50-amd64", os.path.join(root, "lib/modules/6.1.0-50-amd64/build"))
    os.makedirs(os.path.join(root, "lib/modules/5.10.0-9-amd64/updates"))  # leftovers of a removed kernel
    for d, lic in (("nvidia-current-535.261.03", "NVIDIA"), ("nvidia-current-open-535.261.03", "Dual MIT/GPL")):
        write(root, f"/usr/src/{d}/dkms.conf", 'PACKAGE_VERSION="535.261.03"\n')
        write(root, f"/usr/src/{d}/nvidia/nv-p2p.h")
        write(root, f"/usr/src/{d}/nvidia/nv-frontend.c", f'MODULE_LICENSE("{lic}");\n')
    stamp = {"component": "lib", "source": "2.6-abc"}
    write(root, "/var/lib/gdrcopy-ansible/build/2.6-abc/lib/.gdrcopy-stamp.json", json.dumps(stamp))
    write(root, "/opt/gdrcopy/2.6/.gdrcopy-install.json", "not json")
    return root


def test_an_image_root(image_root):
    modinfo = "/usr/sbin/modinfo"
    m = FakeModule(tools={"modinfo": modinfo, "nvidia-smi": SMI, "mokutil": "/usr/bin/mokutil"}, outputs={
        (modinfo, "-b", image_root, "-k", "6.1.0-50-amd64", "-F", "version", "nvidia"): (0, "535.261.03\n", ""),
        (modinfo, "-b", image_root, "-k", "6.1.0-50-amd64", "-F", "license", "nvidia"): (0, "Dual MIT/GPL\n", ""),
    })
    r = gdrcopy_facts.gather(m, params(image_root))
    kernels = {k["release"]: k for k in r["kernel"]["installed"]}
    assert list(kernels) == ["6.1.0-47-amd64", "6.1.0-50-amd64"]  # the leftover 5.10 dir is no kernel
    assert kernels["6.1.0-50-amd64"]["headers"] is True  # through the image's absolute symlink
    assert kernels["6.1.0-47-amd64"]["headers"] is False
    assert kernels["6.1.0-50-amd64"]["sig_hash"] == "sha256"
    assert kernels["6.1.0-50-amd64"]["gdrdrv"] == ["/lib/modules/6.1.0-50-amd64/updates/gdrcopy/gdrdrv.ko"]
    assert kernels["6.1.0-50-amd64"]["gdrdrv_modules"][0]["signed"] is False  # no signature trailer
    assert kernels["6.1.0-47-amd64"]["gdrdrv"] == []
    assert r["kernel"]["running"] == "" and r["live"] is False  # an inspected root is not the running host
    nv = r["nvidia"]
    assert (nv["loaded"], nv["version"], nv["flavor"]) == (False, "535.261.03", "open")
    assert nv["version_source"] == "modinfo -k 6.1.0-50-amd64 nvidia"
    assert nv["source_match"]["dir"] == "/usr/src/nvidia-current-open-535.261.03/nvidia"
    assert [t["flavor"] for t in nv["source_trees"]] == ["proprietary", "open"]
    assert r["builds"] == {"/var/lib/gdrcopy-ansible/build/2.6-abc/lib": {"component": "lib", "source": "2.6-abc"}}
    assert r["installs"] == {"/opt/gdrcopy/2.6": {}}
    assert r["gpus"] == [] and r["backend"]["active"] == "none"
    assert r["blockers"] == []
    assert r["concerns"] == ["kernel 6.1.0-47-amd64 has no gdrdrv (its headers are not installed): gdrcopy has no "
                             "driver after booting it"]
    assert r["health"] == "amber"
    # nvidia-smi and mokutil describe the running host, never an image: not run
    assert [c for c in m.calls if c[0] != modinfo] == []


@pytest.mark.fault(12)
def test_a_compressed_gdrdrv_is_found_and_read_through_modinfo(image_root):
    """A .ko.xz (distributions that compress module trees) counts as the kernel's gdrdrv; its signature is what
    `modinfo FILE` says (it reads compressed modules), since the trailer is inside the compressed data."""
    write(image_root, "/lib/modules/6.1.0-47-amd64/updates/gdrcopy/gdrdrv.ko.xz", b"\xfd7zXZ\x00compressed")
    modinfo = "/usr/sbin/modinfo"
    path = os.path.join(image_root, "lib/modules/6.1.0-47-amd64/updates/gdrcopy/gdrdrv.ko.xz")
    m = FakeModule(tools={"modinfo": modinfo}, outputs={
        (modinfo, path): (0, "filename: x\nsigner: gdrcopy-ansible module signing key\nsig_key: 51:3A\n", "")})
    r = gdrcopy_facts.gather(m, params(image_root))
    k47 = {k["release"]: k for k in r["kernel"]["installed"]}["6.1.0-47-amd64"]
    assert k47["gdrdrv"] == ["/lib/modules/6.1.0-47-amd64/updates/gdrcopy/gdrdrv.ko.xz"]
    assert (k47["gdrdrv_modules"][0]["signed"], k47["gdrdrv_modules"][0]["signer"]) == (
        True, "gdrcopy-ansible module signing key")


@pytest.mark.fault(4)
def test_an_explicit_nvidia_source_dir(image_root):
    m = FakeModule()
    r = gdrcopy_facts.gather(m, params(image_root, build_root="/b", prefix="/p",
                                      nvidia_src_dir="/usr/src/nvidia-current-535.261.03/nvidia"))
    assert r["nvidia"]["source_match"]["flavor"] == "proprietary"
    assert r["nvidia"]["source_match"]["reason"] == "set by the user (gdrcopy_nvidia_src_dir)"
    r = gdrcopy_facts.gather(m, params(image_root, nvidia_src_dir="/nowhere"))
    assert "dir" not in r["nvidia"]["source_match"]
    assert "holds no nv-p2p.h" in r["nvidia"]["source_match"]["reason"]


# --- documentation ---------------------------------------------------------------------------------------------

def test_the_documented_options_are_the_argument_spec():
    doc = yaml.safe_load(gdrcopy_info.DOCUMENTATION)["options"]
    assert set(doc) == set(gdrcopy_info.ARGUMENT_SPEC)
    for name, spec in gdrcopy_info.ARGUMENT_SPEC.items():
        assert doc[name]["type"] == spec["type"], name
        assert doc[name].get("default") == spec.get("default"), name
        assert sorted(doc[name].get("choices", [])) == sorted(spec.get("choices", [])), name


def test_every_returned_key_is_documented(h200, tmp_path, host_fixture):
    documented = set(yaml.safe_load(gdrcopy_info.RETURN))
    # tests: gather's placeholder, which the module drops (gdrcopy_verify runs the tests); converged: when asked for
    assert set(h200[1]) - {"tests"} == documented - {"converged"}
    root = copy_capture(H200 / "fs", tmp_path / "asked")
    m = FakeModule()
    r = gdrcopy_facts.gather(m, params(root, converged_inputs={}), gdrcopy_facts.Host(m, root, live=True))
    assert set(r) - {"tests"} == documented
    # and one level down: a dict documented with contains has exactly those keys (no bogus key from broken YAML)
    doc = yaml.safe_load(gdrcopy_info.RETURN)
    for key, entry in doc.items():
        if "contains" in entry and isinstance(r.get(key), dict):
            always = set(k for k, sub in entry["contains"].items() if "returned" not in sub)
            assert always <= set(r[key]) <= set(entry["contains"]), key


def test_ansible_doc_renders_the_module():
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    r = subprocess.run([str(Path(sys.executable).parent / "ansible-doc"), "-t", "module", "gpufleet.gdrcopy.gdrcopy_info"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "RETURN VALUES" in r.stdout and "converged_inputs" in r.stdout and "ERROR" not in r.stderr


def test_every_return_entry_is_well_formed_yaml():
    """A comma left unquoted in a flow mapping makes bogus keys (a description cut in two); every entry, at every
    depth, is a mapping with a description and a type, and nothing else but the documented fields."""
    fields = {"description", "returned", "type", "elements", "contains", "sample", "version_added"}

    def walk(entries, where):
        for key, entry in entries.items():
            assert isinstance(entry, dict) and "description" in entry and "type" in entry, (where, key, entry)
            assert set(entry) <= fields, (where, key, set(entry) - fields)
            if "contains" in entry:
                walk(entry["contains"], where + "." + key)
    walk(yaml.safe_load(gdrcopy_info.RETURN), "RETURN")


def test_groups_are_looked_up_in_the_roots_group_file(tmp_path):
    write(str(tmp_path), "/etc/group", "root:x:0:\n# a comment\ngdrcopy:x:998:alice\n")
    r = gdrcopy_facts.gather(FakeModule(), params(str(tmp_path), groups=["gdrcopy", "video"]))
    assert r["groups"] == {"gdrcopy": True, "video": False}


def test_the_packages_asked_about_are_read_from_the_package_database(working_root):
    from test_parsers import DPKG_STATUS
    m = working_module(working_root)
    names = ["build-essential", "mokutil", "zstd", "openssl"]
    assert gdrcopy_facts.gather(m, params(working_root), gdrcopy_facts.Host(m, working_root, live=True))["packages"] == {}
    r = gdrcopy_facts.gather(m, params(working_root, packages=names), gdrcopy_facts.Host(m, working_root, live=True))
    assert r["packages"] == {}  # no dpkg status and no rpm: unknown, so the roles ask for every package
    write(working_root, "/var/lib/dpkg/status", DPKG_STATUS)
    r = gdrcopy_facts.gather(m, params(working_root, packages=names), gdrcopy_facts.Host(m, working_root, live=True))
    assert r["packages"] == {"build-essential": True, "mokutil": False, "zstd": False, "openssl": True}


def test_on_an_rpm_host_rpm_is_asked_once(working_root):
    m = working_module(working_root)
    m.tools["rpm"] = "/usr/bin/rpm"
    argv = ("/usr/bin/rpm", "--root", working_root, "-q", "--queryformat", "installed %{NAME}\\n", "gcc", "mokutil")
    m.outputs[argv] = (1, "installed gcc\npackage mokutil is not installed\n", "")
    r = gdrcopy_facts.gather(m, params(working_root, packages=["mokutil", "gcc"]),
                             gdrcopy_facts.Host(m, working_root, live=True))
    assert r["packages"] == {"mokutil": False, "gcc": True} and m.calls.count(argv) == 1


def test_a_kernel_the_controller_has_not_signed_yet_is_reported_awaiting_signature(image_root):
    """The driver record signs on the controller (sign_cert) and 6.1.0-50's build differs from its installed gdrdrv
    (the kernel hook built it; or a new key re-signs): that kernel is built, awaiting signature."""
    from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_pipeline as PIPE
    spec = {"build_helper": "/usr/local/libexec/gdrcopy-ansible/gdrcopy-build", "tarball": "/var/tmp/g.tar.gz",
            "build_log": "/var/lib/gdrcopy-ansible/build/builds.log",
            "driver_dir": "/var/lib/gdrcopy-ansible/build/2.6-abc/driver", "stamp_base": {"sha256": "a" * 64},
            "nvidia_src_dir": "", "flavor": "open", "module_subdir": "updates/gdrcopy", "sign_command": [],
            "sign_cert": "/var/lib/gdrcopy-ansible/mok/controller.der"}
    write(image_root, PIPE.DRIVER_RECORD, json.dumps(spec))
    write(image_root, spec["driver_dir"] + "/6.1.0-50-amd64/gdrdrv.ko", b"\x7fELF built, unsigned")
    m = FakeModule(tools={}, outputs={})
    r = gdrcopy_facts.gather(m, params(image_root))
    assert r["awaiting_signature"] == ["6.1.0-50-amd64"]
    assert ("gdrdrv for 6.1.0-50-amd64 is built, awaiting signature: the controller signs "
            "(mok_signing_sign_on_controller) and installs it at the next run of site.yml; until then 6.1.0-50-amd64 "
            "boots without it") in r["concerns"]
    # once the controller signed it, the build and the install are the same file
    write(image_root, "/lib/modules/6.1.0-50-amd64/updates/gdrcopy/gdrdrv.ko", b"\x7fELF built, unsigned")
    assert gdrcopy_facts.gather(m, params(image_root))["awaiting_signature"] == []
    # a signed build that differs from the install (a key rotation holds the installed one) awaits no signature
    write(image_root, spec["driver_dir"] + "/6.1.0-50-amd64/gdrdrv.ko",
          b"\x7fELF built" + b"<pkcs7>" + b"\0" * 12 + PIPE.SIG_MAGIC)
    assert gdrcopy_facts.gather(m, params(image_root))["awaiting_signature"] == []
    write(image_root, PIPE.DRIVER_RECORD, json.dumps(dict(spec, sign_cert="")))  # the host signs: nothing awaits
    write(image_root, spec["driver_dir"] + "/6.1.0-50-amd64/gdrdrv.ko", b"\x7fELF another")
    assert gdrcopy_facts.gather(m, params(image_root))["awaiting_signature"] == []


def test_module_loading_disabled_on_a_host_whose_kernel_is_ours_asks_for_a_reboot_without_it(working_root):
    """The same code as on the captured VMs, another remedy: this host has its kernel's module tree and kmod, so
    whoever runs it can find the switch and reboot; the VMs' kernel is provided from elsewhere."""
    shutil.rmtree(os.path.join(working_root, "sys/module/gdrdrv"))
    write(working_root, "/proc/sys/kernel/modules_disabled", "1\n")
    m = working_module(working_root)
    r = gdrcopy_facts.gather(m, params(working_root), gdrcopy_facts.Host(m, working_root, live=True))
    found = dict((f["code"], f) for f in r["findings"])
    assert list(found)[:2] == ["modules_disabled", "dmabuf_unavailable"]  # tree, tools and EFI are there
    assert found["modules_disabled"]["remedy"].startswith("find what writes 1 to kernel.modules_disabled")
    assert "no_module_tree" not in found and "sig_enforced_no_efi" not in found
