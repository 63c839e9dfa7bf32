"""The converged fast path (module_utils/gdrcopy_converged.py, gdrcopy_info's converged_inputs): a host is converged
only when a verified run recorded these inputs and exactly this state; every kind of change is named; what is
volatile (reference counts, GPU memory, the running kernel among those built for) is not a change."""

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_converged as C
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import PATHS
from conftest import REPO
from test_gdrcopy_info import KERNEL, params, working_module, working_root, write  # noqa: F401 (fixture)

INPUTS = {"code": "c0de", "mode": "host", "gdrcopy": "g1", "mok_signing": "m1", "nvidia_peermem": "n1"}
OTHER = "6.1.0-47-amd64"


def gather(root, m=None, inputs=INPUTS, **extra):
    m = m or working_module(root)
    return gdrcopy_facts.gather(m, params(root, converged_inputs=inputs, prefix="/opt/gdrcopy", **extra),
                               gdrcopy_facts.Host(m, root, live=True))


def record(root, inputs=INPUTS):
    """What playbooks/verify.yml writes after a verified run."""
    state = gather(root, inputs=inputs)["converged"]["state"]
    write(root, C.RECORD_PATH, json.dumps({"version": state["version"], "inputs": inputs, "state": state}))


@pytest.fixture
def converged_root(working_root):  # noqa: F811 (the fixture imported above)
    write(working_root, "/etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf", "options gdrdrv use_persistent_mapping=1\n")
    write(working_root, "/etc/systemd/system/gdrcopy-ansible.service", "[Unit]\n")
    os.makedirs(os.path.join(working_root, "etc/systemd/system/multi-user.target.wants"))
    os.symlink("/etc/systemd/system/gdrcopy-ansible.service",
               os.path.join(working_root, "etc/systemd/system/multi-user.target.wants/gdrcopy-ansible.service"))
    write(working_root, "/usr/local/libexec/gdrcopy-ansible/gdrdrv-mknod", "#!/bin/sh\n")
    write(working_root, "/var/lib/gdrcopy-ansible/mok/mok.der", b"0\x82")
    # the library install as gdrcopy-install leaves it: its stamp and the manifest of its files
    write(working_root, "/opt/gdrcopy/2.6/lib/libgdrapi.so.2.6", b"\x7fELF libgdrapi")
    write(working_root, "/opt/gdrcopy/2.6/include/gdrapi.h", "/* gdrapi */\n")
    write(working_root, "/opt/gdrcopy/2.6/.gdrcopy-manifest", "".join(
        "%s  %s\n" % (hashlib.sha256(body).hexdigest(), rel) for rel, body in
        (("include/gdrapi.h", b"/* gdrapi */\n"), ("lib/libgdrapi.so.2.6", b"\x7fELF libgdrapi"))))
    write(working_root, "/opt/gdrcopy/2.6/.gdrcopy-install.json", json.dumps({"component": "lib", "source": "2.6-abc"}))
    record(working_root)
    return working_root


def test_without_a_record_a_host_is_not_converged(working_root):  # noqa: F811
    c = gather(working_root)["converged"]
    assert (c["ok"], c["differences"], c["record"]) == (
        False, ["no record of a verified run (/var/lib/gdrcopy-ansible/converged.json)"], C.RECORD_PATH)


def test_the_host_a_verified_run_recorded_is_converged(converged_root):
    c = gather(converged_root)["converged"]
    assert (c["ok"], c["differences"]) == (True, [])
    files = c["state"]["files"]
    assert files["/etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf"].startswith("sha256:") and " mode:0644 " in files["/etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf"]
    assert files["/etc/systemd/system/multi-user.target.wants/gdrcopy-ansible.service"] == "link:/etc/systemd/system/gdrcopy-ansible.service"
    assert files["/opt/gdrcopy/current"] == "link:2.6"
    assert [m["content"][:7] for m in c["state"]["kernels"][0]["gdrdrv"]] == ["sha256:"]
    assert c["state"]["running"]["gdrdrv_current"] is True and c["state"]["running"]["device"]["ok"] is True


