#!/usr/bin/env python3
"""Host benchmark: one VM's runs of site.yml against raw work and a bare Ansible play, on real kernels under QEMU.

    python3 benchmarks/host.py [--runs 4] [--tarball gdrcopy-2.6.tar.gz] [--out benchmarks/results]

Three measurements, each a ratio or a count taken in this one run (issue 7), printed and saved as JSON:

  first converge   a fresh VM (tests/harness/vm.py, the harness image with the test-only stand-ins) runs the raw
                   work by hand over SSH: the roles' packages and both kernels' headers with apt-get, `make lib`
                   and `make driver KVER=<k> NVIDIA_SRC_DIR=<dir>` per kernel from the same tarball, each kernel in
                   its own tree (raw_build_s, the yardstick until 2026-12-04); then the rest of the roles' work as
                   an admin would type it (raw_s adds it): `make lib_install` and ldconfig, a signing key with
                   openssl, sign-file, install and depmod per kernel, modprobe.d options and an enabled unit, the
                   group, modprobe of the chain and mknod. A second fresh VM runs site.yml. Ratio: site.yml / raw_s
                   (goal <= 1.6; the ratio to raw_build_s is printed too); its task results (goal <= 45) and remote
                   module executions (goal <= 20), counted by callback_plugins/task_counts.py.
  no-op rerun      on the converged VM, --runs times each, alternating: site.yml (must report changed=0 and add no
                   line to builds.log; preflight finds the host converged and skips every other step) and a play
                   that only gathers facts. Ratio of the medians (goal <= 1.5). Once more with every task
                   (gdrcopy_fast_rerun=false), for what the fast path saves.
  kernel upgrade   a third kernel of the same series and its headers from the archive (no kernel hook), the
                   stand-ins for it, then site.yml: the compiles it adds (goal: exactly one, gdrdrv for that kernel), and
                   its wall against the same work by hand in that VM afterwards (make driver, sign with the
                   recorded signing command, copy, depmod): goal <= 1.6.

Not run by CI: `make bench-host`. Needs root (QEMU, the image build).
"""

import argparse
import datetime
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import REPO, VM_PY, logger, pack_source, role_vars, run_playbook, save, task_counts

