#!/usr/bin/env python3
"""Fleet benchmark: N image targets converged by site.yml with per-host builds, then with build-once fleet builds.

    python3 benchmarks/fleet.py [--hosts 16] [--tarball gdrcopy-2.6.tar.gz] [--out benchmarks/results]

The targets are chroots on this machine (Ansible's community.general.chroot connection, image mode): hard-linked
copies (`cp -al`) of one root, the harness image's (tests/harness/vm.py root), prepared once with the test-only
NVIDIA stand-ins and the OS packages the roles install (mok_signing's: openssl, mokutil, ...), as a golden
image carries them: both modes would install the same packages in every target, which is not a build. Half of
them keep only the image's default kernel and half only its other kernel: two kernel sets. Each mode runs twice, in
the order per-host, fleet, fleet, per-host, each time on fresh copies. Measured in one run and printed as ratios:

  compiles  lines of builds.log that say "built" (a compile), summed over all targets; "unpacked" (fleet mode:
            taken from the controller) is counted apart
  wall      seconds of the site.yml run, the mean of the mode's two runs (the order cancels a steady drift of the
            machine's speed, which on shared cores reaches tens of percent within an hour)
  cpu       CPU seconds of the run and everything it started (getrusage of the children), the same mean: a run
            here keeps both cores busy, so the wall ratio follows the CPU ratio
  tasks     task results and remote module executions of one image target (callback_plugins/task_counts.py)

Goals (issue [3 of 7]): fleet mode compiles once per distinct build (1 library + 2 kernels) and takes <= 0.5x the
wall time of per-host builds; an image target runs at most 60 task results. Last, the library's entry in the
controller cache is truncated and two fresh targets run in fleet mode: the entry must be found corrupt, compiled
once again and checksummed anew. Then the host picked to compile the library fails (no compiler): the other host
compiles what it left undone and finishes. Needs root (chroot, mounts). Not run by CI: `make bench-fleet`.
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

from common import REPO, VM_PY, logger, pack_source, role_vars, run_playbook, save, task_counts

WORK = REPO / ".cache" / "bench" / "fleet"
log = logger("fleet")


def vm(*args):
    return subprocess.run([sys.executable, str(VM_PY), *args], check=True, capture_output=True, text=True).stdout


def playbook(inventory, playbook_path, extra, logfile, allow_failure=False):
    rc, wall, _ = run_playbook(inventory, playbook_path, extra, logfile, forks=16, allow_failure=allow_failure)
    return rc if allow_failure else wall


def write_inventory(path, roots, group_vars):
    lines = ["[gpu_nodes]"] + [f"{r.parent.name} ansible_host={r} ansible_connection=community.general.chroot"
                             for r in roots]
    # The targets' own Python; delegated tasks keep the controller's (an extra var would override both).
    group_vars = dict({"ansible_python_interpreter": "auto_silent"}, **group_vars)
    lines += ["", "[gpu_nodes:vars]"] + [f"{k}={json.dumps(v)}" for k, v in group_vars.items()]
    path.write_text("\n".join(lines) + "\n")


def os_packages():
    """What the roles install from the OS archive on Debian beyond the image's build tools: mok_signing's packages
    (its vars/main.yml, the one list the role installs from)."""
    import yaml  # ansible-core's dependency, in the same virtual environment
    spec = yaml.safe_load((REPO / "roles" / "mok_signing" / "vars" / "main.yml").read_text())
    return spec["__mok_signing_os_packages"]["Debian"] + ["mokutil"]


def prepare_base(extra):
    """The harness image's root, with the stand-ins built for both kernels and the roles' OS packages installed
    (once), unmounted. The packages are in the base as in a golden image: the same install in every target of
    both modes is not what this benchmark compares (bench-host's first converge times the roles installing them)."""
    base, packages = WORK / "base", os_packages()
    if not (base / "prepared").exists() or (base / "prepared").read_text().split() != packages:
        root = Path(json.loads(vm("root", "--state", str(base)))["root"])
        inv = WORK / "base.ini"
        write_inventory(inv, [root], {})
        playbook(inv, REPO / "tests" / "harness" / "standins.yml", extra, WORK / "base-standins.log")
        subprocess.run(["chroot", str(root), "apt-get", "install", "-y", "--no-install-recommends", *packages],
                       check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        (base / "prepared").write_text(" ".join(packages) + "\n")
    vm("unroot", "--state", str(base))
    return base / "root"


def kernels_of(root):
    return sorted(p.name.removeprefix("vmlinuz-") for p in (root / "boot").glob("vmlinuz-*"))


def make_targets(base_root, n, mode):
    """n hard-linked copies; the first half keeps only the first kernel, the second half only the second."""
    kernels = kernels_of(base_root)
    roots = []
    for i in range(n):
        state = WORK / mode / f"target{i:02d}"
        shutil.rmtree(state, ignore_errors=True)
        state.mkdir(parents=True)
        subprocess.run(["cp", "-al", str(base_root), str(state / "root")], check=True)
        drop = kernels[1] if i < n // 2 else kernels[0]
        for path in [state / "root" / "lib" / "modules" / drop, state / "root" / "boot" / f"vmlinuz-{drop}",
                     state / "root" / "boot" / f"initrd.img-{drop}"]:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        vm("root", "--state", str(state))
        roots.append(state / "root")
    return roots


def count(roots):
    built = unpacked = 0
    for root in roots:
        text = (root / "var/lib/gdrcopy-ansible/build/builds.log").read_text() if (
            root / "var/lib/gdrcopy-ansible/build/builds.log").exists() else ""
        built += len(re.findall(r" built ", text))
        unpacked += len(re.findall(r" unpacked ", text))
    return built, unpacked


def remove_targets(mode):
    for state in sorted((WORK / mode).glob("target*")):
        vm("unroot", "--remove", "--state", str(state))
    shutil.rmtree(WORK / mode, ignore_errors=True)


ORDER = ("per-host", "fleet", "fleet", "per-host")


def cpu_seconds():
    """CPU seconds (user + system) of this process's finished children: the playbook runs and all they started
    (workers, the targets' module runs, compilers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, default=16)
    p.add_argument("--tarball", type=Path, help="a real gdrcopy release tarball (default: the test fixture)")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    a = p.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("the fleet benchmark needs root (chroot targets, mounts)")
    WORK.mkdir(parents=True, exist_ok=True)
    source = pack_source(WORK / "source", a.tarball)
    extra = role_vars(source, WORK)
    base_root = prepare_base(extra)
    results = {"hosts": a.hosts, "source": source, "kernels": kernels_of(base_root),
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "cores": os.cpu_count()}
    # Each mode twice, in the order per-host, fleet, fleet, per-host: this machine's speed drifts by tens of percent
    # over minutes (shared cores), and the mean of each mode over that order cancels a drift that is linear in time.
    for run, mode in enumerate(ORDER):
        artifacts = str(WORK / "artifacts") if mode == "fleet" else ""
        if mode == "fleet":  # an empty controller cache each time; the last fleet run's is kept for the cases below
            shutil.rmtree(WORK / "artifacts", ignore_errors=True)
        roots = make_targets(base_root, a.hosts, mode)
        inv = WORK / f"{mode}.ini"
        write_inventory(inv, roots, {})
        log(f"{mode} ({run + 1} of {len(ORDER)}): site.yml on {len(roots)} targets")
        cpu = cpu_seconds()
        try:
            wall = playbook(inv, REPO / "site.yml", dict(extra, gdrcopy_artifact_dir=artifacts), WORK / f"{mode}.log")
            cpu = cpu_seconds() - cpu
            built, unpacked = count(roots)
        finally:
            remove_targets(mode)
        counts = task_counts(WORK / f"{mode}.log", roots[0].parent.name)
        this = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "compiles": built, "unpacked": unpacked,
                "target_tasks": counts["ok"], "target_remote": counts["remote"]}
        results.setdefault(mode, dict(this, runs=[]))["runs"].append(this)
        log(f"{mode}: {wall:.0f}s ({cpu:.0f} CPU-s), {built} compiles, {unpacked} unpacked, "
            f"{counts['ok']} task results per target")
    for mode in ("per-host", "fleet"):
        runs = results[mode]["runs"]
        results[mode]["wall_s"] = round(sum(r["wall_s"] for r in runs) / len(runs), 1)
        results[mode]["cpu_s"] = round(sum(r["cpu_s"] for r in runs) / len(runs), 1)
        results[mode]["compiles"] = max(r["compiles"] for r in runs)  # each run must compile the same: the worst
    # A corrupt cache entry: truncate the library's tarball on the controller; two fresh targets (one per kernel
    # set) in fleet mode must find its checksum wrong, delete it, compile the library once and take the rest.
    lib = next((WORK / "artifacts").glob("*/lib-*.tar.gz"))
    lib.write_bytes(lib.read_bytes()[:1000])
    roots = make_targets(base_root, 2, "corrupt")
    inv = WORK / "corrupt.ini"
    write_inventory(inv, roots, {})
    log("corrupt: site.yml on 2 targets with the library's cache entry truncated")
    try:
        playbook(inv, REPO / "site.yml", dict(extra, gdrcopy_artifact_dir=str(WORK / "artifacts")),
                 WORK / "corrupt.log")
        built, unpacked = count(roots)
    finally:
        remove_targets("corrupt")
    recorded = (lib.parent / (lib.name + ".sha256")).read_text().split()[0]
    results["corrupt_entry"] = {"compiles": built, "unpacked": unpacked,
                                "rebuilt": built == 1 and hashlib.sha256(lib.read_bytes()).hexdigest() == recorded}
    log(f"corrupt: {built} compiles, {unpacked} unpacked, entry rebuilt and checksummed: "
        f"{results['corrupt_entry']['rebuilt']}")
    # A builder lost mid-run: the first of two fresh targets (the one picked to compile the library) has no
    # compiler, so its build fails and it leaves the play; the other must compile what that builder left undone.
    shutil.rmtree(WORK / "artifacts", ignore_errors=True)
    roots = make_targets(base_root, 2, "lost")
    for gcc in (roots[0] / "usr" / "bin").glob("gcc*"):
        gcc.unlink()  # a hard link of the base's: only this target loses it
    inv = WORK / "lost.ini"
    write_inventory(inv, roots, {})
    log("lost: site.yml on 2 targets, the library's builder without a compiler")
    try:
        rc = playbook(inv, REPO / "site.yml", dict(extra, gdrcopy_artifact_dir=str(WORK / "artifacts")),
                      WORK / "lost.log", allow_failure=True)
        built, unpacked = count(roots[1:])
    finally:
        remove_targets("lost")
    results["builder_lost"] = {"other_host_compiles": built, "other_host_finished": rc == 2 and built == 2}
    log(f"lost: the other host compiled {built} (its own gdrdrv and the library), play rc {rc}")
    results["wall_ratio"] = round(results["fleet"]["wall_s"] / results["per-host"]["wall_s"], 2)
    results["cpu_ratio"] = round(results["fleet"]["cpu_s"] / results["per-host"]["cpu_s"], 2)
    results["compiles"] = results["fleet"]["compiles"]
    results["ratio_compiles"] = round(results["fleet"]["compiles"] / max(1, results["per-host"]["compiles"]), 2)
    out = save(results, a.out, "fleet")
    print(f"fleet benchmark, {a.hosts} image targets, 2 kernel sets, source {source['version']} ({source['kind']}):")
    for mode in ("per-host", "fleet"):
        r = results[mode]
        print(f"  {mode + ' builds:':16} {r['wall_s']:.0f}s (runs {', '.join('%.0f' % x['wall_s'] for x in r['runs'])}; "
              f"{r['cpu_s']:.0f} CPU-s), {r['compiles']} compiles, {r['unpacked']} taken from the "
              f"controller; an image target: {r['target_tasks']} task results (goal <= 60), {r['target_remote']} remote")
    print(f"  wall ratio {results['wall_ratio']} (goal <= 0.5), CPU ratio {results['cpu_ratio']}, "
          f"compiles ratio {results['ratio_compiles']}")
    print(f"  a truncated cache entry: {results['corrupt_entry']['compiles']} compile, rebuilt and checksummed again: "
          f"{results['corrupt_entry']['rebuilt']}")
    print(f"  the library's builder lost mid-run: the other host finished, compiling {results['builder_lost']['other_host_compiles']}"
          f" ({results['builder_lost']['other_host_finished']})")
    print(f"  saved to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
