"""gdrcopy_backend (module_utils/gdrcopy_plan.py: choose_backend, the plan of a DMA-BUF host): auto, gdrdrv and dmabuf
decided on the real H200 capture as it is (CUDA driver 13.0, module loading disabled) and on the same capture as a
driver of CUDA 13.3 shows it (the one line of `nvidia-smi -q` that names the CUDA version changed: no host with such a
driver was at hand to capture), then on small synthetic hosts for the Secure Boot cases."""

import json
from pathlib import Path

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_pipeline as PIPE
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_plan as PLAN
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_smoke as SMOKE
from test_gdrcopy_info import H200, SMI, SMI_Q, SMI_QUERY, FakeModule, captured, copy_capture, params

DISABLED = "module loading is disabled on this host (kernel.modules_disabled=1)"


def h200_facts(tmp_path, cuda):
    """gdrcopy_info's facts of the captured H200, its driver reporting CUDA `cuda`."""
    rc, memory, err = captured(H200 / "cmd" / "nvidia_smi_q.txt")
    assert "CUDA Version                                           : 13.0\n" in memory
    memory = memory.replace("CUDA Version                                           : 13.0",
                            "CUDA Version                                           : " + cuda)
    m = FakeModule(tools={"nvidia-smi": SMI}, outputs={
        SMI_QUERY: captured(H200 / "cmd" / "nvidia_smi_query_csv.txt"), SMI_Q: (rc, memory, err)})
    root = copy_capture(H200 / "fs", tmp_path / ("h200-" + cuda))
    return gdrcopy_facts.gather(m, params(root), gdrcopy_facts.Host(m, root, live=True))


def plan(info, backend, version="2.6", mode="host", signer=""):
    return PLAN.plan(info, [], mode, "gdrcopy", True, {}, {}, [], "linux-headers-{kernel}", "refuse", backend,
                     version, signer)


@pytest.fixture(scope="module")
def old(tmp_path_factory):
    return h200_facts(tmp_path_factory.mktemp("old"), "13.0")


@pytest.fixture(scope="module")
def new(tmp_path_factory):
    return h200_facts(tmp_path_factory.mktemp("new"), "13.3")


def test_the_captures_differ_only_in_the_cuda_driver(old, new):
    assert (old["cuda"]["driver_version"], new["cuda"]["driver_version"]) == ("13.0", "13.3")
    assert old["kernel"]["modules_disabled"] and new["kernel"]["modules_disabled"]


def test_auto_takes_dmabuf_where_gdrdrv_cannot_load_and_the_driver_allows_it(new):
    p = plan(new, "auto")
    assert p["backend"] == {
        "name": "dmabuf", "cannot_load": DISABLED, "dmabuf": "CUDA driver 13.3 >= 13.3 and gdrcopy 2.6 >= 2.6",
        "reason": DISABLED + "; gdrcopy maps GPU memory through DMA-BUF instead (CUDA driver 13.3 >= 13.3 and "
                             "gdrcopy 2.6 >= 2.6)"}
    # the library only: no kernel, headers or NVIDIA source, whatever the host has
    assert (p["kernels"], p["headers_to_install"], p["nvidia_source_package"]) == ([], [], "")
    assert p["nvidia"] == {"dir": "", "reason": "not needed: no gdrdrv is built for the DMA-BUF backend"}


def test_auto_on_the_older_driver_stops_with_both_reasons(old):
    with pytest.raises(PLAN.Blocked) as err:
        plan(old, "auto")
    msg = str(err.value)
    assert msg.startswith(DISABLED + ": gdrdrv cannot be loaded until reboot;")
    assert msg.endswith(" Nor can gdrcopy's DMA-BUF path replace gdrdrv here (CUDA driver 13.0 < 13.3).")


def test_auto_with_a_release_before_2_6_stops_with_the_release(new):
    with pytest.raises(PLAN.Blocked) as err:
        plan(new, "auto", version="2.5.1")
    assert str(err.value).endswith("(gdrcopy 2.5.1 < 2.6).")


def test_dmabuf_is_refused_in_one_sentence_where_it_cannot_work(old, new):
    for info, version, why in ((old, "2.6", "CUDA driver 13.0 < 13.3"), (new, "2.5.1", "gdrcopy 2.5.1 < 2.6")):
        with pytest.raises(PLAN.Blocked) as err:
            plan(info, "dmabuf", version=version)
        assert str(err.value).startswith(
            "gdrcopy_backend is dmabuf, but gdrcopy's DMA-BUF path cannot work on this host: %s. It needs" % why)
        assert str(err.value).endswith("Set gdrcopy_backend: gdrdrv or auto. Nothing was changed.")
    p = plan(new, "dmabuf")
    assert p["backend"]["name"] == "dmabuf" and p["kernels"] == []
    assert p["backend"]["reason"] == "gdrcopy_backend: dmabuf (CUDA driver 13.3 >= 13.3 and gdrcopy 2.6 >= 2.6)"