WORK = REPO / ".cache" / "bench" / "host"
FACTS_PLAY = """- name: Gather facts only
  hosts: all
  gather_facts: true
  tasks: []
"""
# The raw work by hand, in two parts timed apart. $1: the tarball.
# RAW_BUILD: the packages and the builds (the benchmark's yardstick until 2026-12-04, kept as raw_build_s).
RAW_BUILD = r"""set -euo pipefail
kernels=$(ls /lib/modules)
apt-get install -y -qq build-essential kmod make tar gzip python3 openssl xz-utils zstd \
  $(printf 'linux-headers-%s ' $kernels) >/dev/null
nvsrc=$(dirname "$(find /usr/src -name nv-p2p.h | sort | head -1)")
rm -rf /var/tmp/raw && mkdir -p /var/tmp/raw/lib
tar -xzf "$1" -C /var/tmp/raw/lib --strip-components=1
make -C /var/tmp/raw/lib -j"$(nproc)" lib >/dev/null
for k in $kernels; do
  mkdir -p "/var/tmp/raw/$k" && tar -xzf "$1" -C "/var/tmp/raw/$k" --strip-components=1
  make -C "/var/tmp/raw/$k" -j"$(nproc)" driver KVER="$k" NVIDIA_SRC_DIR="$nvsrc" >/dev/null
  test -f "/var/tmp/raw/$k/src/gdrdrv/gdrdrv.ko"
done
echo "raw: lib and gdrdrv for $(echo $kernels | wc -w) kernels"
"""
# RAW_INSTALL: the rest of what the roles do, as an admin would type it: install the library and put it on the
# loader path, make a signing key, sign gdrdrv per kernel with that kernel's sign-file, install it, depmod, the
# modprobe.d options and a boot unit (enabled), then load the chain and make the device node.
RAW_INSTALL = r"""set -euo pipefail
kernels=$(ls /lib/modules)
make -C /var/tmp/raw/lib lib_install prefix=/opt/raw-gdrcopy >/dev/null
echo /opt/raw-gdrcopy/lib > /etc/ld.so.conf.d/raw-gdrcopy.conf && ldconfig
mkdir -p -m 0700 /var/tmp/raw/mok
openssl req -new -x509 -newkey rsa:2048 -nodes -sha256 -days 36500 -subj "/CN=raw signing key" \
  -outform DER -keyout /var/tmp/raw/mok/mok.key -out /var/tmp/raw/mok/mok.der 2>/dev/null
for k in $kernels; do
  sf=$(ls /usr/src/linux-headers-$k/scripts/sign-file /lib/modules/$k/build/scripts/sign-file \
       /usr/lib/linux-kbuild-*/scripts/sign-file 2>/dev/null | head -1)
  ko=/var/tmp/raw/$k/src/gdrdrv/gdrdrv.ko
  "$sf" sha256 /var/tmp/raw/mok/mok.key /var/tmp/raw/mok/mok.der "$ko"
  install -D -m 0644 "$ko" "/lib/modules/$k/updates/gdrcopy/gdrdrv.ko"
  depmod "$k"
done
echo "options gdrdrv use_persistent_mapping=1" > /etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf
printf '[Unit]\nDescription=gdrdrv\n[Service]\nType=oneshot\nExecStart=/sbin/modprobe gdrdrv\n[Install]\nWantedBy=multi-user.target\n' \
  > /etc/systemd/system/raw-gdrcopy.service
systemctl daemon-reload && systemctl enable -q raw-gdrcopy.service
getent group gdrcopy >/dev/null || groupadd --system gdrcopy
modprobe nvidia && modprobe nvidia-peermem && modprobe gdrdrv
major=$(awk '$2 == "gdrdrv" {print $1}' /proc/devices)
rm -f /dev/gdrdrv && mknod -m 0660 /dev/gdrdrv c "$major" 0 && chgrp gdrcopy /dev/gdrdrv
echo "raw: installed, signed and loaded"
"""
# A third kernel of the running series from the archive, with its headers (as the image scenario finds it).
THIRD_KERNEL = r"""set -euo pipefail
apt-get update -qq >/dev/null
series=$(uname -r | cut -d- -f1)
k=$(apt-cache pkgnames "linux-headers-$series-" | grep -E "^linux-headers-$series-[0-9]+-(cloud-)?amd64$" \
    | sed 's/^linux-headers-//' | while read -r k; do [ -e "/lib/modules/$k" ] || echo "$k"; done \
    | sort -t- -k2,2n | tail -1)
apt-get install -y -qq --no-install-recommends "linux-image-$k" "linux-headers-$k" >/dev/null
echo "$k"
"""
# The kernel upgrade's work by hand, in the same VM after site.yml did it: gdrdrv for the new kernel ($2) from the
# same tarball ($1), signed with the signing command the role recorded (its driver record), copied through a
# temporary file, and depmod. The headers were installed before both (THIRD_KERNEL).
RAW_UPGRADE = r"""set -euo pipefail
k=$2
nvsrc=$(dirname "$(find /usr/src -name nv-p2p.h | sort | head -1)")
rm -rf /var/tmp/raw-up && mkdir -p /var/tmp/raw-up/tree
tar -xzf "$1" -C /var/tmp/raw-up/tree --strip-components=1
make -C /var/tmp/raw-up/tree -j"$(nproc)" driver KVER="$k" NVIDIA_SRC_DIR="$nvsrc" >/dev/null
ko=/var/tmp/raw-up/tree/src/gdrdrv/gdrdrv.ko
python3 - "$ko" "$k" <<'PY'
import json, subprocess, sys
cmd = json.load(open("/etc/gdrcopy-ansible/driver.json"))["sign_command"]  # the driver record of the role's install
if cmd:
    subprocess.run(cmd + ["%s=%s" % (sys.argv[2], sys.argv[1])], check=True, stdout=subprocess.DEVNULL)
PY
cp "$ko" /var/tmp/raw-up/gdrdrv.ko.new && mv /var/tmp/raw-up/gdrdrv.ko.new /var/tmp/raw-up/gdrdrv.ko
depmod "$k"
"""


log = logger("host")


