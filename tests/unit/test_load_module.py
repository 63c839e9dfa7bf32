"""plugins/modules/gdrcopy_load and module_utils/gdrcopy_load: the load chain, the reload decision, the device node.

decide() is pure; load() runs against a host whose state and commands the test gives (modprobe cannot run here:
the VM scenarios load the real chain, with the test-only stand-ins for nvidia and nvidia-peermem)."""

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_load as L
from ansible_collections.gpufleet.gdrcopy.plugins.modules import gdrcopy_load as M


def state(loaded=("nvidia",), gdrdrv=None, refusal=""):
    g = {"loaded": False, "refcount": -1, "srcversion": "", "installed_srcversion": "ABC", "params": {}}
    g.update(gdrdrv or {})
    return {"loaded": dict((m, True) for m in loaded), "gdrdrv": g, "load_refusal": refusal}


LOADED = {"loaded": True, "refcount": 0, "srcversion": "ABC", "installed_srcversion": "ABC",
          "params": {"dbg_enabled": 0, "info_enabled": 0, "use_persistent_mapping": None}}


def test_a_fresh_host_loads_the_chain_in_order_then_gdrdrv():
    plan = L.decide(state(loaded=()), ["nvidia", "nvidia-peermem"], {})
    assert plan["steps"] == [["modprobe", "nvidia"], ["modprobe", "nvidia-peermem"], ["modprobe", "gdrdrv"]]
    assert plan["mknod"] and not plan["pending"] and plan["refused"] == ""


def test_a_module_loaded_under_its_sysfs_name_is_not_loaded_again():
    plan = L.decide(state(loaded=("nvidia", "nvidia_peermem")), ["nvidia", "nvidia-peermem"], {})
    assert plan["steps"] == [["modprobe", "gdrdrv"]]


def test_a_current_gdrdrv_is_left_alone():
    plan = L.decide(state(gdrdrv=LOADED), ["nvidia"], {"dbg_enabled": 0})
    assert plan == {"steps": [], "reload_why": [], "pending": False, "refused": "", "mknod": True}


def test_a_changed_file_reloads_with_rmmod_never_modprobe_r():
    plan = L.decide(state(gdrdrv=dict(LOADED, srcversion="OLD")), ["nvidia"], {})
    assert plan["steps"] == [["rmmod", "gdrdrv"], ["modprobe", "gdrdrv"]]
    assert plan["reload_why"] == ["its file changed (srcversion OLD loaded, ABC installed)"]


def test_changed_options_reload_only_those_gdrdrv_reports():
    plan = L.decide(state(gdrdrv=LOADED), ["nvidia"], {"dbg_enabled": 1, "use_persistent_mapping": 1})
    assert plan["reload_why"] == ["its options changed (dbg_enabled=0 loaded, dbg_enabled=1 wanted)"]
    assert plan["steps"] == [["rmmod", "gdrdrv"], ["modprobe", "gdrdrv"]]


@pytest.mark.fault(7)
def test_a_gdrdrv_in_use_is_left_running_and_the_reload_is_pending():
    g = dict(LOADED, srcversion="OLD", refcount=2)
    plan = L.decide(state(gdrdrv=g), ["nvidia"], {})
    assert plan["steps"] == [] and plan["pending"] is True
    msg = L.pending_message(g, plan["reload_why"], reboot_ok=False)
    assert msg.startswith("gdrdrv is in use (2 open handle(s) on /dev/gdrdrv) and its file changed")
    assert msg.endswith("(set gdrcopy_reboot_ok: true to let the role reboot).")


@pytest.mark.fault(6)
def test_a_gdrdrv_the_kernel_would_refuse_is_never_offered():
    why = "module signatures are enforced on 6.1.0-41-amd64 and gdrdrv (...) is not signed: the kernel refuses it"
    plan = L.decide(state(loaded=(), refusal=why), ["nvidia"], {})
    assert plan["steps"] == [["modprobe", "nvidia"]] and plan["mknod"] is False and plan["refused"] == why
    assert L.refused_message(why, True).endswith("gdrdrv loads at that boot.")


# --- the module ----------------------------------------------------------------------------------------------

class Host:
    """The running host as load() sees it: commands answered by the test, every call recorded."""

    def __init__(self, answers=None, live=True):
        self.live, self.calls, self.answers = live, [], answers or {}

    def tool(self, name):
        return "/usr/sbin/" + name

    def exists(self, path):
        return path in self.answers

    def run(self, argv):
        self.calls.append(argv)
        return self.answers.get(argv[0], (0, "", ""))

    def smoke(self, expect):  # the real Host runs the helper's code in a forked child (test_smoke.py)
        return self.run([SMOKE, "--expect", expect])


class Module:
    def __init__(self, check_mode=False):
        self.check_mode = check_mode


def params(**kw):
    return dict({"chain": ["nvidia"], "params": {}, "mknod": "/usr/local/libexec/gdrcopy-ansible/gdrdrv-mknod",
                 "mok_cert": None, "enrollment_pending": False, "reboot_ok": False}, **kw)


