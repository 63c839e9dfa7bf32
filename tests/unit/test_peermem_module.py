"""plugins/modules/gdrcopy_peermem and module_utils/gdrcopy_peermem: nvidia-peermem by nvidia_peermem_state, the
legacy nv_peer_mem, and what the role exports and says.

apply() runs against a host whose facts and commands the test gives (modprobe cannot run here); the default VM
scenario runs the real modules: the stand-in nvidia-peermem, and a stand-in nv_peer_mem left and removed."""

import copy
import os

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_peermem as PM
from conftest import StubModule as Module
from test_gdrcopy_info import working_module, working_root  # noqa: F401 (a fixture)
from ansible_collections.gpufleet.gdrcopy.plugins.modules import gdrcopy_peermem as M

MOFED = {"loaded": True, "peer_memory_api": True, "evidence": "/sys/kernel/mm/memory_peers lists nv_mem"}
NONE = {"loaded": False, "peer_memory_api": None, "evidence": "ib_core is not loaded"}


def facts(ib=MOFED, available=True, loaded=False, refcount=0, legacy_loaded=False, legacy_refcount=0, service=""):
    return {"kernel": {"running": "6.1.0-41-amd64", "installed": [{"release": "6.1.0-41-amd64"}]},
            "nvidia": {"version": "535.261.03", "flavor": "proprietary"},
            "peermem": {"nvidia_peermem": {"available": available, "loaded": loaded, "refcount": refcount},
                        "nv_peer_mem": {"available": legacy_loaded, "loaded": legacy_loaded,
                                        "refcount": legacy_refcount, "service": service},
                        "ib_core": copy.deepcopy(ib)}}


class Host:
    def __init__(self, answers=None, live=True):
        self.live, self.calls, self.answers = live, [], answers or {}

    @staticmethod
    def tool(name):
        return "/usr/sbin/" + name

    def run(self, argv):
        self.calls.append(argv)
        return self.answers.get(tuple(argv[1:]), (0, "", ""))


@pytest.fixture
def host(monkeypatch, tmp_path):
    """The facts the module reads, and its modprobe.d files under tmp_path."""
    box = {"facts": facts()}
    monkeypatch.setattr(M, "read", lambda h: box["facts"])
    monkeypatch.setattr(PM, "BLACKLIST", {"nvidia_peermem": str(tmp_path / "gdrcopy-ansible-nvidia-peermem.conf"),
                                          "nv_peer_mem": str(tmp_path / "gdrcopy-ansible-nv_peer_mem.conf")})
    return box


def params(**kw):
    return dict({"state": "present", "legacy": "leave", "persist": True, "image": False}, **kw)


def test_present_loads_it_and_hands_it_to_the_boot_chain(host):
    h = Host()
    r = M.apply(Module(), params(), h)
    assert h.calls == [["/usr/sbin/modprobe", "nvidia-peermem"]] and r["changes"] == ["loaded nvidia-peermem"]
    assert r["loaded"] and r["boot_modules"] == ["nvidia-peermem"] and r["report"]["action"] == "loaded"
    assert r["msg"] == "nvidia-peermem loads after nvidia and loads at every boot, before gdrdrv"
    host["facts"] = facts(loaded=True)
    r = M.apply(Module(), params(), Host())
    assert r["changed"] is False and r["loaded"] and r["report"]["action"] == "none"


def test_required_without_the_module_fails_before_anything_changes(host):
    host["facts"] = facts(available=False, legacy_loaded=True)
    h = Host()
    with pytest.raises(M.Failed) as err:
        M.apply(Module(), params(state="required", legacy="remove"), h)
    assert str(err.value).startswith("nvidia_peermem_state is required, but the NVIDIA driver 535.261.03 ships no "
                                     "nvidia-peermem for kernel 6.1.0-41-amd64")
    assert "Nothing was changed" in str(err.value) and h.calls == []
    assert not os.path.exists(PM.BLACKLIST["nv_peer_mem"])


def test_a_failed_load_is_reported_or_fails_when_required(host):
    h = Host({("nvidia-peermem",): (1, "", "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument")})
    r = M.apply(Module(), params(), h)
    assert not r["loaded"] and r["changes"] == [] and r["report"]["msg"].endswith(
        "; but modprobe failed: modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument")
    with pytest.raises(M.Failed, match="^nvidia_peermem_state is required, but `modprobe nvidia-peermem` failed: "):
        M.apply(Module(), params(state="required"), h)


