"""Unit-test set-up: the collection importable as ansible_collections.gpufleet.gdrcopy (the checkout's own link,
collections/ansible_collections/gpufleet/gdrcopy), the host captures under tests/fixtures, and helpers."""

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / "collections"
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))
FIXTURES = REPO / "tests" / "fixtures"


@pytest.fixture
def host_fixture():
    """Read a file of tests/fixtures (read-only captures of real hosts, and test data)."""
    def read(host, rel):
        path = FIXTURES / host / rel
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
