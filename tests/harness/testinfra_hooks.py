# Test-only: the pytest hooks of the scenarios' testinfra verifiers (molecule/*/tests/conftest.py import them).
"""On a failed test, print what the VM's journal and kernel said; at the end, record the verifier's result for the
table `make test` ends with (GDRCOPY_PROOF_LOG, tests/harness/proofs.py)."""

import json
import os
import time

import pytest

STARTED = time.monotonic()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    host = item.funcargs.get("host") if hasattr(item, "funcargs") else None
    if report.when == "call" and report.failed and host is not None:
        journal = host.run("journalctl -b --no-pager -n 60 -o short-monotonic; dmesg | tail -n 30")
        report.sections.append(("VM journal and dmesg (last lines)", journal.stdout + journal.stderr))


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("GDRCOPY_PROOF_LOG", "")
    if path:
        record = {"kind": "playbook", "scenario": os.environ.get("MOLECULE_SCENARIO_NAME", ""),
                  "playbook": "verify (testinfra, %d tests)" % session.testscollected,
                  "outcome": "passed" if exitstatus == 0 else "failed", "failed_hosts": [],
                  "seconds": round(time.monotonic() - STARTED, 1)}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
