"""make test's table of proofs (tests/harness/proofs.py) and what feeds it: the scenarios' callback
(tests/harness/callback/gdrcopy_proofs.py), run for real by ansible-playbook on the controller."""

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, load_script

proofs = load_script(REPO / "tests" / "harness" / "proofs.py", "proofs")
BIN = Path(sys.executable).parent

README = """
## What happens when things go wrong

| # | fault | what you see | proven by |
|---|---|---|---|
| 3 | headers missing | `no headers` | unit: `test_plan.py`; VM: `molecule/image` (`fault-3`; in `make test`) |
| 6 | Secure Boot on | nothing | unit: `test_load_module.py`; VM: `molecule/secureboot` (`fault-6`) |
| 9 | a host unreachable | marked | VM: `molecule/image` (`fault-9`: cut after 6 connections) |

## Limits
"""


def record(**kw):
    return json.dumps(kw)


def test_the_total_leaves_out_what_ran_beside_the_other_steps(tmp_path, capsys):
    timings = tmp_path / "timings.txt"
    timings.write_text("lint  61s  rc=0\nvm-images  298s  rc=0\nunit  320s  rc=0\n")
    assert proofs.main(["--timings", str(timings), "--log", str(tmp_path / "none"), "--readme", str(REPO / "README.md")]) == 0
    assert "total 381s (6.3 min)" in capsys.readouterr().out


def test_the_readme_rows_name_where_each_case_is_proven():
    rows = proofs.fault_rows(README)
    assert {c: r["places"] for c, r in rows.items()} == {3: ["unit", "image"], 6: ["unit", "secureboot"], 9: ["image"]}
    real = proofs.fault_rows((REPO / "README.md").read_text())
    assert list(real) == list(range(1, len(real) + 1)) and all(r["places"] for r in real.values())


def test_every_case_proven_everywhere_its_row_says_passes():
    timings = proofs.read_timings("lint  42s  rc=0\nmolecule-image  900s  rc=0\nmolecule-secureboot 1000s rc=0\n")
    records = proofs.read_records("\n".join([
        record(kind="fault", case=3, scenario="unit", outcome="passed", seconds=0.2),
        record(kind="fault", case=3, scenario="image", outcome="passed", seconds=30),
        record(kind="fault", case=6, scenario="unit", outcome="passed", seconds=0.1),
        record(kind="fault", case=6, scenario="secureboot", outcome="passed", seconds=3),
        record(kind="fault", case=9, scenario="image", outcome="passed", seconds=50),
        record(kind="playbook", scenario="image", playbook="converge.yml", outcome="passed", seconds=100),
        record(kind="playbook", scenario="image", playbook="converge.yml", outcome="passed", seconds=10),
        "{cut short by a kill",
    ]))
    lines, problems, verdicts = proofs.summarize(timings, records, proofs.fault_rows(README))
    assert problems == [] and verdicts == [(3, True), (6, True), (9, True)]
    text = "\n".join(lines)
    assert "converge.yml (run 2)" in text and " 3 headers missing [unit 1/1, image 1/1]" in text


def test_a_proof_that_did_not_run_or_failed_is_a_problem():
    timings = proofs.read_timings("unit  200s  rc=0\nmolecule-secureboot  900s  rc=1\n")
    records = proofs.read_records("\n".join([
        record(kind="fault", case=3, scenario="unit", outcome="passed", seconds=0.2),
        record(kind="fault", case=6, scenario="unit", outcome="failed", seconds=0.1),
        record(kind="playbook", scenario="secureboot", playbook="side_effect.yml", outcome="failed",
               failed_hosts=["gdrcopy-sb"], seconds=5),
    ]))
    _, problems, verdicts = proofs.summarize(timings, records, proofs.fault_rows(README))
    assert verdicts == [(3, False), (6, False), (9, False)]
    assert problems == [
        "step molecule-secureboot failed", "secureboot: side_effect.yml failed (gdrcopy-sb)",
        "fault 3: no image proof ran", "fault 6: 1 of its unit proofs failed", "fault 6: no secureboot proof ran",
        "fault 9: no image proof ran"]


def test_the_callback_records_playbooks_and_fault_tasks_but_not_the_runs_inside_them(tmp_path):
    """A playbook with a task tagged fault-3, a failure that is ignored, and a task that runs ansible-playbook
    itself (as the scenarios' reruns do): the inner run records nothing."""
    inner = tmp_path / "inner.yml"
    inner.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.fail:\n"
                     "        msg: an inner run that must fail\n")
    outer = tmp_path / "outer.yml"
    outer.write_text(f"""
- hosts: localhost
  gather_facts: false
  tasks:
    - name: A fault proof
      ansible.builtin.command: "true"
      tags: [fault-3]
    - name: An expected failure
      ansible.builtin.command: "false"
      ignore_errors: true
      tags: [fault-9]
    - name: A run inside
      ansible.builtin.command: "{BIN / 'ansible-playbook'} {inner}"
      register: inner_run
      failed_when: inner_run.rc == 0
""")
    log = tmp_path / "proofs.jsonl"
    env = dict(os.environ, GDRCOPY_PROOF_LOG=str(log), MOLECULE_SCENARIO_NAME="demo",
               ANSIBLE_CALLBACK_PLUGINS=str(REPO / "tests" / "harness" / "callback"),
               ANSIBLE_CALLBACKS_ENABLED="gdrcopy_proofs", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))
    env.pop("GDRCOPY_PROOF_NESTED", None)
    r = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(outer),
                        "-e", "ansible_python_interpreter=" + sys.executable], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:]
    got = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(g["kind"], g.get("case"), g["outcome"], g["scenario"], g["playbook"]) for g in got] == [
        ("fault", 3, "passed", "demo", "outer.yml"), ("fault", 9, "passed", "demo", "outer.yml"),
        ("playbook", None, "passed", "demo", "outer.yml")]