class VM:
    def __init__(self, name):
        self.state = WORK / name
        self.info = None

    def up(self):
        out = subprocess.run([sys.executable, str(VM_PY), "up", "--state", str(self.state)], check=True,
                             capture_output=True, text=True).stdout
        self.info = json.loads(out.splitlines()[-1])
        return self

    def down(self):
        subprocess.run([sys.executable, str(VM_PY), "down", "--state", str(self.state)], check=False,
                       capture_output=True)

    def ssh(self, *cmd, stdin=None):
        i = self.info
        argv = ["ssh", "-q", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                "-o", f"UserKnownHostsFile={i['known_hosts']}", "-o", "IdentitiesOnly=yes", "-i", i["identity_file"],
                # ssh hands the remote shell one string: quote each word, so a script passed to bash -c stays whole.
                "-p", str(i["port"]), f"{i['user']}@{i['address']}", "--", " ".join(shlex.quote(c) for c in cmd)]
        r = subprocess.run(argv, input=stdin, capture_output=True, timeout=3600)
        if r.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed in the VM (rc {r.returncode}): {r.stderr.decode()[-2000:]}")
        return r.stdout.decode()

    def inventory(self, path):
        i = self.info
        path.write_text(
            f"[gpu_nodes]\nvm ansible_host={i['address']} ansible_port={i['port']} ansible_user={i['user']} "
            f"ansible_ssh_private_key_file={i['identity_file']} "
            f"ansible_ssh_common_args='-o UserKnownHostsFile={i['known_hosts']} -o IdentitiesOnly=yes'\n")
        return path

    def builds(self):
        return self.ssh("cat", "/var/lib/gdrcopy-ansible/build/builds.log").splitlines()


def playbook(inventory, path, extra, logfile):
    _, wall, out = run_playbook(inventory, path, extra, logfile)
    return wall, out


def recap_ok(out):
    """The ok= count of the VM's line in a playbook's recap (tasks that ran on it)."""
    m = re.search(r"^vm\s+:\s+ok=(\d+)", out, re.M)
    return int(m.group(1)) if m else -1


def changed_tasks(out):
    """The tasks that reported a change in a playbook's output, by name."""
    names = []
    for section in out.split("\nTASK [")[1:]:
        if re.search(r"^changed: \[", section, re.M):
            names.append(section.split("]", 1)[0])
    return names


# Written on every run by design (the report is this run's; molecule's idempotence check skips it too).
EVERY_RUN = {"Write the fleet report on the controller"}


