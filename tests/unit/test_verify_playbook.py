"""playbooks/verify.yml run for real against this machine (connection local), a host with no GPU and no gdrcopy (as
CI's machines are): it skips the GPU tests with the reason and fails nothing, and a failed smoke check fails the
host. gdrcopy's own test programs against a real GPU: tests/fixtures/hosts/h200-device-gdrcopy-2.6-tests."""

import re

import pytest

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
