#!/usr/bin/env bash
# `make demo`: the main job against a throwaway VM of the test harness.
#   1. boot a Debian 12 VM on a real kernel (tests/harness/vm.py; the image is built once and cached)
#   2. install the test-only stand-ins for nvidia/nvidia-peermem in it (no GPU here)
#   3. run site.yml against it with the fixture gdrcopy source (or GDRCOPY_SOURCE_TARBALL), then once more: the
#      host is converged, so preflight's one read finds nothing to do and the run must change nothing
#   4. print the host's status; stop the VM unless KEEP_VM=1
# Plain Ansible throughout (the repository's ansible.cfg), as a user runs it; `make test` runs this too.
set -euo pipefail
cd "$(dirname "$0")/../.."
demo=.cache/demo
state=$demo/vm
mkdir -p "$demo"

stop_vm() { [ "${KEEP_VM:-0}" = 1 ] || python3 tests/harness/vm.py down --state "$state"; }
trap stop_vm EXIT

info=$(python3 tests/harness/vm.py up --state "$state")
source_json=$(python3 tests/harness/pack_source.py --out "$demo/source")

python3 - "$info" "$source_json" >"$demo/inventory.yml" <<'PY'
import json, sys
vm, src = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps({"gpu_nodes": {
    "hosts": {"gdrcopy-demo": {
        "ansible_host": vm["address"], "ansible_port": vm["port"], "ansible_user": vm["user"],
        "ansible_ssh_private_key_file": vm["identity_file"],
        "ansible_ssh_common_args": f"-o UserKnownHostsFile={vm['known_hosts']} -o StrictHostKeyChecking=yes"
                                   " -o IdentitiesOnly=yes"}},
    "vars": {"gdrcopy_version": src["version"], "gdrcopy_source_url": src["url"],
             "gdrcopy_source_sha256": src["sha256"]}}}, indent=2))
PY

# Each step says how long it took (the README's figures for Debian 12 beside the trixie scenario's for Debian 13).
took() { local start=$SECONDS; "$@"; echo "== took $((SECONDS - start)) s"; }
echo "== test-only stand-ins for nvidia and nvidia-peermem (this VM has no GPU)"
took ansible-playbook -i "$demo/inventory.yml" tests/harness/standins.yml
echo "== site.yml"
took ansible-playbook -i "$demo/inventory.yml" site.yml
echo "== site.yml again (nothing to do)"
took ansible-playbook -i "$demo/inventory.yml" site.yml | tee "$demo/rerun.log"
grep -q "converged: the host is as the last verified run left it" "$demo/rerun.log" \
  || { echo "the rerun did not find the host converged ($demo/rerun.log)" >&2; exit 1; }
# Nothing changed: not on the host, and not the fleet report on the controller (a converged host reports what its
# last verified run recorded, so the report's content is the same).
grep -Eq "^gdrcopy-demo +: ok=[0-9]+ +changed=0 " "$demo/rerun.log" \
  || { echo "the rerun changed something ($demo/rerun.log):" >&2; grep -E -B3 "^changed: " "$demo/rerun.log" >&2; exit 1; }
echo "== status"
took ansible-playbook -i "$demo/inventory.yml" playbooks/status.yml
if [ "${KEEP_VM:-0}" = 1 ]; then
  echo "VM left running: python3 tests/harness/vm.py ssh --state $state -- <command>; make demo-down stops it"
fi
