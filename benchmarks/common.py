"""What the benchmarks share: where the repository is, a log line, one ansible-playbook run timed, saving results."""

import configparser
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VM_PY = REPO / "tests" / "harness" / "vm.py"


def logger(tag):
    def log(msg):
        print(f"[{tag} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
    return log


def configured_callbacks():
    """callbacks_enabled of the repository's ansible.cfg: ANSIBLE_CALLBACKS_ENABLED replaces that list."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "ansible.cfg")
    return [c.strip() for c in cfg.get("defaults", "callbacks_enabled", fallback="").split(",") if c.strip()]


def run_playbook(inventory, playbook, extra, logfile, forks=None, allow_failure=False):
    """Run ansible-playbook with this repository's ansible.cfg; return (rc, wall seconds, output). Unless
    allow_failure, a failed run ends the benchmark with the log's path. The task counts per host (task results and
    remote module executions, callback_plugins/task_counts.py) are left in <logfile>.counts.json (task_counts())."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               # The checkout as gpufleet.gdrcopy, then what `make setup` unpacked (community.general: chroot).
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join(str(REPO / d) for d in ("collections", ".cache/collections")),
               # Each log ends with the slowest tasks (where the time went); task_counts counts the executions.
               # Added to the callbacks ansible.cfg enables (a user's run has those), not instead of them.
               ANSIBLE_CALLBACKS_ENABLED=",".join(configured_callbacks() + ["ansible.posix.profile_tasks", "task_counts"]),
               PROFILE_TASKS_TASK_OUTPUT_LIMIT="25",
               ANSIBLE_CALLBACK_PLUGINS=str(REPO / "benchmarks" / "callback_plugins"),
               GDRCOPY_TASK_COUNTS=str(logfile) + ".counts.json")
    if forks:
        env["ANSIBLE_FORKS"] = str(forks)
    start = time.monotonic()
    with open(logfile, "w") as out:
        r = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                            str(playbook), "-e", json.dumps(extra)], cwd=REPO, env=env, stdout=out,
                           stderr=subprocess.STDOUT)
    wall = time.monotonic() - start
    if r.returncode != 0 and not allow_failure:
        sys.exit(f"{Path(playbook).name} failed (rc {r.returncode}): see {logfile}")
    return r.returncode, wall, Path(logfile).read_text()


def task_counts(logfile, host):
    """{ok, remote} of host in the run that wrote logfile (run_playbook)."""
    try:
        return json.loads(Path(str(logfile) + ".counts.json").read_text()).get(host, {"ok": 0, "remote": 0})
    except (OSError, ValueError):
        return {"ok": 0, "remote": 0}


def pack_source(out_dir, tarball=None):
    """The source the roles build (the fixture, or a real release tarball), as tests/harness/pack_source.py packs it."""
    env = dict(os.environ, **({"GDRCOPY_SOURCE_TARBALL": str(Path(tarball).resolve())} if tarball else {}))
    subprocess.run([sys.executable, str(REPO / "tests" / "harness" / "pack_source.py"), "--out", str(out_dir)],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    return json.loads((Path(out_dir) / "source.json").read_text())


def role_vars(source, work):
    """The variables every benchmark run passes: the packed source, caches and reports under work."""
    return {"gdrcopy_version": source["version"], "gdrcopy_source_url": source["url"],
            "gdrcopy_source_sha256": source["sha256"], "gdrcopy_cache_dir": str(work / "cache"),
            "nvidia_peermem_state": "present", "gdrcopy_report_dir": str(work / "reports")}


def save(results, out_dir, name):
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{name}-{results['date'][:10]}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    return out
