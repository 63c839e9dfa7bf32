"""The GPU facts and the signing state from real captures: the H100 device machine of 2026-12-07 (nvidia-smi -q with
the fabric section, /proc/keys, /proc/config.gz) and the shared H200 one. Every GPU field has the same type whether
nvidia-smi answers or only sysfs and /proc/driver/nvidia do."""

import gzip

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P
from conftest import FIXTURES
from test_gdrcopy_info import H200, SMI, SMI_Q, SMI_QUERY, FakeModule, captured, copy_capture, params

H100 = FIXTURES / "hosts" / "h100-device-2026-12-07"
TOPO = (SMI, "topo", "-m")
NVLINK = (SMI, "nvlink", "-s")


def config_gz(root, capture):
    """/proc/config.gz from the captured `zcat /proc/config.gz | grep ...` lines (the config lines only)."""
    rc, text, dummy = captured(capture)
    lines = [line for line in text.splitlines() if line.startswith(("CONFIG_", "# CONFIG_"))]
    (root / "proc" / "config.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))


def h100(tmp_path, smi=True):
    root = copy_capture(H100 / "fs", tmp_path / ("smi" if smi else "sysfs"))
    config_gz(tmp_path / ("smi" if smi else "sysfs"), H100 / "cmd" / "config_gz.txt")
    m = FakeModule(tools={"nvidia-smi": SMI} if smi else {}, outputs={
        SMI_QUERY: captured(H100 / "cmd" / "smi_query_csv.txt"), SMI_Q: captured(H100 / "cmd" / "smi_q.txt")})
    return m, gdrcopy_facts.gather(m, params(root), gdrcopy_facts.Host(m, root, live=True))


H100_GPU = {
    "index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-472a6ba2-ccc6-83b7-1147-a5d7404c16af",
    "bus_id": "0000:00:06.0", "driver_version": "580.159.04", "memory_total_mib": 81559, "memory_used_mib": 0,
    "bar1_total_mib": 131072, "bar1_used_mib": 1, "bar1_used_pct": 0, "numa_node": -1, "cpu_affinity": "0-15",
    "link": {"speed": 32.0, "max_speed": 32.0, "gen": 5, "max_gen": 5, "width": 16, "max_width": 16},
    "fabric": {"state": "N/A", "status": "N/A"}, "nvlink": {"active": 0, "inactive": 0, "peers": {}},
    "source": "nvidia-smi"}


def test_the_h100_gpu_from_nvidia_smi(tmp_path):
    m, r = h100(tmp_path)
    assert r["gpus"] == [H100_GPU]
    assert m.calls == [SMI_QUERY, SMI_Q]  # one GPU: no topology or NVLink call


def types(value):
    """The shape of a value: dicts by key, everything else by type (None stands for 'not known here')."""
    if isinstance(value, dict):
        return dict((k, types(v)) for k, v in value.items())
    return type(value).__name__


@pytest.mark.parametrize("capture", ["h100", "h200"])
def test_every_gpu_field_has_the_same_type_with_and_without_nvidia_smi(tmp_path, capture):
    if capture == "h100":
        with_smi, without = h100(tmp_path)[1]["gpus"], h100(tmp_path, smi=False)[1]["gpus"]
    else:
        outputs = {SMI_QUERY: captured(H200 / "cmd" / "nvidia_smi_query_csv.txt"),
                   SMI_Q: captured(H200 / "cmd" / "nvidia_smi_q.txt")}
        got = []
        for smi in (True, False):
            root = copy_capture(H200 / "fs", tmp_path / str(smi))
            m = FakeModule(tools={"nvidia-smi": SMI} if smi else {}, outputs=outputs)
            got.append(gdrcopy_facts.gather(m, params(root), gdrcopy_facts.Host(m, root, live=True))["gpus"])
        with_smi, without = got
    assert len(with_smi) == len(without) == 1
    a, b = types(with_smi[0]), types(without[0])
    only_smi = ("memory_total_mib", "memory_used_mib", "bar1_used_mib", "bar1_used_pct")
    for key in only_smi:  # only nvidia-smi knows them: None without it
        assert (a.pop(key), b.pop(key)) == ("int", "NoneType"), key
    assert a == b
    # the values both sources know are the same values
    same = ("index", "name", "uuid", "bus_id", "driver_version", "bar1_total_mib", "numa_node", "cpu_affinity", "link")
    assert dict((k, with_smi[0][k]) for k in same) == dict((k, without[0][k]) for k in same)


def test_the_h100_signing_state_comes_from_proc_config_gz_and_proc_keys(tmp_path):
    """The running kernel is not installed on the host (no /boot/config): its config comes from /proc/config.gz,
    which forces signatures and lockdown; /proc/keys names only the kernel's build-time key. No EFI: no MOK."""
    dummy, r = h100(tmp_path)
    assert r["kernel"]["running_config"] == {"sig_force": True, "sig_hash": "sha512", "lockdown_force": "integrity",
                                             "source": "/proc/config.gz"}
    assert r["signing"]["enforced_by"] == ["module.sig_enforce=Y", "CONFIG_MODULE_SIG_FORCE",
                                           "CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY"]
    assert (r["signing"]["hash"], r["signing"]["efi"], r["signing"]["gdrdrv"]["accepted"]) == ("sha512", False, None)
    assert [f["code"] for f in r["findings"]] == [
        "modules_disabled", "no_module_tree", "no_kmod_tools", "sig_enforced_no_efi", "dmabuf_unavailable"]


def test_proc_keys_names_the_keys_the_kernel_holds():
    text = captured(H100 / "cmd" / "proc_keys.txt")[1]
    assert P.parse_proc_keys(text) == ["Build time autogenerated kernel key"]
    assert P.parse_proc_keys("") == []


def test_a_signer_the_kernel_holds_is_accepted_and_one_it_does_not_is_unknown():
    from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_verdict as V
    mod = {"path": "/lib/modules/k/updates/gdrcopy/gdrdrv.ko", "signed": True, "ours": False,
           "signer": "Build time autogenerated kernel key"}
    assert V.accepted(mod, True, {}, {"Build time autogenerated kernel key"})[0] is True
    assert V.accepted(dict(mod, signer="Someone else"), True, {}, {"Build time autogenerated kernel key"})[0] is None
    assert V.accepted(dict(mod, signed=False), True, {}, set()) == (False, "unsigned, and signatures are enforced")
    assert V.accepted(dict(mod, signed=False), False, {}, set())[0] is True  # loads, tainting the kernel


def test_the_topology_matrix_gives_nvlink_peers_and_affinities():
    """The captured one-GPU matrix, and a two-GPU one in nvidia-smi's layout (tab-separated cells, NV<n> a bonded
    set of n links, a trailing empty GPU NUMA ID cell)."""
    assert P.parse_nvidia_smi_topo(captured(H100 / "cmd" / "smi_topo_m.txt")[1]) == {
        "GPU0": {"nvlink": {}, "cpu_affinity": "0-15", "numa_affinity": "0"}}
    two = ("\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
           "GPU0\t X \tNV18\tPIX\t0-23,96-119\t0\t\tN/A\nGPU1\tNV18\t X \tSYS\t24-47,120-143\t1\t\tN/A\n")
    assert P.parse_nvidia_smi_topo(two) == {
        "GPU0": {"nvlink": {"GPU1": 18}, "cpu_affinity": "0-23,96-119", "numa_affinity": "0"},
        "GPU1": {"nvlink": {"GPU0": 18}, "cpu_affinity": "24-47,120-143", "numa_affinity": "1"}}


def test_nvlink_states_are_counted_per_gpu():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"
            "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n")
    assert P.parse_nvidia_smi_nvlink(text) == {0: {"active": 1, "inactive": 1}, 1: {"active": 2, "inactive": 0}}
    assert P.parse_nvidia_smi_nvlink(captured(H100 / "cmd" / "smi_nvlink_s.txt")[1]) == {}


def test_bar1_from_sysfs_is_the_second_memory_region():
    """64-bit BAR0 (H100, H200: slots 0-1), then BAR1; a 32-bit BAR0 puts BAR1 in slot 1."""
    h100_resource = (H100 / "fs/sys/bus/pci/devices/0000%3A00%3A06.0/resource").read_text()
    assert P.parse_pci_bar1_mib(h100_resource) == 131072
    bar0_32 = ("0x00000000fa000000 0x00000000faffffff 0x0000000000040200\n"
               "0x000000e000000000 0x000000efffffffff 0x000000000014220c\n"
               "0x0000000000000000 0x0000000000000000 0x0000000000000000\n")
    assert P.parse_pci_bar1_mib(bar0_32) == 65536
    assert P.parse_pci_bar1_mib("") is None