def test_gdrdrv_asked_for_stops_as_before_without_dmabuf_advice(new):
    with pytest.raises(PLAN.Blocked) as err:
        plan(new, "gdrdrv")
    assert "DMA-BUF" not in str(err.value) and str(err.value).startswith(DISABLED)


def test_an_image_has_no_driver_to_ask_so_dmabuf_is_refused_and_auto_builds_gdrdrv():
    # an image (a chroot) runs no nvidia-smi: the CUDA driver is unknown there, and auto never picks DMA-BUF for it
    base = {"kernel": {"installed": [], "modules_disabled": True}, "cuda": {"driver_version": ""}}
    assert PLAN.choose_backend("auto", base, "image", "2.6", "")["name"] == "gdrdrv"
    with pytest.raises(PLAN.Blocked) as err:
        PLAN.choose_backend("dmabuf", base, "image", "2.6", "")
    assert "CUDA driver version unknown (nvidia-smi gave none; 13.3+ needed)" in str(err.value)


def synthetic(efi=True, secure_boot=True, sig_enforce=False, cuda="13.3"):
    return {"kernel": {"modular": True, "modules_disabled": False, "sig_enforce": sig_enforce},
            "secure_boot": {"efi": efi, "enabled": secure_boot}, "cuda": {"driver_version": cuda}}


@pytest.mark.parametrize("host, signer, name, cannot", [
    # Secure Boot and nobody signs: gdrdrv would be refused
    (synthetic(), "", "dmabuf", "module signatures are enforced here (Secure Boot) and nothing signs gdrdrv in this "
                                "run (gdrcopy_sign_command is empty and the mok_signing role is off)"),
    # mok_signing signs, and EFI lets its key be enrolled: gdrdrv
    (synthetic(), "mok", "gdrdrv", ""),
    # enforced without EFI: a MOK cannot be enrolled, only a command with a key the kernel trusts signs usefully
    (synthetic(efi=False, secure_boot=False, sig_enforce=True), "mok", "dmabuf",
     "module signatures are enforced here (module.sig_enforce) and the host has no EFI, so no Machine Owner Key can "
     "be enrolled: only keys built into the kernel are trusted"),
    (synthetic(efi=False, secure_boot=False, sig_enforce=True), "command", "gdrdrv", ""),
    # nothing enforced: gdrdrv, whatever the driver
    (synthetic(secure_boot=False), "", "gdrdrv", ""),
])
def test_auto_under_secure_boot(host, signer, name, cannot):
    chosen = PLAN.choose_backend("auto", host, "host", "2.6", signer)
    assert (chosen["name"], chosen["cannot_load"]) == (name, cannot)


def test_auto_keeps_gdrdrv_under_secure_boot_without_a_signer_when_dmabuf_cannot_work():
    chosen = PLAN.choose_backend("auto", synthetic(cuda="12.8"), "host", "2.6", "")
    assert chosen["name"] == "gdrdrv"
    assert chosen["reason"] == (
        "gdrdrv, though module signatures are enforced here (Secure Boot) and nothing signs gdrdrv in this run "
        "(gdrcopy_sign_command is empty and the mok_signing role is off); the DMA-BUF path is not available either "
        "(CUDA driver 12.8 < 13.3)")


# --- what the status says on a host the last install gave the DMA-BUF backend -------------------------------------

def record_dmabuf(root):
    """The driver record gdrcopy_build writes for a DMA-BUF install (its driver options, backend dmabuf)."""
    spec = {"build_helper": "/usr/local/libexec/gdrcopy-ansible/gdrcopy-build",
            "tarball": "/var/lib/gdrcopy-ansible/build/src/gdrcopy-2.6-0123456789ab.tar.gz",
            "build_log": "/var/lib/gdrcopy-ansible/build/builds.log",
            "driver_dir": "/var/lib/gdrcopy-ansible/build/2.6-0123456789ab/driver",
            "stamp_base": {"component": "driver", "sha256": "0" * 64}, "nvidia_src_dir": "", "flavor": "open",
            "module_subdir": "updates/gdrcopy", "sign_command": [], "sign_cert": "", "timeout": 1800,
            "backend": "dmabuf"}
    path = Path(root) / PIPE.DRIVER_RECORD.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec))


