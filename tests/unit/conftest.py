"""Unit-test set-up: the project's module_utils and library on sys.path, and the shared host captures."""

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "module_utils"), str(REPO / "library")]
SHARED = Path(os.environ.get("GDRCOPY_SHARED_DIR", REPO.parent / "shared")).resolve()


@pytest.fixture
def shared_fixture():
    """Read a file of ../shared/fixtures (read-only captures of real hosts)."""
    def read(host, rel):
        path = SHARED / "fixtures" / host / rel
        if not path.exists():
            pytest.fail(f"missing shared fixture {path}: is ../shared beside the project?")
        return path.read_text()
    return read


def load_script(path, name):
    """Import a Python script that has no .py suffix (the roles' host helpers, the VM harness) as a module."""
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
    loader.exec_module(module)
    return module