def test_a_loaded_legacy_module_that_stays_keeps_nvidia_peermem_out(host):
    host["facts"] = facts(legacy_loaded=True, service="/lib/systemd/system/nv_peer_mem.service")
    h = Host()
    r = M.apply(Module(), params(), h)
    assert h.calls == [] and r["boot_modules"] == [] and r["report"]["legacy_nv_peer_mem"]
    assert r["msg"].startswith("the deprecated nv_peer_mem is loaded (/lib/systemd/system/nv_peer_mem.service): it "
                               "conflicts with nvidia-peermem. nvidia_peermem_legacy_nv_peer_mem is leave: it stays. "
                               "the deprecated nv_peer_mem is loaded and conflicts with nvidia-peermem")
    with pytest.raises(M.Failed, match="nv_peer_mem is loaded and conflicts"):
        M.apply(Module(), params(state="required"), h)


def test_remove_stops_disables_blacklists_and_unloads_the_legacy_module_then_loads(host):
    host["facts"] = facts(legacy_loaded=True, service="/lib/systemd/system/nv_peer_mem.service")
    h = Host({("is-active", "nv_peer_mem"): (0, "active\n", ""), ("is-enabled", "nv_peer_mem"): (0, "enabled\n", "")})
    r = M.apply(Module(), params(legacy="remove"), h)
    assert [c[1:] for c in h.calls if c[1] not in ("is-active", "is-enabled")] == [
        ["stop", "nv_peer_mem"], ["disable", "nv_peer_mem"], ["nv_peer_mem"], ["nvidia-peermem"]]
    assert open(PM.BLACKLIST["nv_peer_mem"]).read().endswith("blacklist nv_peer_mem\ninstall nv_peer_mem /bin/false\n")
    assert r["loaded"] and "it is disabled and unloaded" in r["msg"]
    host["facts"] = facts(legacy_loaded=True, legacy_refcount=2)
    r = M.apply(Module(), params(legacy="remove"), Host())
    assert "nv_peer_mem is in use (2 user(s)): it stays loaded until the next boot" in r["msg"]


def test_absent_unloads_an_idle_module_and_keeps_it_out_at_boot(host):
    host["facts"] = facts(loaded=True)
    h = Host()
    r = M.apply(Module(), params(state="absent"), h)
    assert h.calls == [["/usr/sbin/rmmod", "nvidia_peermem"]] and not r["loaded"] and r["boot_modules"] == []
    assert open(PM.BLACKLIST["nvidia_peermem"]).read().endswith("blacklist nvidia_peermem\ninstall nvidia_peermem /bin/false\n")
    host["facts"] = facts(loaded=False)  # auto, with the peer-memory API: loaded again, and free to load at boot
    r = M.apply(Module(), params(state="auto"), Host())
    assert r["changes"] == ["loaded nvidia-peermem", "removed " + PM.BLACKLIST["nvidia_peermem"]]
    assert not os.path.exists(PM.BLACKLIST["nvidia_peermem"])


def test_in_use_it_stays_loaded_under_absent(host):
    host["facts"] = facts(loaded=True, refcount=1)
    h = Host()
    r = M.apply(Module(), params(state="absent"), h)
    assert h.calls == [] and r["report"]["action"] == "unloaded" and r["loaded"] is False


def test_an_image_loads_nothing_and_says_what_boots(host):
    host["facts"] = facts(ib=NONE)
    h = Host(live=False)
    r = M.apply(Module(), params(state="present", image=True), h)
    assert h.calls == [] and r["loaded"] is False and r["boot_modules"] == ["nvidia-peermem"]


def test_check_mode_changes_nothing(host):
    host["facts"] = facts(legacy_loaded=True)
    h = Host()
    r = M.apply(Module(check_mode=True), params(legacy="remove"), h)
    assert r["changes"] == ["wrote " + PM.BLACKLIST["nv_peer_mem"], "unloaded nv_peer_mem", "loaded nvidia-peermem"]
    assert h.calls == [] and not os.path.exists(PM.BLACKLIST["nv_peer_mem"])