def gather(tmp_path, cuda, record, smoke=""):
    rc, memory, err = captured(H200 / "cmd" / "nvidia_smi_q.txt")
    memory = memory.replace("CUDA Version                                           : 13.0",
                            "CUDA Version                                           : " + cuda)
    m = FakeModule(tools={"nvidia-smi": SMI}, outputs={
        SMI_QUERY: captured(H200 / "cmd" / "nvidia_smi_query_csv.txt"), SMI_Q: (rc, memory, err)})
    root = copy_capture(H200 / "fs", tmp_path / "root")
    if record:
        record_dmabuf(root)
    smoke_helper = Path(root) / gdrcopy_facts.SMOKE_PROGRAM.lstrip("/")
    smoke_helper.parent.mkdir(parents=True, exist_ok=True)
    smoke_helper.write_text("")
    return gdrcopy_facts.gather(m, params(root, release="2.6", smoke=smoke), gdrcopy_facts.Host(m, root, live=True))


def test_a_dmabuf_host_is_not_blocked_by_the_missing_gdrdrv(tmp_path):
    facts = gather(tmp_path, "13.3", record=True)
    backend = facts["backend"]
    assert (backend["active"], backend["configured"]) == ("dmabuf", "dmabuf")
    assert backend["reason"] == ("gdrcopy_backend chose DMA-BUF (CUDA driver 13.3 >= 13.3 and gdrcopy 2.6 >= 2.6): "
                                 "no gdrdrv")
    assert not [s for s in facts["blockers"] + facts["concerns"] if "gdrdrv" in s or "DMA-BUF" in s]


def test_without_the_record_the_same_host_only_falls_back_to_dmabuf_with_a_warning(tmp_path):
    facts = gather(tmp_path, "13.3", record=False)
    assert (facts["backend"]["active"], facts["backend"]["configured"]) == ("dmabuf", "")
    assert any(s.startswith(DISABLED) and "gdrcopy uses its DMA-BUF path instead" in s for s in facts["concerns"])


def test_a_dmabuf_host_whose_driver_went_below_13_3_is_blocked_with_what_to_do(tmp_path):
    facts = gather(tmp_path, "13.0", record=True)
    assert facts["backend"]["active"] == "none"
    found = [f for f in facts["findings"] if f["code"] == "dmabuf_configured_unavailable"]
    assert [f["text"] for f in found] == [
        "gdrcopy_backend is dmabuf, but the DMA-BUF path cannot work here now: CUDA driver 13.0 < 13.3"]
    assert found[0]["remedy"].startswith("run the gdrcopy role again with gdrcopy_backend: gdrdrv or auto")
    assert found[0]["text"] in facts["blockers"]


def test_the_smoke_check_of_a_dmabuf_host_opens_through_dmabuf(tmp_path):
    facts = gather(tmp_path, "13.3", record=True, smoke="2.6")
    assert facts["smoke"]["method"] == "dmabuf" and facts["smoke"]["ran"] is True  # the capture has a GPU
    assert facts["smoke"]["passed"] is False  # no libgdrapi on this machine: the child says so
    assert "cannot load libgdrapi.so.2" in facts["smoke"]["msg"]


def test_the_smoke_check_of_a_dmabuf_host_without_a_gpu_is_skipped_not_failed(tmp_path):
    h = gdrcopy_facts.Host(FakeModule(), str(tmp_path), live=True)
    (tmp_path / gdrcopy_facts.SMOKE_PROGRAM.lstrip("/")).parent.mkdir(parents=True)
    (tmp_path / gdrcopy_facts.SMOKE_PROGRAM.lstrip("/")).write_text("")
    smoke = gdrcopy_facts.smoke_check(h, "2.6", {"backend": {"configured": "dmabuf"}, "gpus": []})
    assert (smoke["ran"], smoke["passed"], smoke["skipped"]) == (False, False, True)
    assert smoke["msg"].startswith("not run: the DMA-BUF backend opens through the CUDA driver and a GPU")


def test_the_dmabuf_smoke_check_against_the_fixture_library_says_gdr_open_failed(built_lib):
    """The fixture library has no DMA-BUF path (as a 2.6 library on a driver without dma-buf mmap): gdr_open fails."""
    rc, out, err = SMOKE.in_child(SMOKE.check, (str(built_lib / "src" / "libgdrapi.so.2"), "2.6", True), 30)
    result = json.loads(out)
    assert rc == 0 and result["passed"] is False and result["runtime_version"] == "2.6"
    assert result["msg"].startswith("gdr_open failed with GDRCOPY_USE_DMABUF_MMAP=1")
