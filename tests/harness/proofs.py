#!/usr/bin/env python3
"""The table `make test` ends with: every step, every scenario playbook and every fault case, passed or failed, and
its time, so that the tail of a CI log says what was proven.

    proofs.py [--timings .cache/timings.txt] [--log .cache/proofs.jsonl] [--readme README.md] [--require]

Reads the steps' times (tests/harness/timed.sh writes them), the records of the scenarios' playbooks and fault
tasks (tests/harness/callback/gdrcopy_proofs.py), of the testinfra verifiers and of the unit tests marked as fault
proofs (tests/unit/conftest.py), and the README's fault table. With --require it exits 1 when a step or a record
failed, or when a fault case has no passing proof from a place its README row names (the unit tests, or a scenario
with its `fault-N` tag): a proof that silently stopped running fails the run.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import OrderedDict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Steps that run beside the others (make test builds the VM images while lint and the unit tests run): shown, not
# added to the total, which is the time of the steps that ran one after the other.
BESIDE = {"vm-images"}
TIMING = re.compile(r"^(?P<name>\S+)\s+(?P<secs>\d+)s\s+rc=(?P<rc>\d+)\s*$")


def read_timings(text: str) -> list[dict]:
    """The lines of timed.sh: name, seconds, rc."""
    rows = []
    for line in text.splitlines():
        m = TIMING.match(line.strip())
        if m:
            rows.append({"name": m["name"], "seconds": int(m["secs"]), "passed": m["rc"] == "0"})
    return rows


def read_records(text: str) -> list[dict]:
    records = []
    for line in text.splitlines():
        line = line.strip()
        if line:
            try:
                records.append(json.loads(line))
            except ValueError:
                continue  # a line cut short by a killed run
    return records


def fault_rows(readme: str) -> "OrderedDict[int, dict]":
    """Case -> its fault text and the places its proof column names: 'unit' when it names unit tests, and each
    scenario named with the case's tag (`molecule/<s>` (`fault-N`...)."""
    section = readme.split("## What happens when things go wrong", 1)[-1].split("\n## ", 1)[0]
    rows = OrderedDict()
    for line in section.splitlines():
        m = re.match(r"^\| (\d+) \| (.*)\|$", line)
        if not m:
            continue
        case, cells = int(m[1]), [c.strip() for c in m[2].split(" | ")]
        proof = cells[-1]
        places = (["unit"] if re.search(r"\bunit:", proof) else []) + [
            s for s, n in re.findall(r"`molecule/(\w+)` \(`fault-(\d+)`", proof) if int(n) == case]
        rows[case] = {"fault": cells[0], "places": places}
    return rows


def summarize(timings: list[dict], records: list[dict], faults: "OrderedDict[int, dict]") -> tuple[list, list, list]:
    """(lines of the table, problems, fault verdicts). A problem is a failed step or record, or a fault case
    without a passing proof from each place its README row names."""
    lines, problems = [], []
    width = 62

    def row(name, passed, seconds, indent=0):
        verdict = {True: "passed", False: "FAILED", None: "not run"}[passed]
        secs = "" if seconds is None else ("%6.0fs" % seconds if seconds >= 10 else "%6.1fs" % seconds)
        lines.append("%-*s %-7s %s" % (width, ("  " * indent + name)[:width], verdict, secs))

    lines.append("%-*s %-7s %s" % (width, "proof", "result", "  time"))
    for t in timings:
        row(t["name"], t["passed"], t["seconds"])
        if not t["passed"]:
            problems.append("step %s failed" % t["name"])
        scenario = t["name"][len("molecule-"):] if t["name"].startswith("molecule-") else None
        if scenario is None:
            continue
        seen = {}
        for r in records:
            if r.get("kind") != "playbook" or r.get("scenario") != scenario:
                continue
            name = r.get("playbook", "?")
            seen[name] = seen.get(name, 0) + 1
            label = name if seen[name] == 1 else "%s (run %d)" % (name, seen[name])
            row(label, r.get("outcome") == "passed", r.get("seconds"), indent=1)
            if r.get("outcome") != "passed":
                problems.append("%s: %s failed (%s)" % (scenario, label, ", ".join(r.get("failed_hosts", [])) or "?"))

    verdicts = []
    lines.append("%-*s %-7s %s" % (width, "fault case (README: What happens when things go wrong)", "", ""))
    for case, info in faults.items():
        mine = [r for r in records if r.get("kind") == "fault" and r.get("case") == case]
        place_notes, case_ok = [], True
        for place in info["places"]:
            got = [r for r in mine if (r.get("scenario") == place) or (place == "unit" and r.get("scenario") == "unit")]
            ok = sum(r.get("outcome") == "passed" for r in got)
            bad = [r for r in got if r.get("outcome") != "passed"]
            place_notes.append("%s %d/%d" % (place, ok, len(got)))
            if bad or not ok:
                case_ok = False
                problems.append("fault %d: %s" % (case, (
                    "%d of its %s proofs failed" % (len(bad), place) if bad else "no %s proof ran" % place)))
        seconds = sum(r.get("seconds") or 0 for r in mine)
        row("%2d %s [%s]" % (case, info["fault"][:26], ", ".join(place_notes)), case_ok, seconds)
        verdicts.append((case, case_ok))
    return lines, problems, verdicts


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--timings", type=Path, default=REPO / ".cache" / "timings.txt")
    p.add_argument("--log", type=Path, default=REPO / ".cache" / "proofs.jsonl")
    p.add_argument("--readme", type=Path, default=REPO / "README.md")
    p.add_argument("--require", action="store_true", help="exit 1 unless everything passed and every case was proven")
    a = p.parse_args(argv)
    timings = read_timings(a.timings.read_text()) if a.timings.exists() else []
    records = read_records(a.log.read_text()) if a.log.exists() else []
    lines, problems, _ = summarize(timings, records, fault_rows(a.readme.read_text()))
    print("--- what this run proved ---")
    print("\n".join(lines))
    total = sum(t["seconds"] for t in timings if t["name"] not in BESIDE)
    print("total %ds (%.1f min); %s" % (total, total / 60, "; ".join(problems) if problems else "every proof passed"))
    return 1 if (a.require and problems) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