@pytest.fixture
def host_state(monkeypatch):
    box = {"state": state(loaded=())}
    monkeypatch.setattr(M, "read_state", lambda h, cert: box["state"])
    return box


def test_the_module_loads_in_order_and_makes_the_node(host_state):
    h = Host({"/usr/local/libexec/gdrcopy-ansible/gdrdrv-mknod": (0, "created\n", "")})
    result, error = M.load(Module(), params(), h)
    assert error is None and result["changed"] and result["device"] == "created"
    assert h.calls == [["/usr/sbin/modprobe", "nvidia"], ["/usr/sbin/modprobe", "gdrdrv"],
                       ["/usr/local/libexec/gdrcopy-ansible/gdrdrv-mknod"]]


def test_a_rerun_changes_nothing(host_state):
    host_state["state"] = state(gdrdrv=LOADED)
    h = Host({"/usr/local/libexec/gdrcopy-ansible/gdrdrv-mknod": (0, "ok\n", "")})
    result, error = M.load(Module(), params(), h)
    assert error is None and result["changed"] is False and result["steps"] == [] and result["msg"] == ""


def test_check_mode_runs_nothing(host_state):
    h = Host()
    result, error = M.load(Module(check_mode=True), params(), h)
    assert error is None and result["changed"] and h.calls == []
    assert result["steps"] == [["modprobe", "nvidia"], ["modprobe", "gdrdrv"]]


def test_a_failed_modprobe_stops_with_its_words(host_state):
    h = Host({"/usr/sbin/modprobe": (1, "", "modprobe: ERROR: could not insert 'gdrdrv': Key was rejected by service")})
    result, error = M.load(Module(), params(), h)
    assert error == "modprobe nvidia failed (exit 1): modprobe: ERROR: could not insert 'gdrdrv': Key was rejected by service"


def test_a_refused_gdrdrv_is_reported_and_no_node_is_made(host_state):
    host_state["state"] = state(refusal="module signatures are enforced on k and gdrdrv (x) is not signed")
    h = Host()
    result, error = M.load(Module(), params(), h)
    assert error is None and result["device"] == "skipped" and result["msg"].startswith("gdrdrv is not loaded: ")
    assert h.calls == []


@pytest.mark.fault(16)
def test_a_chain_name_that_is_no_module_is_refused_before_anything_runs(host_state):
    h = Host()
    result, error = M.load(Module(), params(chain=["nvidia; reboot"]), h)
    assert error.startswith("chain: nvidia; reboot is not a kernel module name") and h.calls == []


def test_an_image_root_is_refused():
    result, error = M.load(Module(), params(), Host(live=False))
    assert "not a running host" in error


# --- the smoke check after the loads -------------------------------------------------------------------------

SMOKE = "/usr/local/libexec/gdrcopy-ansible/gdrcopy-smoke"
PASSED = '{"passed": true, "runtime_version": "2.6", "driver_version": "2.6", "expected": "2.6", "msg": "ok"}'


def test_the_smoke_check_runs_after_the_loads_and_is_returned(host_state):
    h = Host({SMOKE: (0, PASSED, "")})
    result, error = M.load(Module(), params(smoke="2.6"), h)
    assert error is None and h.calls == [["/usr/sbin/modprobe", "nvidia"], ["/usr/sbin/modprobe", "gdrdrv"],
                                         ["/usr/local/libexec/gdrcopy-ansible/gdrdrv-mknod"], [SMOKE, "--expect", "2.6"]]
    assert result["smoke"] == {"passed": True, "runtime_version": "2.6", "driver_version": "2.6", "expected": "2.6",
                               "msg": "ok", "ran": True, "method": "library"}


def test_a_failed_smoke_check_fails_with_the_helpers_words(host_state):
    failed = '{"passed": false, "runtime_version": "2.6", "driver_version": "2.5", "expected": "2.6", ' \
             '"msg": "driver 2.5 is not 2.6"}'
    result, error = M.load(Module(), params(smoke="2.6"), Host({SMOKE: (1, failed, "")}))
    assert error == "the gdrcopy smoke check failed: driver 2.5 is not 2.6" and result["smoke"]["ran"]


def test_no_smoke_check_in_check_mode_or_for_a_refused_gdrdrv(host_state):
    h = Host({SMOKE: (0, PASSED, "")})
    result, error = M.load(Module(check_mode=True), params(smoke="2.6"), h)
    assert error is None and h.calls == [] and result["smoke"]["ran"] is False
    assert result["smoke"]["msg"] == "check mode: nothing was loaded"
    host_state["state"] = state(refusal="module signatures are enforced on k and gdrdrv (x) is not signed")
    result, error = M.load(Module(), params(smoke="2.6"), h)
    assert error is None and h.calls == [] and result["smoke"] == {
        "ran": False, "method": "none", "passed": False, "expected": "2.6",
        "msg": "gdrdrv is not loaded: module signatures are enforced on k and gdrdrv (x) is not signed"}


def test_without_the_option_no_smoke_check_runs(host_state):
    h = Host({SMOKE: (0, PASSED, "")})
    result, error = M.load(Module(), params(), h)
    assert error is None and "smoke" not in result and [SMOKE, "--expect", "2.6"] not in h.calls