def test_volatile_values_are_not_changes(converged_root):
    write(converged_root, "/sys/module/gdrdrv/refcnt", "3\n")  # a process holds /dev/gdrdrv
    m = working_module(converged_root)
    smi = [k for k in m.outputs if "--format=csv" in k][0]
    rc, text, err = m.outputs[smi]
    m.outputs[smi] = (rc, text.replace(" 0 MiB, 5", " 4000 MiB, 5"), err)  # GPU memory in use
    assert gather(converged_root, m)["converged"]["differences"] == []


def test_a_reboot_into_another_kernel_that_was_built_for_stays_converged(converged_root):
    """Two kernels with gdrdrv; recorded while one runs, checked while the other runs (its own srcversion)."""
    write(converged_root, f"/boot/vmlinuz-{OTHER}")
    os.makedirs(os.path.join(converged_root, f"lib/modules/{OTHER}/kernel"))
    write(converged_root, f"/lib/modules/{OTHER}/updates/gdrcopy/gdrdrv.ko", b"\x7fELF other~Module signature appended~\n")
    record(converged_root)
    write(converged_root, "/proc/sys/kernel/osrelease", OTHER + "\n")
    write(converged_root, "/sys/module/gdrdrv/srcversion", "0THER5RCVER510N\n")
    m = working_module(converged_root)
    m.outputs[("/usr/sbin/modinfo", "-F", "srcversion", "gdrdrv")] = (0, "0THER5RCVER510N\n", "")
    r = gather(converged_root, m)
    assert r["kernel"]["running"] == OTHER
    assert r["converged"]["differences"] == []


def change_kernel(root):
    write(root, "/boot/vmlinuz-6.1.0-52-amd64")
    os.makedirs(os.path.join(root, "lib/modules/6.1.0-52-amd64/kernel"))


def change_file(root):
    write(root, "/etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf", "options gdrdrv use_persistent_mapping=0\n")


def add_file(root):
    write(root, "/etc/modprobe.d/gdrcopy-ansible-nv_peer_mem.conf", "blacklist nv_peer_mem\n")


def remove_unit_link(root):
    os.unlink(os.path.join(root, "etc/systemd/system/multi-user.target.wants/gdrcopy-ansible.service"))


def unload_gdrdrv(root):
    shutil.rmtree(os.path.join(root, "sys/module/gdrdrv"))


def rebuild_gdrdrv(root):
    write(root, f"/lib/modules/{KERNEL}/updates/gdrcopy/gdrdrv.ko", b"\x7fELF rebuilt~Module signature appended~\n")


def change_device_mode(root):
    os.chmod(os.path.join(root, "dev/gdrdrv"), 0o666)


def replace_library_by_hand(root):
    write(root, "/opt/gdrcopy/2.6/lib/libgdrapi.so.2.6", b"\x7fELF another libgdrapi")


def remove_header(root):
    os.unlink(os.path.join(root, "opt/gdrcopy/2.6/include/gdrapi.h"))


def install_cuda(root):
    write(root, "/usr/local/cuda/include/cuda.h", "/* cuda */\n")


def change_build_stamp(root):
    write(root, "/var/lib/gdrcopy-ansible/build/2.6-abc/lib/.gdrcopy-stamp.json", '{"release": "2.6"}')


