"""The scenarios' shared testinfra hooks (tests/harness/testinfra_hooks.py): the VM's journal on a failure, and the
verifier's result for make test's table of proofs."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "tests", "harness"))

from testinfra_hooks import pytest_runtest_makereport, pytest_sessionfinish  # noqa: E402,F401