def timed(fn, *args):
    start = time.monotonic()
    result = fn(*args)
    return time.monotonic() - start, result


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--tarball", type=Path, help="a real gdrcopy release tarball (default: the test fixture)")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    a = p.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    source = pack_source(WORK / "source", a.tarball)
    tarball = Path(source["url"].removeprefix("file://")).read_bytes()
    extra = role_vars(source, WORK)
    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "source": source, "cores": os.cpu_count()}

    log("first converge: the raw work by hand on a fresh VM")
    raw_vm = VM("raw").up()
    try:
        raw_build_s, _ = timed(lambda: (raw_vm.ssh("sh", "-c", "cat > /var/tmp/gdrcopy.tar.gz", stdin=tarball),
                                        raw_vm.ssh("bash", "-c", RAW_BUILD, "raw", "/var/tmp/gdrcopy.tar.gz")))
        raw_install_s, _ = timed(lambda: raw_vm.ssh("bash", "-c", RAW_INSTALL, "raw"))
        raw_s = raw_build_s + raw_install_s
    finally:
        raw_vm.down()

    log("first converge: site.yml on a second fresh VM")
    vm = VM("vm").up()
    try:
        inv = vm.inventory(WORK / "inventory.ini")
        facts = WORK / "facts.yml"
        facts.write_text(FACTS_PLAY)
        site_s, _ = playbook(inv, REPO / "site.yml", extra, WORK / "converge.log")
        counts = task_counts(WORK / "converge.log", "vm")
        results["first_converge"] = {"raw_s": round(raw_s, 1), "site_s": round(site_s, 1),
                                     "ratio": round(site_s / raw_s, 2), "goal": 1.6,
                                     "raw_build_s": round(raw_build_s, 1),
                                     "ratio_to_raw_build": round(site_s / raw_build_s, 2),
                                     "tasks": counts["ok"], "remote_tasks": counts["remote"]}
        log(f"first converge: raw {raw_s:.0f}s, site.yml {site_s:.0f}s")

        before = len(vm.builds())
        site, bare, tasks = [], [], []

        def rerun(name, run_extra):
            wall, out = playbook(inv, REPO / "site.yml", run_extra, WORK / f"{name}.log")
            changed = [t for t in changed_tasks(out) if t.split(" : ")[-1] not in EVERY_RUN]
            if changed:
                sys.exit(f"the rerun changed {changed}: see {WORK / f'{name}.log'}")
            return wall, out

        for i in range(a.runs):
            wall, out = rerun(f"rerun-{i}", extra)
            if "converged: the host is as the last verified run left it" not in out:
                sys.exit(f"the rerun did not find the host converged: see {WORK / f'rerun-{i}.log'}")
            site.append(wall)
            tasks.append(recap_ok(out))
            bare.append(playbook(inv, facts, {}, WORK / f"facts-{i}.log")[0])
        full_s, full_out = rerun("rerun-every-task", dict(extra, gdrcopy_fast_rerun=False))
        results["noop_rerun"] = {"site_s": [round(x, 1) for x in site], "gather_facts_s": [round(x, 1) for x in bare],
                                 "tasks": tasks, "compiles": len(vm.builds()) - before,
                                 "ratio": round(statistics.median(site) / statistics.median(bare), 2), "goal": 1.5,
                                 "every_task_s": round(full_s, 1), "every_task_tasks": recap_ok(full_out),
                                 "every_task_remote": task_counts(WORK / "rerun-every-task.log", "vm")["remote"],
                                 "every_task_ratio": round(full_s / statistics.median(bare), 2)}
        log(f"no-op rerun: site.yml {site}, gather facts {bare}, every task {full_s:.0f}s")

        third = vm.ssh("bash", "-c", THIRD_KERNEL).strip().splitlines()[-1]
        log(f"kernel upgrade: installed {third}; the stand-ins for it, then site.yml")
        playbook(inv, REPO / "tests" / "harness" / "standins.yml", {}, WORK / "standins.log")
        before = vm.builds()
        upgrade_s, _ = playbook(inv, REPO / "site.yml", extra, WORK / "upgrade.log")
        added = vm.builds()[len(before):]
        log("kernel upgrade: the same work by hand (make driver, sign, copy, depmod)")
        raw_up_s, _ = timed(lambda: (vm.ssh("sh", "-c", "cat > /var/tmp/gdrcopy.tar.gz", stdin=tarball),
                                     vm.ssh("bash", "-c", RAW_UPGRADE, "raw", "/var/tmp/gdrcopy.tar.gz", third)))
        counts = task_counts(WORK / "upgrade.log", "vm")
        results["kernel_upgrade"] = {"kernel": third, "site_s": round(upgrade_s, 1), "raw_s": round(raw_up_s, 1),
                                     "ratio": round(upgrade_s / raw_up_s, 2), "goal": 1.6, "compiles": len(added),
                                     "compiled": added, "only_the_new_kernel": len(added) == 1
                                     and f"KVER={third} " in added[0],
                                     "tasks": counts["ok"], "remote_tasks": counts["remote"]}
    finally:
        vm.down()

    out = save(results, a.out, "host")
    fc, nr, ku = results["first_converge"], results["noop_rerun"], results["kernel_upgrade"]
    print(f"host benchmark, one VM under QEMU ({'KVM' if os.environ.get('GDRCOPY_VM_ACCEL') == 'kvm' else 'TCG'}), "
          f"source {source['version']} ({source['kind']}):")
    print(f"  first converge: site.yml {fc['site_s']:.0f}s vs the same work by hand {fc['raw_s']:.0f}s: "
          f"ratio {fc['ratio']} (goal <= 1.6; vs apt-get + make alone, {fc['raw_build_s']:.0f}s: "
          f"{fc['ratio_to_raw_build']}); {fc['tasks']} task results (goal <= 45), {fc['remote_tasks']} remote "
          f"executions (goal <= 20)")
    print(f"  no-op rerun: site.yml median {statistics.median(nr['site_s']):.1f}s ({nr['tasks'][0]} tasks) vs gather facts "
          f"{statistics.median(nr['gather_facts_s']):.1f}s: ratio {nr['ratio']} (goal <= 1.5), {nr['compiles']} compiles; "
          f"every task (gdrcopy_fast_rerun=false) {nr['every_task_s']:.0f}s ({nr['every_task_tasks']} tasks, goal <= 40; "
          f"{nr['every_task_remote']} remote): ratio {nr['every_task_ratio']}")
    print(f"  kernel upgrade to {ku['kernel']}: site.yml {ku['site_s']:.0f}s vs by hand {ku['raw_s']:.0f}s: ratio "
          f"{ku['ratio']} (goal <= 1.6); {ku['compiles']} compile(s), only the new kernel: {ku['only_the_new_kernel']}; "
          f"{ku['tasks']} task results, {ku['remote_tasks']} remote")
    print(f"  saved to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