def test_the_module_reads_what_gdrcopy_info_reads_for_the_plan(working_root):  # noqa: F811
    """read() takes only the releases of the kernels (no module signature), yet the plan gets the same facts as
    from gdrcopy_info's full gather, on a host tree with nvidia-peermem loaded over a MOFED ib_core."""
    from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts as F
    m = working_module(working_root)
    full = F.gather(m, {"root": working_root, "build_root": "/var/lib/gdrcopy-ansible/build",
                        "prefix": "/opt/gdrcopy", "cuda_home": "/usr/local/cuda"},
                    F.Host(m, working_root, live=True))
    facts = M.read(F.Host(m, working_root, live=True))
    assert facts["peermem"] == full["peermem"] and facts["nvidia"] == full["nvidia"]
    assert PM.plan("auto", "leave", facts) == PM.plan("auto", "leave", full)
    assert [k["release"] for k in facts["kernel"]["installed"]] == [k["release"] for k in full["kernel"]["installed"]]


# --- the answer from a read of the same run (the action plugin: no module start) --------------------------------

def read_of(f, blacklisted=()):
    return dict(f, peermem=dict(f["peermem"], blacklist_files=sorted(PM.BLACKLIST[n] for n in blacklisted)))


@pytest.mark.parametrize("f, p", [
    (facts(ib=NONE), params(image=True)),                                 # an image: nothing loads there
    (facts(loaded=True), params(image=True, state="required")),
    (facts(), params(image=True, persist=False)),
    (facts(ib=NONE), params(state="auto")),                               # a host where auto leaves it unloaded
    (facts(loaded=True), params()),                                       # a host where it is loaded already
    (facts(legacy_loaded=True), params(image=True)),                      # the legacy module left, and said so
])
def test_an_answer_that_needs_nothing_on_the_host_comes_from_the_read_and_equals_the_module(host, f, p):
    host["facts"] = f
    h = Host(live=not p["image"])
    want = M.apply(Module(), p, h)
    assert h.calls == [] and want["changed"] is False
    assert PM.from_read(read_of(f), p["state"], p["legacy"], p["persist"], p["image"]) == want


@pytest.mark.parametrize("f, p, blacklisted", [
    (facts(), params(), ()),                                              # a host where it has to be loaded
    (facts(available=False), params(state="required", image=True), ()),  # required and impossible: the module fails
    (facts(legacy_loaded=True), params(legacy="remove", image=True), ()),  # the legacy module to remove
    (facts(), params(state="absent", image=True), ()),                    # absent writes its modprobe.d file
    (facts(), params(image=True), ("nvidia_peermem",)),                   # a file absent left, to remove
])
def test_the_module_runs_when_there_is_something_to_do_on_the_host(f, p, blacklisted):
    assert PM.from_read(read_of(f, blacklisted), p["state"], p["legacy"], p["persist"], p["image"]) is None


def test_a_read_without_the_plans_facts_lets_the_module_read_the_host():
    assert PM.from_read(facts(), "present", "leave", True, True) is None  # no blacklist_files: an older read
    assert PM.from_read({"kernel": {}}, "present", "leave", True, True) is None


def test_the_full_read_says_which_modprobe_d_files_are_there(working_root):  # noqa: F811
    from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts as F
    m = working_module(working_root)
    params_ = {"root": working_root, "build_root": "/var/lib/gdrcopy-ansible/build", "prefix": "/opt/gdrcopy",
               "cuda_home": "/usr/local/cuda"}
    assert F.gather(m, params_, F.Host(m, working_root, live=True))["peermem"]["blacklist_files"] == []
    path = os.path.join(working_root, PM.BLACKLIST["nv_peer_mem"].lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(PM.blacklist("nv_peer_mem"))
    assert F.gather(m, params_, F.Host(m, working_root, live=True))["peermem"]["blacklist_files"] == [
        PM.BLACKLIST["nv_peer_mem"]]


def test_the_action_plugin_takes_the_modules_defaults_and_leaves_odd_options_to_the_module():
    from ansible_collections.gpufleet.gdrcopy.plugins.action.gdrcopy_peermem import ActionModule
    read = read_of(facts(ib=NONE))
    answer = ActionModule._from_read(read, {"image": "yes"})  # state auto, legacy leave, persist true: the defaults
    assert answer == PM.from_read(read, "auto", "leave", True, True) and answer is not None
    assert ActionModule._from_read(read, {"image": True, "state": "loaded"}) is None  # the module refuses it
    assert ActionModule._from_read(read, {"image": "maybe"}) is None
    assert ActionModule._from_read({"kernel": {}}, {"image": True}) is None
