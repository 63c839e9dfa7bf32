"""Fleet builds: the plan (module_utils/gdrcopy_fleet), the controller's cache, and both action plugins
(gdrcopy_fleet plans once, gdrcopy_build shares and takes) in a real two-host play."""

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_fleet as F

from test_build_module import FILES, REPO, make_tarball

SHA = "5" * 64
LIB = {"component": "lib", "sha256": SHA, "tests": False}
BASE = {"component": "driver", "sha256": SHA, "flavor": "open"}


def want(root, kernels, builds=None, lib=True):
    return {"lib": {"dir": root + "/lib", "stamp": LIB} if lib else None, "driver_dir": root + "/driver",
            "stamp_base": BASE, "kernels": kernels, "builds": builds or {}}


def test_a_build_is_named_by_its_inputs_and_equal_inputs_get_equal_names():
    a = F.build_name(dict(BASE, kernel="6.1.0-41-amd64"))
    assert re.match(r"^driver-6\.1\.0-41-amd64-[0-9a-f]{16}$", a) and F.NAME_RE.match(a)
    assert F.build_name(dict(BASE, kernel="6.1.0-41-amd64")) == a
    assert F.build_name(dict(BASE, kernel="6.1.0-41-amd64", flavor="proprietary")) != a
    assert F.build_name(LIB).startswith("lib-")


def test_a_host_lacks_only_the_builds_whose_stamp_on_disk_differs():
    built = {"/b/lib": LIB, "/b/driver/k1": dict(BASE, kernel="k1"), "/b/driver/k2": dict(BASE, kernel="old")}
    rows = F.lacking(want("/b", ["k1", "k2"], built))
    assert [r["dir"] for r in rows] == ["/b/driver/k2"] and rows[0]["stamp"] == dict(BASE, kernel="k2")
    assert [r["dir"] for r in F.lacking(want("/b", ["k1"], lib=False))] == ["/b/driver/k1"]


def test_one_host_compiles_each_build_the_compiles_spread_over_hosts_and_the_others_take_them():
    wants = {h: F.lacking(want("/b", [k])) for h, k in (("a", "k1"), ("b", "k1"), ("c", "k2"), ("d", "k2"))}
    out = F.plan(["a", "b", "c", "d"], wants, set())
    names = {k: F.build_name(dict(BASE, kernel=k)) for k in ("k1", "k2")}
    lib = F.build_name(LIB)
    # a compiles the library (first in play order); k1 goes to b, which has none yet, not to a
    assert out["builders"] == {lib: "a", names["k1"]: "b", names["k2"]: "c"}
    assert [e["name"] for e in out["hosts"]["a"]["share"]] == [lib]
    assert [e["name"] for e in out["hosts"]["a"]["take"]] == [names["k1"]]
    assert [e["name"] for e in out["hosts"]["b"]["share"]] == [names["k1"]]
    assert [e["name"] for e in out["hosts"]["b"]["take"]] == [lib]
    assert [e["name"] for e in out["hosts"]["c"]["share"]] == [names["k2"]]
    assert [e["name"] for e in out["hosts"]["c"]["take"]] == [lib]
    assert [e["name"] for e in out["hosts"]["d"]["take"]] == [lib, names["k2"]] and out["hosts"]["d"]["share"] == []
    assert all(out["hosts"][h]["own"] == [] for h in "abcd")


def test_a_host_alone_with_its_builds_compiles_them_all():
    wants = {"a": F.lacking(want("/b", ["k1", "k2"])), "b": F.lacking(want("/b", [], lib=True))}
    out = F.plan(["a", "b"], wants, set())
    assert set(out["builders"].values()) == {"a"} and len(out["hosts"]["a"]["share"]) == 3
    assert [e["name"] for e in out["hosts"]["b"]["take"]] == [F.build_name(LIB)]


def test_builds_the_cache_holds_are_taken_by_everyone():
    wants = {h: F.lacking(want("/b", ["k1"])) for h in "ab"}
    ready = set(r["name"] for r in wants["a"])
    out = F.plan(["a", "b"], wants, ready)
    assert out["builders"] == {} and all(len(out["hosts"][h]["take"]) == 2 for h in "ab")


def test_only_permitted_builders_build_for_others_and_a_build_none_needs_is_compiled_by_each():
    wants = {"a": F.lacking(want("/b", ["k1"])), "b": F.lacking(want("/b", ["k1"])),
             "c": F.lacking(want("/b", ["k2"], lib=False))}
    out = F.plan(["a", "b", "c"], wants, set(), builders=["b"])
    k2 = F.build_name(dict(BASE, kernel="k2"))
    assert set(out["builders"].values()) == {"b"} and k2 not in out["builders"]
    assert len(out["hosts"]["a"]["take"]) == 2 and out["hosts"]["a"]["share"] == []
    assert out["hosts"]["c"]["own"] == [k2] and out["hosts"]["c"]["take"] == []
    assert F.plan(["a"], {"a": wants["a"]}, set(), builders=[])["hosts"]["a"]["own"] == [r["name"] for r in wants["a"]]


