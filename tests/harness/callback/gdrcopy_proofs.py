# Test-only (the molecule scenarios enable it; the roles never use it).
"""Record what a scenario's playbooks proved, for the table `make test` ends with (tests/harness/proofs.py).

With GDRCOPY_PROOF_LOG set, one JSON line per playbook run (the scenario, the playbook, whether every host got
through, its seconds) and one per task tagged fault-N (the fault suite's VM proofs: README, What happens when
things go wrong) is appended to that file. Without it, the callback does nothing. Only the playbooks molecule runs
are recorded: a run that a task of theirs starts (a rerun, a run that must fail) is judged by that task.
"""

from __future__ import annotations

import json
import os
import re
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: gdrcopy_proofs
    type: aggregate
    short_description: the test harness's record of playbook and fault-case results
    description:
      - Appends one JSON line per playbook and per task tagged fault-N to the file GDRCOPY_PROOF_LOG names.
    requirements:
      - enabled in the molecule scenarios (callbacks_enabled)
"""

FAULT_TAG = re.compile(r"^fault-(\d+)$")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gdrcopy_proofs"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        # Children of this process (a task's ansible-playbook) inherit the mark and record nothing.
        nested = os.environ.get("GDRCOPY_PROOF_NESTED") == "1"
        os.environ["GDRCOPY_PROOF_NESTED"] = "1"
        self.path = "" if nested else os.environ.get("GDRCOPY_PROOF_LOG", "")
        self.playbook = ""
        self.started = time.monotonic()
        self.tasks = {}  # task uuid -> (fault cases, name, start)

    def write(self, **record):
        if not self.path:
            return
        record.update(scenario=os.environ.get("MOLECULE_SCENARIO_NAME", ""), playbook=self.playbook)
        with open(self.path, "a", encoding="utf-8") as f:  # one write per line: appends do not interleave
            f.write(json.dumps(record, sort_keys=True) + "\n")

    def v2_playbook_on_start(self, playbook):
        self.playbook = os.path.basename(playbook._file_name)
        self.started = time.monotonic()

    def v2_playbook_on_task_start(self, task, is_conditional):
        cases = sorted(int(m.group(1)) for m in map(FAULT_TAG.match, task.tags) if m)
        if cases:
            self.tasks[task._uuid] = (cases, task.get_name(), time.monotonic())

    def _task_result(self, result, outcome):
        found = self.tasks.get(result._task._uuid)
        if found:
            cases, name, start = found
            for case in cases:
                self.write(kind="fault", case=case, task=name, host=result._host.get_name(), outcome=outcome,
                           seconds=round(time.monotonic() - start, 1))

    def v2_runner_on_ok(self, result):
        self._task_result(result, "passed")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._task_result(result, "passed" if ignore_errors else "failed")

    def v2_runner_on_unreachable(self, result):
        self._task_result(result, "failed")

    def v2_playbook_on_stats(self, stats):
        hosts = sorted(stats.processed)
        bad = [h for h in hosts if stats.summarize(h)["failures"] or stats.summarize(h)["unreachable"]]
        self.write(kind="playbook", outcome="failed" if bad else "passed", failed_hosts=bad,
                   seconds=round(time.monotonic() - self.started, 1))
