"""playbooks/status.yml run for real against this machine (connection local): a host with no NVIDIA driver and no
gdrcopy (as CI's machines are). It reports the host red with the reason and writes the fleet report."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def play(tmp_path, playbook, *args, **extra):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu_nodes]\nthis-host ansible_connection=local ansible_python_interpreter=%s ansible_become=false\n"
                         % sys.executable)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
           str(REPO / "playbooks" / playbook), "-e", json.dumps(extra), *args]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def test_status_reports_the_host_and_writes_the_fleet_report(tmp_path):
    rc, out = play(tmp_path, "status.yml", gdrcopy_report_dir=str(tmp_path / "reports"))
    assert rc == 0, out
    assert re.search(r"this-host\s+: ok=4\s+changed=1 ", out), out
    report = json.loads((tmp_path / "reports" / "gdrcopy-report.json").read_text())
    assert report["summary"] == {"red": 1, "amber": 0, "green": 0, "hosts": 1}
    row = report["hosts"][0]
    assert row["host"] == "this-host" and row["details"]["mode"] == "host"
    assert row["findings"][0]["text"] == "no NVIDIA driver is loaded or installed: gdrcopy needs it (gdrdrv needs nvidia.ko)"
    assert row["findings"][0]["code"] == "no_nvidia_driver"
    assert (tmp_path / "reports" / "gdrcopy-report.html").read_text().count('<tr class="red"') == 1
    # the console says it in lines, with the report's real path (no playbooks/..), and what to do
    assert "blocker no_nvidia_driver: no NVIDIA driver is loaded or installed" in out
    assert "-> " + str(tmp_path / "reports" / "gdrcopy-report.html") in out and "playbooks/.." not in out
    rc, out = play(tmp_path, "status.yml", gdrcopy_report_dir=str(tmp_path / "reports"))
    assert rc == 0 and re.search(r"this-host\s+: ok=4\s+changed=0 ", out), out


def test_in_check_mode_the_status_names_no_file_it_did_not_write(tmp_path):
    rc, out = play(tmp_path, "status.yml", "--check", gdrcopy_report_dir=str(tmp_path / "reports"))
    assert rc == 0, out
    assert not (tmp_path / "reports").exists()
    assert "fleet report: not written (check mode)" in out and "gdrcopy-report.html" not in out