@pytest.mark.parametrize("change, expected", [
    (change_kernel, r"^kernels\.6\.1\.0-52-amd64 is new$"),
    (change_file, r"^files\./etc/modprobe\.d/gdrcopy-ansible-gdrdrv\.conf changed \(\"sha256:"),
    (add_file, r"^files\./etc/modprobe\.d/gdrcopy-ansible-nv_peer_mem\.conf is new$"),
    (remove_unit_link, r"^files\./etc/systemd/system/multi-user\.target\.wants/gdrcopy-ansible\.service is gone$"),
    (unload_gdrdrv, r"^running\.gdrdrv_current changed \(true -> false\)$"),
    (rebuild_gdrdrv, r"^kernels\.6\.1\.0-50-amd64\.gdrdrv changed"),
    (change_device_mode, r"^running\.device\.mode changed \(\"06[46]0\" -> \"0666\"\)$"),
    (change_build_stamp, r"^builds\..*/build/2\.6-abc/lib is new$"),
    # issue 14: these left a host "converged" before
    (replace_library_by_hand, r"^installs\./opt/gdrcopy/2\.6\.component is gone"),
    (remove_header, r"^installs\./opt/gdrcopy/2\.6\.component is gone"),
    (install_cuda, r"^cuda\.present changed \(false -> true\)$"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_every_kind_of_change_is_named(converged_root, change, expected):
    change(converged_root)
    c = gather(converged_root)["converged"]
    assert c["ok"] is False
    assert re.search(expected, c["differences"][0]), c["differences"]


def test_changed_inputs_are_named_by_part(converged_root):
    c = gather(converged_root, inputs=dict(INPUTS, code="new", gdrcopy="g2"))["converged"]
    assert c["differences"] == ["the run's inputs changed: code", "the run's inputs changed: gdrcopy"]


def test_a_record_of_another_version_or_unreadable_is_no_record(converged_root):
    write(converged_root, C.RECORD_PATH, json.dumps({"version": 0, "inputs": INPUTS, "state": {}}))
    assert gather(converged_root)["converged"]["differences"] == [
        "the record was written by another version of gdrcopy-ansible"]
    write(converged_root, C.RECORD_PATH, "{truncated")
    assert gather(converged_root)["converged"]["differences"][0].startswith("no record of a verified run")


def test_differences_are_few_and_the_first_says_what_changed():
    old = {"version": 1, "inputs": {"a": 1}, "state": {"kernels": [], "files": {"/f%d" % i: "x" for i in range(9)}}}
    new = {"kernels": [], "files": {}}
    diff = C.differences(old, new, {"a": 1})
    assert diff == ["files./f%d is gone" % i for i in range(5)]


# --- a kernel installed since the verified run (gdrcopy_build's replay) ------------------------------------------

NEW = "6.1.0-52-amd64"
SHA = "ab" * 32


def add_kernel(root, headers=True, built=False):
    write(root, f"/boot/vmlinuz-{NEW}")
    os.makedirs(os.path.join(root, f"lib/modules/{NEW}/kernel"))
    if headers:
        write(root, f"/lib/modules/{NEW}/build/Makefile")
    if built:  # the kernel hook built and installed gdrdrv for it
        write(root, f"/var/lib/gdrcopy-ansible/build/2.6-abc/driver/{NEW}/.gdrcopy-stamp.json", '{"kernel": "%s"}' % NEW)
        write(root, f"/lib/modules/{NEW}/updates/gdrcopy/gdrdrv.ko", b"\x7fELF new~Module signature appended~\n")


@pytest.fixture
def replayable_root(converged_root):
    """A converged host whose last install recorded its driver options, with the tarball and helper they name."""
    write(converged_root, "/var/lib/gdrcopy-ansible/build/src/gdrcopy-2.6-abababababab.tar.gz", b"tarball")
    write(converged_root, "/usr/local/libexec/gdrcopy-ansible/gdrcopy-build", "#!/bin/sh\n")
    write(converged_root, PATHS["driver_record"], json.dumps({
        "build_helper": "/usr/local/libexec/gdrcopy-ansible/gdrcopy-build",
        "tarball": "/var/lib/gdrcopy-ansible/build/src/gdrcopy-2.6-abababababab.tar.gz",
        "build_log": "/var/lib/gdrcopy-ansible/build/builds.log",
        "driver_dir": "/var/lib/gdrcopy-ansible/build/2.6-abababababab/driver",
        "stamp_base": {"component": "driver", "sha256": SHA}, "nvidia_src_dir": "", "flavor": "proprietary",
        "module_subdir": "updates/gdrcopy", "sign_command": [], "timeout": 600}))
    record(converged_root)
    return converged_root


def test_a_kernel_installed_since_is_all_a_replay_has_to_do(replayable_root):
    add_kernel(replayable_root)
    c = gather(replayable_root)["converged"]
    assert (c["ok"], c["differences"], c["new_kernels"]) == (False, ["kernels.%s is new" % NEW], [NEW])


def test_a_kernel_the_hook_built_for_is_replayed_too(replayable_root):
    add_kernel(replayable_root, built=True)
    assert gather(replayable_root)["converged"]["new_kernels"] == [NEW]


@pytest.mark.parametrize("what", ["no headers", "another change", "other inputs", "not a target", "no record",
                                  "bad record", "no tarball"])
def test_anything_more_than_new_kernels_is_a_full_run(replayable_root, what):
    driver_record = os.path.join(replayable_root, PATHS["driver_record"].lstrip("/"))
    if what in ("no record", "bad record"):  # as the verified run left it (the record is part of the state)
        os.unlink(driver_record) if what == "no record" else write(replayable_root, PATHS["driver_record"], "{}")
        record(replayable_root)
    add_kernel(replayable_root, headers=what != "no headers")
    extra, inputs = {}, INPUTS
    if what == "another change":
        change_file(replayable_root)
    elif what == "other inputs":
        inputs = dict(INPUTS, gdrcopy="g2")
    elif what == "not a target":
        extra["kernels"] = [KERNEL]
    elif what == "no tarball":
        os.unlink(os.path.join(replayable_root, "var/lib/gdrcopy-ansible/build/src/gdrcopy-2.6-abababababab.tar.gz"))
    c = gather(replayable_root, inputs=inputs, **extra)["converged"]
    assert c["ok"] is False and c["new_kernels"] == []
    assert ("the run's inputs changed: gdrcopy" if what == "other inputs" else "kernels.%s is new" % NEW) \
        in c["differences"]


def test_new_kernels_in_pure_terms():
    old = {"version": C.RECORD_VERSION, "inputs": {"a": 1}, "state": {
        "kernels": [{"release": "k1", "headers": True, "gdrdrv": ["m1"]}], "builds": {"/b/driver/k1": {}}, "x": 1}}
    state = dict(old["state"], kernels=old["state"]["kernels"] + [{"release": "k2", "headers": True, "gdrdrv": []}])
    assert C.new_kernels(old, state, {"a": 1}) == ["k2"]
    assert C.new_kernels(old, dict(state, builds={"/b/driver/k1": {}, "/b/driver/k2": {}}), {"a": 1}) == ["k2"]
    assert C.new_kernels(old, dict(state, builds={"/b/driver/k1": {"changed": 1}}), {"a": 1}) == []
    assert C.new_kernels(old, dict(state, x=2), {"a": 1}) == []
    assert C.new_kernels(old, old["state"], {"a": 1}) == []  # nothing new: converged, not a replay
    assert C.new_kernels(old, state, {"a": 2}) == []
    assert C.new_kernels(None, state, {"a": 1}) == []
    assert C.new_kernels(dict(old, version=0), state, {"a": 1}) == []


def test_the_smoke_check_runs_the_installed_helper(working_root, monkeypatch):  # noqa: F811
    """The check's result as the host gives it (the forked check itself: test_smoke.py)."""
    monkeypatch.setattr(gdrcopy_facts.Host, "smoke",
                        lambda self, expect: self.run([gdrcopy_facts.SMOKE_PROGRAM, "--expect", expect]))
    m = working_module(working_root)
    m.outputs[(gdrcopy_facts.SMOKE_PROGRAM, "--expect", "2.6")] = (0, json.dumps(
        {"passed": True, "runtime_version": "2.6", "driver_version": "2.6", "expected": "2.6",
         "msg": "gdr_open ok; runtime 2.6, driver 2.6"}), "")
    r = gather(working_root, m, smoke="2.6")
    assert r["smoke"] == {"ran": False, "method": "none", "passed": False, "expected": "2.6",
                          "msg": "/usr/local/libexec/gdrcopy-ansible/gdrcopy-smoke is not installed: run the gdrcopy role"}
    write(working_root, gdrcopy_facts.SMOKE_PROGRAM, "#!/usr/bin/python3\n")
    r = gather(working_root, m, smoke="2.6")
    assert r["smoke"] == {"ran": True, "method": "library", "passed": True, "runtime_version": "2.6",
                          "driver_version": "2.6", "expected": "2.6", "msg": "gdr_open ok; runtime 2.6, driver 2.6"}
    m.outputs[(gdrcopy_facts.SMOKE_PROGRAM, "--expect", "2.6")] = (1, "", "Traceback ...")
    assert gather(working_root, m, smoke="2.6")["smoke"]["msg"].endswith("printed no result (exit code 1): Traceback ...")


# --- every file the roles write is watched ---------------------------------------------------------------------

# Destinations the fingerprint covers another way, or that a converged host does not need, with the reason.
NOT_WATCHED = {
    "{{ __gdrcopy_node_tarball }}": "the source tarball on the node: only a build reads it",
    "{{ gdrcopy_build_root }}/artifacts": "fleet build artifacts: a build reads them",
    "{{ gdrcopy_build_root }}/artifacts/": "fleet build artifacts: a build reads them",
    "{{ __gdrcopy_current_link }}": "<prefix>/current: in the fingerprint (gdrcopy_info adds it)",
    "/lib/modules/{{ item }}/{{ __gdrcopy_module_subdir }}/": "gdrdrv per kernel: in the fingerprint's kernels",
    "{{ mok_signing_key_dir }}": "the key dir itself (its files are watched)",
}
CONTROLLER_SIDE = ("__gdrcopy_cache", "__gdrcopy_artifact_root", "item.stat.path", "__gdrcopy_cache_tarball")


def destinations():
    module = "gpufleet.gdrcopy.gdrcopy_files"
    role_vars = yaml.safe_load((REPO / "roles" / "gdrcopy" / "vars" / "main.yml").read_text())
    entries = [f for step in role_vars["__gdrcopy_files"].values() if isinstance(step, list) for f in step]
    mok_vars = yaml.safe_load((REPO / "roles" / "mok_signing" / "vars" / "main.yml").read_text())
    entries += (role_vars["__gdrcopy_kernel_hook_files"] + role_vars["__gdrcopy_persist_files"]
                + role_vars["__gdrcopy_retired_files"] + mok_vars["__mok_signing_files"])
    for entry in entries:  # gdrcopy_files writes these
        yield "vars/main.yml", module, entry["dest"], {"name": entry["dest"], module: entry}
    for path in sorted((REPO / "roles").glob("*/tasks/*.yml")):
        for task in iter_tasks(yaml.safe_load(path.read_text()) or []):
            for module, args in task.items():
                if module.startswith("ansible.builtin.") and isinstance(args, dict):
                    for key in ("dest", "path"):
                        if isinstance(args.get(key), str) and not task.get("delegate_to") and "register" not in key:
                            yield path.name, module, args[key], task


def iter_tasks(tasks):
    for t in tasks:
        yield t
        for key in ("block", "rescue", "always"):
            yield from iter_tasks(t.get(key, []))


def resolve(dest):
    """A destination with the roles' fixed internal paths filled in."""
    for var, value in (("__gdrcopy_libexec", "/usr/local/libexec/gdrcopy-ansible"),
                       ("__mok_signing_libexec", "/usr/local/libexec/gdrcopy-ansible"),
                       ("mok_signing_key_dir", "/var/lib/gdrcopy-ansible/mok"),
                       ("__gdrcopy_driver_record", "/etc/gdrcopy-ansible/driver.json"),
                       ("__mok_signing_record", "/var/lib/gdrcopy-ansible/mok-signer.der"),
                       ("item }}/{{ __gdrcopy_kernel_hook_name", "/etc/kernel/postinst.d/zz-gdrcopy-ansible")):
        dest = dest.replace("{{ %s }}" % var, value)
    return re.sub(r"\{\{ __gdrcopy_paths\.(\w+) \}\}", lambda m: PATHS[m.group(1)], dest)


def test_every_file_the_roles_write_on_a_host_is_watched():
    import fnmatch
    unwatched = []
    for name, module, dest, task in destinations():
        if dest in NOT_WATCHED or any(v in dest for v in CONTROLLER_SIDE):
            continue
        if module in ("ansible.builtin.stat", "ansible.builtin.find", "ansible.builtin.slurp"):
            continue  # read, never written
        if task[module].get("state") in ("directory", "absent"):
            continue  # a directory is no content; what is removed is what the globs watch for
        path = resolve(dest).rstrip("/")
        if module == "ansible.builtin.copy" and resolve(dest).endswith("/"):
            path += "/x"  # a copy into a directory: its files
        if not any(fnmatch.fnmatch(path, g) for g in C.MANAGED_PATHS):
            unwatched.append("%s: %s %s" % (name, task.get("name"), dest))
    assert unwatched == [], "\n".join(unwatched)


def test_the_record_path_is_what_verify_writes():
    """One place names the record: gdrcopy_verify writes C.RECORD_PATH, the comparison reads it."""
    verify = (REPO / "plugins" / "modules" / "gdrcopy_verify.py").read_text()
    assert "h.path(C.RECORD_PATH)" in verify and C.RECORD_PATH == "/var/lib/gdrcopy-ansible/converged.json"
    assert "converged.json" not in (REPO / "playbooks" / "verify.yml").read_text()
    assert Path(REPO / "plugins" / "module_utils" / "gdrcopy_converged.py").read_text().count("RECORD_PATH =") == 1


def test_a_converged_host_returns_the_test_results_its_record_keeps(converged_root):
    assert "verified_tests" not in gather(converged_root)["converged"]  # a record without them (an older one)
    state = gather(converged_root)["converged"]["state"]
    tests = {"ran": False, "reason": "no NVIDIA GPU on this host: only the GPU-less smoke check applies"}
    write(converged_root, C.RECORD_PATH, json.dumps({"version": state["version"], "inputs": INPUTS, "state": state,
                                                      "verify": tests}))
    assert gather(converged_root)["converged"]["verified_tests"] == tests
    other = gather(converged_root, inputs=dict(INPUTS, code="changed"))["converged"]
    assert not other["ok"] and "verified_tests" not in other  # not converged: nothing recorded applies


def test_a_hand_replaced_library_is_not_current_so_the_role_installs_it_again(converged_root):
    """Before: the role compared install stamps only, so a full run left a replaced libgdrapi.so as it was."""
    assert gather(converged_root)["installs"]["/opt/gdrcopy/2.6"] == {"component": "lib", "source": "2.6-abc"}
    replace_library_by_hand(converged_root)
    assert gather(converged_root)["installs"]["/opt/gdrcopy/2.6"] == {
        "damaged": ["/opt/gdrcopy/2.6/lib/libgdrapi.so.2.6"]}
    os.unlink(os.path.join(converged_root, "opt/gdrcopy/2.6/.gdrcopy-manifest"))
    assert gather(converged_root)["installs"]["/opt/gdrcopy/2.6"] == {"damaged": ["/opt/gdrcopy/2.6/.gdrcopy-manifest"]}


@pytest.mark.parametrize("content", ["[]", "null", '"a string"', "42"])
def test_a_record_that_is_json_but_no_object_is_no_record(converged_root, content):
    """Before: such a record crashed gdrcopy_info (and preflight with it)."""
    write(converged_root, C.RECORD_PATH, content)
    assert gather(converged_root)["converged"]["differences"][0].startswith("no record of a verified run")


class RealOpenssl:
    """The FakeModule of the working root, with openssl run for real (the private key's public half)."""

    def __init__(self, m):
        self.m = m
        self.m.tools["openssl"] = "/usr/bin/openssl"

    def __getattr__(self, name):
        return getattr(self.m, name)

    def run_command(self, argv, environ_update=None):
        if argv[0] == "/usr/bin/openssl":
            r = subprocess.run(argv, capture_output=True, text=True)
            return r.returncode, r.stdout, r.stderr
        return self.m.run_command(argv, environ_update)


def genkey(path):
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", str(path)],
                   check=True, capture_output=True)


def test_a_private_key_is_digested_by_its_public_half_and_a_non_default_key_dir_is_watched(working_root):  # noqa: F811
    """Before: the record kept the sha256 of mok.key (a digest of a secret, on every node), and the key files
    under a non-default mok_signing_key_dir were not watched at all."""
    shutil.which("openssl") or pytest.skip("openssl is not installed")
    key_dir = os.path.join(working_root, "srv/keys")
    os.makedirs(key_dir)
    genkey(os.path.join(key_dir, "mok.key"))
    key_sha = hashlib.sha256(Path(key_dir, "mok.key").read_bytes()).hexdigest()
    watch = ["/srv/keys/*"]
    m = RealOpenssl(working_module(working_root))
    state = gather(working_root, m, watch=watch)["converged"]["state"]
    digest = state["files"]["/srv/keys/mok.key"]
    assert digest.startswith("pubkey-sha256:") and key_sha not in json.dumps(state)
    write(working_root, C.RECORD_PATH, json.dumps({"version": state["version"], "inputs": INPUTS, "state": state}))
    assert gather(working_root, RealOpenssl(working_module(working_root)), watch=watch)["converged"]["ok"] is True
    genkey(os.path.join(key_dir, "mok.key"))  # the key replaced by another
    c = gather(working_root, RealOpenssl(working_module(working_root)), watch=watch)["converged"]
    assert c["ok"] is False and c["differences"][0].startswith("files./srv/keys/mok.key changed"), c["differences"]
    assert "/srv/keys/mok.key" not in gather(working_root, RealOpenssl(working_module(working_root)))[
        "converged"]["state"]["files"], "only watched when asked"


@pytest.mark.parametrize("pattern", C.MANAGED_PATHS)
def test_every_managed_path_changed_makes_the_host_not_converged(working_root, pattern):  # noqa: F811
    """For each glob of the files the roles write: a file there, recorded, then changed, is a difference."""
    path = pattern.replace("/*.wants/", "/multi-user.target.wants/").replace("/.*", "/.hidden").replace("*", "x")
    write(working_root, path, "one\n")
    record(working_root)
    assert gather(working_root)["converged"]["ok"] is True
    write(working_root, path, "two\n")
    c = gather(working_root)["converged"]
    assert c["ok"] is False and any(path in d for d in c["differences"]), c["differences"]


def test_the_files_that_gdrcopy_files_writes_are_checked_too():
    dests = [resolve(d) for dummy, m, d, dummy in destinations() if m == "gpufleet.gdrcopy.gdrcopy_files"]
    assert {"/etc/systemd/system/gdrcopy-ansible.service", "/etc/kernel/postinst.d/zz-gdrcopy-ansible",
            "/usr/local/libexec/gdrcopy-ansible/gdrcopy_pipeline.py", "/etc/ld.so.conf.d/gdrcopy.conf",
            "/usr/local/libexec/gdrcopy-ansible/mok-keygen"} <= set(dests)


def test_the_units_wants_link_is_where_its_install_section_wants_it():
    """gdrcopy_files enables gdrcopy-ansible.service by the link systemctl enable makes: the link's directory must be the
    unit's WantedBy target, and the unit must have nothing else in [Install] that enable would act on."""
    unit = (REPO / "roles" / "gdrcopy" / "templates" / "gdrcopy.service.j2").read_text()
    install = unit.split("[Install]", 1)[1]
    keys = dict(line.split("=", 1) for line in install.strip().splitlines() if "=" in line)
    role_vars = yaml.safe_load((REPO / "roles" / "gdrcopy" / "vars" / "main.yml").read_text())
    links = [{k: resolve(v) for k, v in f.items()} for f in role_vars["__gdrcopy_persist_files"]
             if f.get("state") == "link"]
    assert list(keys) == ["WantedBy"]
    assert links == [{"dest": "/etc/systemd/system/%s.wants/gdrcopy-ansible.service" % keys["WantedBy"].strip(),
                      "state": "link", "src": "/etc/systemd/system/gdrcopy-ansible.service"}]