def test_the_cache_keeps_an_entry_with_its_record_and_drops_a_corrupt_one(tmp_path):
    cache = str(tmp_path / "cache")
    name = F.build_name(LIB)
    digest = F.store(cache, name, b"tarball bytes")
    assert digest == hashlib.sha256(b"tarball bytes").hexdigest()
    assert (tmp_path / "cache" / (name + ".tar.gz.sha256")).read_text() == f"{digest}  {name}.tar.gz\n"
    assert F.cached(cache, name) == digest and not list((tmp_path / "cache").glob("*.tmp"))
    wants = {"a": want("/b", [])}
    out = F.plan_play(["a"], wants, cache)
    assert out["ready"] == [name] and out["deleted"] == [] and out["hosts"]["a"]["take"][0]["name"] == name
    (tmp_path / "cache" / (name + ".tar.gz")).write_bytes(b"tarball")  # truncated
    out = F.plan_play(["a"], wants, cache, check=True)
    assert out["deleted"] == [name] and (tmp_path / "cache" / (name + ".tar.gz")).exists()
    out = F.plan_play(["a"], wants, cache)
    assert out["deleted"] == [name] and out["changed"] and out["builders"] == {name: "a"}
    assert list((tmp_path / "cache").iterdir()) == []
    with pytest.raises(F.FleetError):
        F.store(cache, "../x", b"")


@pytest.mark.parametrize("text, digest", [("a" * 64 + "  x.tar.gz\n", "a" * 64), ("", ""), ("zz  x", "")])
def test_a_record_is_read_only_when_it_holds_a_sha256(text, digest):
    assert F.recorded_sha256(text) == digest


def test_bad_entries_are_named():
    with pytest.raises(F.FleetError, match=r"fleet.take\[1\]: an absolute build directory"):
        F.check_entries([{"dir": "/a", "name": "lib-" + "0" * 16}, {"dir": "a/../b", "name": "lib-" + "0" * 16}],
                        "fleet.take")


# --- both action plugins, in a play of two hosts on this machine ------------------------------------------------

def test_a_play_of_two_hosts_compiles_the_library_once_and_the_other_host_takes_it(tmp_path):
    tarball, sha = make_tarball(tmp_path)
    hosts = {}
    for h in ("first", "second"):
        top = tmp_path / h
        build = top / "build" / ("2.6-" + sha[:12])
        hosts[h] = {"root": str(top), "lib": {
            "dir": str(build / "lib"), "stamp": {"component": "lib", "sha256": sha, "tests": False},
            "targets": ["lib"], "install_dir": str(top / "opt" / "gdrcopy" / "2.6"),
            "install_targets": ["lib_install"], "install_helper": str(FILES / "gdrcopy-install")}, "driver": {
            "build_helper": str(FILES / "gdrcopy-build"), "tarball": str(tarball),
            "build_log": str(top / "build" / "builds.log"), "driver_dir": str(build / "driver"),
            "stamp_base": {"component": "driver", "sha256": sha}, "nvidia_src_dir": "", "flavor": "open",
            "sign_command": [], "timeout": 600}}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": dict(
        (h, {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "node": v})
        for h, v in hosts.items())}}))
    cache = str(tmp_path / "controller" / "2.6")
    fleet = {"cache": cache, "node_dir": "{{ node.root }}/artifacts"}
    playbook = tmp_path / "fleet.yml"
    playbook.write_text(json.dumps([{"hosts": "all", "gather_facts": False, "tasks": [
        {"ansible.builtin.set_fact": {"__gdrcopy_fleet_want": {
            "lib": "{{ node.lib }}", "driver_dir": "{{ node.driver.driver_dir }}",
            "stamp_base": "{{ node.driver.stamp_base }}", "kernels": [], "builds": {}}}},
        {"gpufleet.gdrcopy.gdrcopy_fleet": {"cache": cache}, "run_once": True, "register": "plan"},
        {"gpufleet.gdrcopy.gdrcopy_build": {
            "kernels": [], "lib": "{{ node.lib }}", "driver": "{{ node.driver }}", "install": False,
            "fleet": dict(fleet, share="{{ plan.hosts[inventory_hostname].share }}")},
         "when": "plan.hosts[inventory_hostname].share | length > 0"},
        {"gpufleet.gdrcopy.gdrcopy_build": {
            "kernels": [], "lib": "{{ node.lib }}", "driver": "{{ node.driver }}",
            "fleet": dict(fleet, take="{{ plan.hosts[inventory_hostname].take }}")}, "register": "out"},
        {"ansible.builtin.debug": {"msg": "RESULT {{ {'plan': plan.builders, 'lib': out.lib, "
                                          "'fleet': out.fleet} | to_json }}"}}]}]))
    env = dict(os.environ, ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    r = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(playbook)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    got = dict((h, json.loads(json.loads(m)[len("RESULT "):]))
               for h, m in re.findall(r'ok: \[(\w+)\] => \{\s+"msg": ("RESULT .*")\n', r.stdout))
    name = F.build_name(hosts["first"]["lib"]["stamp"])
    assert got["first"]["plan"] == {name: "first"}
    assert got["first"]["lib"] == {"build": "current", "install": "installed"}
    assert got["second"]["lib"] == {"build": "taken", "install": "installed"}
    assert got["second"]["fleet"] == {"shared": [], "taken": [name], "compiled_instead": []}
    assert F.cached(cache, name)
    logs = dict((h, (tmp_path / h / "build" / "builds.log").read_text()) for h in hosts)
    assert " built " in logs["first"] and " built " not in logs["second"] and " unpacked " in logs["second"]
    assert (tmp_path / "second" / "opt" / "gdrcopy" / "2.6" / "lib").is_dir()
