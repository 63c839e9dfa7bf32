"""Shared testinfra set-up: on a failed test, print what the VM's journal and kernel said."""

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    host = item.funcargs.get("host") if hasattr(item, "funcargs") else None
    if report.when == "call" and report.failed and host is not None:
        journal = host.run("journalctl -b --no-pager -n 60 -o short-monotonic; dmesg | tail -n 30")
        report.sections.append(("VM journal and dmesg (last lines)", journal.stdout + journal.stderr))
