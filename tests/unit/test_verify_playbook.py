"""playbooks/verify.yml run for real against this machine (connection local), a host with no GPU and no gdrcopy (as
CI's machines are): it skips the GPU tests with the reason and fails nothing, and a failed smoke check fails the
host. gdrcopy's own test programs against a real GPU: tests/fixtures/hosts/h200-device-gdrcopy-2.6-tests."""

import re

import pytest

from conftest import REPO
from test_report_playbooks import play


@pytest.mark.fault(14)
def test_verify_skips_the_gpu_tests_with_the_reason(tmp_path):
    rc, out = play(tmp_path, "verify.yml")
    assert rc == 0, out
    assert "skipped: no NVIDIA GPU on this host: only the GPU-less smoke check applies" in out
    assert re.search(r"this-host\s+: ok=\d+\s+changed=0 .*failed=0 ", out), out


def test_verify_fails_the_host_when_the_smoke_check_failed(tmp_path):
    smoke = {"ran": True, "method": "library", "passed": False, "runtime_version": "2.6", "driver_version": "",
             "expected": "2.6", "msg": "gdr_open failed: /dev/gdrdrv is missing"}
    rc, out = play(tmp_path, "verify.yml", gdrcopy_smoke=smoke)
    assert rc == 2
    assert "the gdrcopy smoke check failed: gdr_open failed: /dev/gdrdrv is missing" in out


def test_a_converged_host_reports_the_tests_of_the_run_its_record_keeps(tmp_path):
    """On the fast path verify runs no GPU test: it reports the results the verified run recorded (so a converged
    run's fleet report is the last full run's), or says why there are none."""
    smoke = {"ran": True, "method": "library", "passed": True, "runtime_version": "2.6", "driver_version": "2.6",
             "expected": "2.6", "msg": "gdr_open succeeded; runtime 2.6, driver 2.6"}
    tests = {"ran": True, "reason": "", "gpu_id": 0,
             "sanity": {"ok": True, "msg": "Total: 36, Passed: 36, Failed: 0, Waived: 0", "total": 36, "passed": 36,
                        "failed": 0, "waived": 0, "failed_tests": [], "argv": ["gdrcopy_sanity"], "rc": 0},
             "copybw": {"ok": False, "error": "not run"}, "copylat": {"ok": False, "error": "not run"}}
    recorded = {"converged": {"ok": True, "verified_tests": tests}}
    rc, out = play(tmp_path, "verify.yml", "-vvv", gdrcopy_smoke=smoke, gdrcopy_converged=True,
                   gdrcopy_preflight_info=recorded)
    assert rc == 0, out
    assert '"gpu tests: on GPU 0 (recorded by the last verified run)"' in out and "Total: 36, Passed: 36, Failed: 0, Waived: 0" in out, out
    # preflight read and smoke-checked the host in this run: no module starts on it again
    assert "gdrcopy_verify" in out and "EXEC" not in out and "PUT " not in out, out
    rc, out = play(tmp_path, "verify.yml", gdrcopy_smoke=smoke, gdrcopy_converged=True,
                   gdrcopy_preflight_info={"converged": {"ok": True}})
    assert rc == 0 and "skipped: converged: the run that left this host as it is ran them" in out, out


@pytest.mark.parametrize("preflight_passed", [False, True])
def test_verify_after_an_earlier_play_checked_the_variables(tmp_path, preflight_passed):
    """In site.yml preflight registers __gdrcopy_in before verify.yml runs, which then skips its own check. verify.yml
    must still read a checked result, not a skipped one: a conditional validate task registers its skip result over
    the earlier value (CI of 8ad4277 failed so in check mode, the secureboot converge and the demo: no attribute
    'gdrcopy_build_root'); a skipped include registers nothing."""
    book = tmp_path / "site-order.yml"
    book.write_text(
        "- name: First play checks the variables, as preflight does\n"
        "  hosts: all\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - name: Validate\n"
        "      ansible.builtin.import_role:\n"
        "        name: gpufleet.gdrcopy.gdrcopy\n"
        "        tasks_from: validate.yml\n"
        "    - name: Preflight passed\n"
        "      ansible.builtin.set_fact:\n"
        "        gdrcopy_preflight_passed: %s\n"
        "- name: Then verify\n"
        "  ansible.builtin.import_playbook: %s\n" % (str(preflight_passed).lower(), REPO / "playbooks" / "verify.yml"))
    rc, out = play(tmp_path, str(book))
    assert rc == 0, out
    assert "skipped: no NVIDIA GPU on this host: only the GPU-less smoke check applies" in out, out
    checks = re.findall(r"TASK \[gpufleet.gdrcopy.gdrcopy : Check and normalise the gdrcopy variables\]", out)
    assert len(checks) == (1 if preflight_passed else 2), out


def test_verify_skipped_by_the_idempotence_tag_records_why_and_fails_nothing(tmp_path):
    """molecule's idempotence runs skip the check (its record follows the state a scenario changes on purpose): the
    later tasks must not read an undefined result (before: the record task alone carried the tag)."""
    rc, out = play(tmp_path, "verify.yml", "--skip-tags", "molecule-idempotence-notest")
    assert rc == 0, out
    assert "skipped: the verification was skipped by tag (molecule-idempotence-notest)" in out, out
    assert re.search(r"this-host\s+: ok=\d+\s+changed=0 .*failed=0 ", out), out


def test_a_check_skipped_by_its_tag_is_shown_as_skipped_and_fails_nothing(tmp_path):
    """molecule's idempotence run skips the check by its tag: the show-and-assert task still passes and says so."""
    rc, out = play(tmp_path, "verify.yml", "--skip-tags", "molecule-idempotence-notest")
    assert rc == 0, out
    assert "gpu tests: skipped: the verification was skipped by tag (molecule-idempotence-notest)" in out, out


def test_an_image_is_read_as_one_and_nothing_runs_in_it(tmp_path):
    """Image mode: no smoke check and no GPU test run in an image; the module still reads it (for the record)."""
    rc, out = play(tmp_path, "verify.yml", gdrcopy_resolved_mode="image")
    assert rc == 0, out
    assert "smoke check: not a running host (image): nothing to open" in out, out
    assert "gpu tests: skipped: not a running host (image): nothing to run the tests on" in out, out
