"""Which of the gdrcopy role's steps a run selects from its tags (vars/main.yml: __gdrcopy_selected_steps), read
by the build step (install too, or build only) and by the gdrcopy_files call (whose steps' files it writes). Run
for real by ansible-playbook with the tags a user gives."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ALL = ["gdrcopy_build", "gdrcopy_install", "gdrcopy_persist", "gdrcopy_kernel_hook"]


@pytest.fixture(scope="module")
def selected(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("steps")
    playbook = tmp / "steps.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False,
                                     "vars_files": [str(REPO / "roles" / "gdrcopy" / "vars" / "main.yml")],
                                     "tasks": [{"ansible.builtin.debug": {"var": "__gdrcopy_selected_steps"},
                                                "tags": ["always"]}]}]))
    env = dict(os.environ, ANSIBLE_LOCAL_TEMP=str(tmp / "tmp"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))

    def run(*flags):
        r = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                            str(playbook), *flags], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(re.search(r'"__gdrcopy_selected_steps": (\[.*?\])', r.stdout, re.S).group(1))
    return run


@pytest.mark.parametrize("flags, steps", [
    ((), ALL),
    (("--tags", "gdrcopy"), ALL),  # the play's tag: every step (it built without installing before)
    (("--tags", "gdrcopy_build"), ["gdrcopy_build"]),
    (("--tags", "gdrcopy_build,gdrcopy_install"), ["gdrcopy_build", "gdrcopy_install"]),
    (("--tags", "gdrcopy_persist"), ["gdrcopy_persist"]),
    (("--skip-tags", "gdrcopy_kernel_hook"), ALL[:3]),
    (("--tags", "gdrcopy", "--skip-tags", "gdrcopy_install"), ["gdrcopy_build", "gdrcopy_persist", "gdrcopy_kernel_hook"]),
])
def test_the_steps_a_run_selects(selected, flags, steps):
    assert sorted(selected(*flags)) == sorted(steps)
