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
