"""plugins/modules/gdrcopy_verify: the checks of a verified host and the record that the next run compares with.

Run on a captured working host (test_gdrcopy_info's working_root, commands answered by the test); verify.yml runs
the module for real on this machine in test_verify_playbook.py."""

import json
import os

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_converged as C
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts
from ansible_collections.gpufleet.gdrcopy.plugins.modules import gdrcopy_verify as V
from test_gdrcopy_info import working_module, working_root  # noqa: F401 (fixture)

INPUTS = {"code": "c0de", "mode": "host", "gdrcopy": "g1", "mok_signing": "m1", "nvidia_peermem": "n1"}
SMOKE = {"ran": True, "method": "library", "passed": True, "runtime_version": "2.6", "driver_version": "2.6",
         "expected": "2.6", "msg": "gdr_open succeeded; runtime 2.6, driver 2.6"}
GOOD_DEVICE = {"loaded": True, "major": 236, "device": {"ok": True, "exists": True, "is_char": True, "major": 236}}


def params(**kw):
    p = dict((k, v.get("default")) for k, v in V.ARGUMENT_SPEC.items())
    p.update(prefix="/opt/gdrcopy", release="2.6", mok_cert="/var/lib/gdrcopy-ansible/mok/mok.der")
    p.update(kw)
    return p


class Module:
    def __init__(self, inner, check_mode=False, diff=False):
        self.inner, self.check_mode, self._diff = inner, check_mode, diff

    @staticmethod
    def atomic_move(src, dest):  # AnsibleModule's, as the record is written through fileops.ensure
        os.rename(src, dest)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def run(root, check_mode=False, live=True, **kw):
    m = Module(working_module(root), check_mode=check_mode, diff=True)
    return V.verify(m, params(**kw), gdrcopy_facts.Host(m, root, live=live))


def test_a_verified_host_gets_its_record_and_the_next_run_finds_it_converged(working_root):  # noqa: F811
    first = run(working_root, smoke_result=SMOKE, inputs=INPUTS, write_record=True)
    assert first["problems"] == [] and first["blockers"] == [], first["blockers"]
    assert first["record_written"] and first["changed"] and first["converged"]["ok"] is False
    path = os.path.join(working_root, C.RECORD_PATH.lstrip("/"))
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    record = json.loads(open(path).read())
    assert record["inputs"] == INPUTS and record["verify"] == first["tests"]
    again = run(working_root, smoke_result=SMOKE, inputs=INPUTS, write_record=True)
    assert again["converged"]["ok"] is True and again["record_written"] is False and again["changed"] is False
    assert again["converged"]["verified_tests"] == first["tests"]
    other = run(working_root, smoke_result=SMOKE, inputs=dict(INPUTS, gdrcopy="g2"))
    assert other["converged"]["ok"] is False


def test_an_image_is_recorded_without_running_state_and_found_converged_but_never_as_a_running_host(
        working_root):  # noqa: F811
    image = dict(INPUTS, mode="image")
    first = run(working_root, live=False, image=True, expect="2.6", tests=["sanity", "copybw"], inputs=image,
                write_record=True)
    assert first["live"] is False and first["problems"] == [] and first["record_written"]
    assert first["smoke"]["ran"] is False and first["tests"]["ran"] is False, (first["smoke"], first["tests"])
    record = json.loads(open(os.path.join(working_root, C.RECORD_PATH.lstrip("/"))).read())
    assert "running" not in record["state"]
    again = run(working_root, live=False, image=True, expect="2.6", inputs=image)
    assert again["converged"]["ok"] is True, again["converged"]["differences"]
    # The same files booted as a host: its running state is not in the record, nor is the mode.
    booted = run(working_root, smoke_result=SMOKE, inputs=INPUTS)
    assert booted["converged"]["ok"] is False
    assert "the run's inputs changed: mode" in booted["converged"]["differences"]
    assert "running is new" in booted["converged"]["differences"], booted["converged"]["differences"]


def test_check_mode_predicts_the_record_and_writes_nothing(working_root):  # noqa: F811
    r = run(working_root, check_mode=True, smoke_result=SMOKE, inputs=INPUTS, write_record=True)
    assert r["record_written"] is True and r["diff"]["after"].startswith("{")
    assert not os.path.exists(os.path.join(working_root, C.RECORD_PATH.lstrip("/")))


