"""Unit-test set-up: the collection importable as ansible_collections.gpufleet.gdrcopy (the checkout's own link,
collections/ansible_collections/gpufleet/gdrcopy), the host captures under tests/fixtures, and helpers."""

import importlib.machinery
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Where Ansible finds this collection: the checkout's own link (collections/ansible_collections/gpufleet/gdrcopy),
# or, when the tree already lies at ansible_collections/gpufleet/gdrcopy (ansible-test's copy), the folder above.
COLLECTIONS = (REPO.parents[2] if REPO.parts[-3:] == ("ansible_collections", "gpufleet", "gdrcopy")
               else REPO / "collections")
# The tests import this file's helpers (from conftest import ...) and each other's fixtures: this directory on the
# path under ansible-test units too, whose pytest set-up imports test modules in its own way.
for path in (str(COLLECTIONS), str(Path(__file__).resolve().parent)):
    if path not in sys.path:
        sys.path.insert(0, path)
FIXTURES = REPO / "tests" / "fixtures"
# The test-only collections make setup unpacks (community.general, ansible.posix); ansible-test's copy of the tree
# links them (tests/harness/ansible_test.sh).
TEST_COLLECTIONS = REPO / ".cache" / "collections"
# Host captures keep the paths of the host, but a ':' (PCI addresses such as 0000:00:06.0 in sysfs and procfs) is
# stored as %3A: it is no legal character in a file name everywhere (Windows checkouts, ansible-test sanity).
COLON = "%3A"


def fixture_path(host, rel):
    """The stored path of a captured file, given its path on the host."""
    return FIXTURES / host / rel.replace(":", COLON)


def restore_names(root):
    """Give the files and folders of a copied capture their host names back (%3A -> ':'), deepest first."""
    for path in sorted(Path(root).rglob("*" + COLON + "*"), key=lambda p: len(p.parts), reverse=True):
        path.rename(path.with_name(path.name.replace(COLON, ":")))
    return root


# `make test` (root, every Debian package of make setup-vm) sets GDRCOPY_FULL_RUN=1: there a test that needs root or
# a browser fails instead of skipping, so CI proves what `make unit` as a user may leave out.
FULL_RUN = os.environ.get("GDRCOPY_FULL_RUN") == "1"
IN_CI = os.environ.get("GDRCOPY_CI") == "1"  # .ci/run sets it


def need(condition, reason):
    """Skip the calling test when condition is false, or fail it under a full run (make test)."""
    if not condition:
        (pytest.fail if FULL_RUN else pytest.skip)(reason + ("" if FULL_RUN else " (make test runs it as root)"))


MARKERS = (
    "fault(n): proves case n of the fault suite (README: What happens when things go wrong)",
    "slow: takes minutes (many playbook runs); make test runs it, -m 'not slow' leaves it out",
)


def readme_fault_rows():
    """Case number -> the whole row of the README's fault table."""
    try:
        text = (REPO / "README.md").read_text()
    except OSError:  # an ansible-test units copy has no README
        return {}
    section = text.split("## What happens when things go wrong", 1)[-1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\| (\d+) \|", line)
        if m:
            rows[int(m.group(1))] = line
    return rows


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A fault proof that is skipped fails: always in CI (GDRCOPY_CI, set by .ci/run: CI provides every
    environment the proofs need), and elsewhere unless the README row of its case says which environment it needs
    ("needs: ..." in its proof column), so that no proof can quietly stop proving anything."""
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("fault")
    if not (marker and marker.args):
        return
    if report.skipped:
        fail_skipped_proof(report, marker.args[0])
    if report.when == "call" or report.outcome != "passed":
        record_proof(report, marker.args[0])


PROOF_LOG = os.environ.get("GDRCOPY_PROOF_LOG", "")


def record_proof(report, case):
    """One JSON line per fault proof in GDRCOPY_PROOF_LOG (make test's table, tests/harness/proofs.py)."""
    if PROOF_LOG:
        line = json.dumps({"kind": "fault", "case": case, "scenario": os.environ.get("GDRCOPY_PROOF_STEP", "unit"),
                           "test": report.nodeid, "outcome": report.outcome, "seconds": round(report.duration, 1)})
        with open(PROOF_LOG, "a", encoding="utf-8") as f:  # one write per line: xdist workers do not interleave
            f.write(line + "\n")


def fail_skipped_proof(report, case):
    proofs = readme_fault_rows().get(case, "").rstrip(" |").rsplit("|", 1)[-1]
    if IN_CI or "needs: " not in proofs:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = ("the proof of fault case %d was skipped (%s): %s" % (
            case, reason, "CI must run every proof" if IN_CI else
            "the README row of the case does not say which environment it needs"))


def pytest_configure(config):
    """The markers, here rather than in pyproject.toml: ansible-test units runs pytest with its own ini file."""
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)


@pytest.fixture
def host_fixture():
    """Read a file of tests/fixtures (read-only captures of real hosts, and test data)."""
    def read(host, rel):
        path = fixture_path(host, rel)
        if not path.exists():
            pytest.fail(f"missing fixture {path}")
        return path.read_text()
    return read


def load_script(path, name):
    """Import a Python script that has no .py suffix (the roles' host helpers, the VM harness) as a module."""
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
    loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def built_lib(tmp_path_factory):
    """The fixture source tree with its library built (make lib), as gdrcopy-build leaves a lib build directory."""
    import shutil
    import subprocess
    tree = tmp_path_factory.mktemp("build") / "lib"
    shutil.copytree(REPO / "tests" / "fixtures" / "gdrcopy-src", tree)
    r = subprocess.run(["make", "-s", "lib"], cwd=tree, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return tree


class StubModule:
    """What the collection's modules use of AnsibleModule when a test calls their work function directly: check
    mode, atomic_move (a rename) and run_command (run for real)."""

    def __init__(self, check_mode=False):
        self.check_mode = check_mode

    @staticmethod
    def atomic_move(src, dest):
        os.rename(src, dest)

    @staticmethod
    def run_command(argv, data=None):
        import subprocess
        r = subprocess.run(argv, input=data, capture_output=True, text=True)
        return r.returncode, r.stdout, r.stderr
