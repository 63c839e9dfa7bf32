"""Preflight against the controller itself, for real: a host that cannot load kernel modules (no module support,
or kernel.modules_disabled=1) stops in preflight with one sentence saying what to do, before anything changes.
Both cases run on any controller: preflight runs in a mount namespace whose /proc/sys/kernel says so."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TEST_COLLECTIONS, need

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


# The controller's /proc/sys/kernel as preflight sees it, in a private mount namespace: a tmpfs with a copy of every
# readable file, modules_disabled set to 1 or taken away, bound over the real one. The kernel of the controller does
# not matter: both cases run on any controller (as root, for the namespace).
OVERLAY = """set -e
t=$(mktemp -d)
mount -t tmpfs gdrcopy-test "$t"
for f in /proc/sys/kernel/*; do [ -f "$f" ] && cat "$f" > "$t/${f##*/}" 2>/dev/null || true; done
case "$1" in disabled) echo 1 > "$t/modules_disabled" ;; no_support) rm -f "$t/modules_disabled" ;; esac
mount --bind "$t" /proc/sys/kernel
shift
exec "$@"
"""
SENTENCES = {
    "disabled": "module loading is disabled on this host (kernel.modules_disabled=1)",
    "no_support": "has no loadable module support (/proc/sys/kernel/modules_disabled is absent)",
}


@pytest.mark.fault(5)
@pytest.mark.parametrize("case", sorted(SENTENCES))
def test_preflight_stops_a_host_that_cannot_load_modules_and_changes_nothing(tmp_path, case):
    need(os.geteuid() == 0 and shutil.which("unshare"), "needs root and unshare (a private mount namespace)")
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    extra = {"ansible_python_interpreter": sys.executable, "ansible_become": False, "gdrcopy_hosts": "localhost",
             "gdrcopy_cache_dir": str(tmp_path / "cache")}
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", OVERLAY, "overlay", case,
                        str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                        str(REPO / "playbooks" / "preflight.yml"), "-e", json.dumps(extra)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    out = " ".join(r.stdout.split())
    assert r.returncode != 0, out + r.stderr
    assert SENTENCES[case] in out and "set gdrcopy_mode: image" in out, out
    assert re.search(r"localhost : ok=\d+ changed=0 unreachable=0 failed=1", out), out
    assert not (tmp_path / "cache").exists(), "preflight stopped before fetching the source"


def preflight_tasks(tmp_path, project=REPO, **extra_vars):
    """Run preflight (of `project`) on the controller (it stops at the module check here, after the digests) and
    return its tasks as the json callback has them."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(project / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",  # a test collection (make setup unpacks it)
               ANSIBLE_COLLECTIONS_PATH="%s:%s" % (project / "collections", TEST_COLLECTIONS))
    extra = {"ansible_python_interpreter": sys.executable, "ansible_become": False, "gdrcopy_hosts": "localhost",
             "gdrcopy_cache_dir": str(tmp_path / "cache"), **extra_vars}
    r = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                        str(project / "playbooks" / "preflight.yml"), "-e", json.dumps(extra)],
                       cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert "Unable to find" not in r.stdout + r.stderr, "a warning on every run: " + r.stdout[-1500:]
    return json.loads(r.stdout)["plays"][0]["tasks"]


def preflight_inputs(tmp_path, project=REPO, **extra_vars):
    """The gdrcopy_run_inputs preflight (of `project`) sets on the controller."""
    tasks = preflight_tasks(tmp_path, project, **extra_vars)
    found = [t["hosts"]["localhost"]["ansible_facts"]["gdrcopy_run_inputs"] for t in tasks
             if t["task"]["name"] == "Resolve the mode and digest this run's inputs"]
    assert len(found) == 1, tasks[-3:]
    # An untagged run of a host in host mode reads it for the converged check (ansible_run_tags is a tuple).
    read = [t["hosts"]["localhost"] for t in tasks if t["task"]["name"].startswith("Read the host, smoke-check it and compare")]
    assert len(read) == 1, read
    if extra_vars.get("gdrcopy_fast_rerun", True):
        assert not read[0].get("skipped") and read[0]["converged"]["differences"] == [
            "no record of a verified run (/var/lib/gdrcopy-ansible/converged.json)"], read
    else:
        assert read[0].get("skipped"), read
    return found[0]


@pytest.mark.slow
def test_the_run_inputs_change_with_a_variable_and_the_code_but_never_carry_a_secret(tmp_path):
    base = preflight_inputs(tmp_path)
    assert set(base) == {"code", "mode", "gdrcopy", "mok_signing", "nvidia_peermem", "config"}
    assert base["mode"] == "host" and all(re.fullmatch(r"[0-9a-f]{64}", base[k]) for k in base if k != "mode")
    device = preflight_inputs(tmp_path, gdrcopy_device_mode="0640")
    assert [k for k in base if base[k] != device[k]] == ["gdrcopy"]
    peermem = preflight_inputs(tmp_path, nvidia_peermem_state="absent")
    assert [k for k in base if base[k] != peermem[k]] == ["nvidia_peermem"]
    # The enrollment password (no_log in its spec) is no input: a digest written on the host never depends on it.
    assert preflight_inputs(tmp_path, mok_signing_enrollment_password="another-Secret-9") == base
    # Nor is the switch of the fast path: a run with every task records what a fast one compares with.
    assert preflight_inputs(tmp_path, gdrcopy_fast_rerun=False) == base
    # A controller-held pair: the certificate's content joins mok_signing's digest, the private key's never does
    # (before, the key's sha256 was shown at -v and stored in every node's record).
    cert, key = tmp_path / "controller.der", tmp_path / "controller.key"
    key.write_bytes(b"key")
    pair = {"mok_signing_controller_cert": str(cert), "mok_signing_controller_key": str(key)}
    cert.write_bytes(b"one")
    one = preflight_inputs(tmp_path, **pair)
    key.write_bytes(b"another key")
    one_other_key = preflight_inputs(tmp_path, **pair)
    cert.write_bytes(b"two")
    two = preflight_inputs(tmp_path, **pair)
    assert set(one) == set(base) and one == one_other_key
    assert [k for k in base if one[k] != two[k]] == ["mok_signing"]