def test_a_failed_smoke_check_is_a_problem_and_writes_no_record(working_root):  # noqa: F811
    smoke = dict(SMOKE, passed=False, msg="gdr_open failed: /dev/gdrdrv is missing")
    r = run(working_root, smoke_result=smoke, inputs=INPUTS, write_record=True)
    assert r["problems"] == ["the gdrcopy smoke check failed: gdr_open failed: /dev/gdrdrv is missing"]
    assert r["record_written"] is False
    assert not os.path.exists(os.path.join(working_root, C.RECORD_PATH.lstrip("/")))


def test_recorded_tests_are_reported_instead_of_running_them(working_root):  # noqa: F811
    recorded = {"ran": False, "reason": "converged: the run that left this host as it is ran them"}
    r = run(working_root, smoke_result=SMOKE, tests=["sanity"], tests_result=recorded)
    assert r["tests"] == recorded


def test_the_problems_are_named_one_sentence_each():
    sanity = {"ok": False, "argv": ["/opt/gdrcopy/current/bin/gdrcopy_sanity", "-d", "0"], "rc": 1,
              "msg": "Total: 36, Passed: 35, Failed: 1, Waived: 0"}
    tests = {"ran": True, "gpu_id": 0, "sanity": sanity}
    assert C.problems(SMOKE, tests, GOOD_DEVICE) == [
        "gdrcopy_sanity failed on GPU 0 (/opt/gdrcopy/current/bin/gdrcopy_sanity -d 0, exit code 1): "
        "Total: 36, Passed: 35, Failed: 1, Waived: 0"]
    missing = dict(GOOD_DEVICE, device={"ok": False, "exists": False, "is_char": False, "major": -1})
    assert C.problems(SMOKE, {"ran": False}, missing) == [
        "gdrdrv is loaded (major 236 in /proc/devices) but /dev/gdrdrv is missing: gdrdrv makes no device node "
        "itself. Run the gdrcopy role again (--tags gdrcopy) to make it."]
    assert C.problems(dict(SMOKE, ran=False, passed=False), {"ran": False}, {"loaded": False}) == []


def test_a_converged_host_is_verified_from_this_runs_read_without_reading_again(working_root):  # noqa: F811
    """verify.yml on a host preflight found converged: its action plugin answers from preflight's read."""
    run(working_root, smoke_result=SMOKE, inputs=INPUTS, write_record=True)
    read = run(working_root, expect="2.6", inputs=INPUTS)
    assert read["converged"]["ok"] is True
    recorded = read["converged"]["verified_tests"]
    got = C.from_read(read, SMOKE, recorded)
    assert got["tests"] == recorded and got["smoke"] == SMOKE and got["kernel"] == read["kernel"]
    assert got["problems"] == [] and got["record_written"] is False and got["changed"] is False
    broken = dict(read, gdrdrv=dict(GOOD_DEVICE, device={"ok": False, "exists": False, "is_char": False}))
    assert "/dev/gdrdrv is missing" in C.from_read(broken)["problems"][0]


# --- the OS facts read once per run (the action plugin passes them; Ansible's collectors are not imported again) ---

OS = {"distribution": "Debian", "distribution_version": "12.12", "distribution_major_version": "12",
      "distribution_release": "bookworm", "os_family": "Debian", "pkg_mgr": "apt"}


def test_the_os_facts_of_this_run_are_reused_when_complete():
    assert gdrcopy_facts.complete_os_facts(dict(OS, kernel="6.1.0")) == OS
    assert gdrcopy_facts.complete_os_facts({"os_family": "Debian", "pkg_mgr": "apt"}) == dict(
        dict.fromkeys(OS, ""), os_family="Debian", pkg_mgr="apt")
    assert gdrcopy_facts.complete_os_facts(dict(OS, pkg_mgr="")) is None  # incomplete: the module collects them
    assert gdrcopy_facts.complete_os_facts({}) is None and gdrcopy_facts.complete_os_facts(None) is None


def test_a_captured_tree_never_takes_the_os_facts_of_the_run(working_root):  # noqa: F811
    """The tree's own OS facts are not collected (os_facts returns {} for a root other than /), and the facts passed
    in describe the controller's view of the host, not the tree."""
    assert run(working_root, os_facts=OS)["os"] == {}
