"""Preflight against the controller itself, for real: a host that cannot load kernel modules (no module support,
or kernel.modules_disabled=1) stops in preflight with one sentence saying what to do, before anything changes.
The controllers this project is tested on run a kernel without module support; a controller whose kernel can load
modules skips this test (the image scenario proves kernel.modules_disabled=1 on a VM)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SWITCH = Path("/proc/sys/kernel/modules_disabled")


@pytest.mark.fault(5)
def test_preflight_stops_a_host_that_cannot_load_modules_and_changes_nothing(tmp_path):
    if not SWITCH.exists():
        expected = "has no loadable module support (/proc/sys/kernel/modules_disabled is absent)"
    elif SWITCH.read_text().strip() == "1":
        expected = "module loading is disabled on this host (kernel.modules_disabled=1)"
    else:
        pytest.skip("this controller can load kernel modules; molecule/image covers kernel.modules_disabled=1")
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    extra = {"ansible_python_interpreter": sys.executable, "ansible_become": False,
             "gdrcopy_cache_dir": str(tmp_path / "cache")}
    r = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                        str(REPO / "playbooks" / "preflight.yml"), "-e", json.dumps(extra)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    out = " ".join(r.stdout.split())
    assert r.returncode != 0, out
    assert expected in out and "set gdrcopy_mode: image" in out, out
    assert re.search(r"localhost : ok=\d+ changed=0 unreachable=0 failed=1", out), out
    assert not (tmp_path / "cache").exists(), "preflight stopped before fetching the source"