@pytest.mark.slow
def test_the_code_digest_follows_every_file_the_roles_run_and_no_doc(tmp_path):
    """A copy of the project: editing a role's task file, a template or a module changes the code digest (the
    next run on a converged host then runs every task); editing a README does not; where the project lies does
    not matter."""
    project = tmp_path / "project"
    project.mkdir()
    for part in ("ansible.cfg", "galaxy.yml", "site.yml", "meta", "roles", "plugins", "playbooks", "src", "README.md"):
        (shutil.copytree if (REPO / part).is_dir() else shutil.copy2)(REPO / part, project / part)
    # the copy is its own collection, as a checkout is (its lookup digests the copy, not this checkout)
    (project / "collections" / "ansible_collections" / "gpufleet").mkdir(parents=True)
    (project / "collections" / "ansible_collections" / "gpufleet" / "gdrcopy").symlink_to("../../..")
    digests = [preflight_inputs(tmp_path, project)["code"]]
    assert preflight_inputs(tmp_path)["code"] == digests[0], "the same code digests the same from any checkout"
    for edited in ("README.md", "roles/gdrcopy/README.md", "roles/gdrcopy/tasks/load.yml",
                   "roles/gdrcopy/templates/modprobe-gdrdrv.conf.j2", "roles/mok_signing/files/mok-sign",
                   "plugins/module_utils/gdrcopy_converged.py", "roles/gdrcopy/files/releases.yml",
                   "plugins/lookup/code_digest.py", "site.yml", "ansible.cfg"):
        with open(project / edited, "a") as f:
            f.write("\n# edited\n")
        digests.append(preflight_inputs(tmp_path, project)["code"])
    assert digests[0] == digests[1] == digests[2], "a README is no input"
    assert len(set(digests[2:])) == len(digests) - 2, digests


def test_an_unpinned_git_source_is_never_converged(tmp_path):
    """Before: a branch under gdrcopy_allow_unpinned that moved after the verified run left the host converged (the
    digest holds the branch name, not the commit it points to), so the new commit was never built."""
    tasks = preflight_tasks(tmp_path, gdrcopy_version="9.9", gdrcopy_source_type="git",
                            gdrcopy_source_git_url=(tmp_path / "repo").as_uri(), gdrcopy_source_git_ref="main",
                            gdrcopy_allow_unpinned=True)
    by_name = dict((t["task"]["name"], t["hosts"]["localhost"]) for t in tasks)
    assert by_name["Read the host, smoke-check it and compare it with the record of its last verified run"].get("skipped"), by_name


def test_the_plan_says_why_every_step_runs(tmp_path):
    """The plan's `run` line (roles/gdrcopy/vars/main.yml: __gdrcopy_why_every_step), rendered by ansible-playbook
    with the role's variables for an unpinned git source, a host whose record differs, and a run without the check."""
    git = {"type": "git", "repo": "https://example.org/gdrcopy.git", "ref": "main", "pin": ""}
    cases = {
        "unpinned": {"__gdrcopy_in": {"source": git, "gdrcopy_fast_rerun": True}},
        "differs": {"__gdrcopy_in": {"source": {"type": "tarball"}, "gdrcopy_fast_rerun": True},
                    "gdrcopy_preflight_info": {"converged": {"differences": ["files./etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf changed"]},
                                               "live": True, "smoke": {"passed": False, "msg": "failed: no /dev/gdrdrv"}}},
        # An image is never smoke-checked: that is no reason.
        "image": {"__gdrcopy_in": {"source": {"type": "tarball"}, "gdrcopy_fast_rerun": True},
                  "gdrcopy_preflight_info": {"converged": {"differences": ["kernels.6.12.0-1-amd64 is new"]},
                                             "live": False, "smoke": {"passed": False, "msg": "not a running host"}}},
        "no_check": {"__gdrcopy_in": {"source": {"type": "tarball"}, "gdrcopy_fast_rerun": False},
                     "gdrcopy_preflight_info": {"skipped": True}},
    }
    playbook = tmp_path / "why.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False,
                                     "vars_files": [str(REPO / "roles" / "gdrcopy" / "vars" / "main.yml")],
                                     "tasks": [{"name": name, "ansible.builtin.debug": {"var": "__gdrcopy_why_every_step"},
                                                "vars": case} for name, case in cases.items()]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_COLLECTIONS_PATH=str(TEST_COLLECTIONS))
    r = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook),
                        "-e", json.dumps({"ansible_python_interpreter": sys.executable})],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    said = dict((t["task"]["name"], t["hosts"]["localhost"]["__gdrcopy_why_every_step"])
                for t in json.loads(r.stdout)["plays"][0]["tasks"])
    assert said["unpinned"] == ("not converged: the git source https://example.org/gdrcopy.git main is not pinned "
                                "(gdrcopy_allow_unpinned), so it may have moved since the last run; every step runs.")
    assert said["differs"] == ("not converged: files./etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf changed; the smoke check failed: "
                               "no /dev/gdrdrv")
    assert said["image"] == "not converged: kernels.6.12.0-1-amd64 is new"
    assert said["no_check"].startswith("every step runs (no converged check in this run")
