#!/usr/bin/env python3
"""No-op benchmark: a rerun of site.yml on a converged VM against a bare gather-facts play on the same VM.

    python3 benchmarks/noop.py [--runs 3] [--out benchmarks/results]

Boots a throwaway VM of the harness (tests/harness/vm.py, a real Debian kernel under QEMU), installs the test-only
stand-ins, converges it with site.yml once, then alternates, --runs times each: site.yml (must report changed=0
and compile nothing: builds.log does not grow) and a play that only gathers facts. Prints the ratio of the median
wall times, measured in this one run (goal, issue 7: <= 1.5x). Not run by CI: `make bench-noop`.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VM_PY = REPO / "tests" / "harness" / "vm.py"
WORK = REPO / ".cache" / "bench" / "noop"
FACTS_PLAY = """- name: Gather facts only
  hosts: all
  gather_facts: true
  tasks: []
"""


def log(msg):
    print(f"[noop {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_playbook(inventory, playbook, extra, logfile):
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    start = time.monotonic()
    with open(logfile, "w") as out:
        r = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(playbook),
                            "-e", json.dumps(extra)], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    wall = time.monotonic() - start
    if r.returncode != 0:
        sys.exit(f"{playbook} failed (rc {r.returncode}): see {logfile}")
    return wall, Path(logfile).read_text()


def compiles(info):
    r = subprocess.run([sys.executable, str(VM_PY), "ssh", "--state", str(WORK / "vm"), "--", "cat",
                        "/var/lib/gdrcopy-ansible/build/builds.log"], capture_output=True, text=True)
    return len(re.findall(r" built ", r.stdout))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    a = p.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(REPO / "tests" / "harness" / "pack_source.py"), "--out", str(WORK / "source")],
                   check=True, stdout=subprocess.DEVNULL)
    source = json.loads((WORK / "source" / "source.json").read_text())
    info = json.loads(subprocess.run([sys.executable, str(VM_PY), "up", "--state", str(WORK / "vm")], check=True,
                                     capture_output=True, text=True).stdout.splitlines()[-1])
    try:
        inv = WORK / "inventory.ini"
        inv.write_text(
            f"vm ansible_host={info['address']} ansible_port={info['port']} ansible_user={info['user']} "
            f"ansible_ssh_private_key_file={info['identity_file']} "
            f"ansible_ssh_common_args='-o UserKnownHostsFile={info['known_hosts']} -o IdentitiesOnly=yes'\n")
        extra = {"gdrcopy_version": source["version"], "gdrcopy_source_url": source["url"],
                 "gdrcopy_source_sha256": source["sha256"], "gdrcopy_cache_dir": str(WORK / "cache"),
                 "nvidia_peermem_state": "present", "gdrcopy_report_dir": str(WORK / "reports")}
        facts = WORK / "facts.yml"
        facts.write_text(FACTS_PLAY)
        log("stand-ins and the first converge")
        run_playbook(inv, REPO / "tests" / "harness" / "standins.yml", extra, WORK / "standins.log")
        run_playbook(inv, REPO / "site.yml", extra, WORK / "converge.log")
        before = compiles(info)
        site, bare = [], []
        for i in range(a.runs):
            wall, out = run_playbook(inv, REPO / "site.yml", extra, WORK / f"rerun-{i}.log")
            if not re.search(r"vm\s+: ok=\d+\s+changed=0 ", out):
                sys.exit(f"the rerun changed something: see {WORK / f'rerun-{i}.log'}")
            site.append(wall)
            bare.append(run_playbook(inv, facts, {}, WORK / f"facts-{i}.log")[0])
        after = compiles(info)
    finally:
        subprocess.run([sys.executable, str(VM_PY), "down", "--state", str(WORK / "vm")], check=False)
    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "source": source, "runs": a.runs, "site_rerun_s": [round(x, 1) for x in site],
               "gather_facts_s": [round(x, 1) for x in bare], "compiles_in_reruns": after - before,
               "ratio": round(statistics.median(site) / statistics.median(bare), 2)}
    a.out.mkdir(parents=True, exist_ok=True)
    out = a.out / f"noop-{results['date'][:10]}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"no-op rerun of site.yml: median {statistics.median(site):.1f}s; gather-facts play: median "
          f"{statistics.median(bare):.1f}s; ratio {results['ratio']} (goal <= 1.5); compiles in the reruns: "
          f"{results['compiles_in_reruns']}; saved to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
