"""plugins/modules/gdrcopy_files: a role's files in one module start, each through a temporary file and a rename.

The decisions are pure (check_entry, action_for); the module itself runs for real on the controller through
ansible-playbook (check mode, diff mode, a write, a rerun, a removal) into a temporary directory."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_fileops as FO
from ansible_collections.gpufleet.gdrcopy.plugins.modules import gdrcopy_files as M

REPO = Path(__file__).resolve().parents[2]
UID = os.geteuid()


def entry(dest="/etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf", content="options gdrdrv dbg_enabled=0\n", mode="0644",
          state="present", after="none", src=None):
    return {"dest": dest, "content": content, "mode": mode, "state": state, "after": after, "src": src}


@pytest.mark.parametrize("bad, sentence", [
    (entry(dest="etc/x"), "files: 'etc/x' is not an absolute file path without '..'"),
    (entry(dest="/etc/../root/.ssh/authorized_keys"), "is not an absolute file path without '..'"),
    (entry(dest="/etc/modprobe.d/"), "is not an absolute file path without '..'"),
    (entry(mode="644; chmod 777 /"), "has mode '644; chmod 777 /', not an octal mode such as 0644"),
    (entry(mode="0999"), "not an octal mode"),
    (entry(content=None), "files: /etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf has no content"),
    (entry(state="directory"), "files: /etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf is a directory and has no content"),
    (entry(state="directory", content=None, mode="rwx"), "has mode 'rwx', not an octal mode"),
    (entry(state="link", content=None, src="gdrcopy.service"), "wants an absolute src and no content"),
    (entry(state="link", src="/etc/systemd/system/gdrcopy-ansible.service"), "wants an absolute src and no content"),
    (entry(src="/etc/x"), "is no link and has no src"),
])
def test_a_bad_entry_is_refused_with_its_path(bad, sentence):
    assert sentence in FO.check_entry(bad)


def test_an_absent_entry_needs_no_content_or_mode():
    assert FO.check_entry(entry(content=None, mode="x", state="absent")) is None


@pytest.mark.parametrize("have, action", [
    (None, "created"),
    ((b"options gdrdrv dbg_enabled=0\n", 0o644, UID), "ok"),
    ((b"options gdrdrv dbg_enabled=1\n", 0o644, UID), "updated"),
    ((None, None, None), "updated"),  # a link where the file goes is replaced by the file
    ((b"options gdrdrv dbg_enabled=0\n", 0o666, UID), "mode"),
    ((b"options gdrdrv dbg_enabled=0\n", 0o644, UID + 1), "mode"),
])
def test_what_happens_to_a_present_file(have, action):
    assert FO.action_for(entry(), have, UID) == action


def test_what_happens_to_an_absent_file():
    assert FO.action_for(entry(state="absent"), None, UID) == "ok"
    assert FO.action_for(entry(state="absent"), (b"x", 0o644, UID), UID) == "removed"
    assert FO.action_for(entry(state="absent"), (None, None, None), UID) == "removed"


class Module:
    def __init__(self):
        self.calls = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return "/usr/sbin/" + name

    def run_command(self, argv):
        self.calls.append(argv)
        return 0, "", ""


def test_the_commands_after_the_writes_run_once_each_and_never_in_a_chroot(monkeypatch):
    monkeypatch.setattr(os.path, "isdir", lambda p: p == "/run/systemd/system")
    monkeypatch.setattr(FO, "chrooted", lambda: False)
    m = Module()
    assert FO.after_commands(m, {"none", "ldconfig", "daemon-reload"}) == ["ldconfig", "daemon-reload"]
    assert m.calls == [["/usr/sbin/ldconfig"], ["/usr/sbin/systemctl", "daemon-reload"]]
    monkeypatch.setattr(FO, "chrooted", lambda: True)
    m = Module()
    assert FO.after_commands(m, {"daemon-reload"}) == [] and m.calls == []


# --- the module, run for real on the controller --------------------------------------------------------------

def run_module(tmp_path, files, *flags):
    playbook = tmp_path / "files.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"gpufleet.gdrcopy.gdrcopy_files": {"files": files}, "register": "out"},
        {"ansible.builtin.debug": {"var": "out"}}]}]))
    env = dict(os.environ, ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook),
           "-e", json.dumps({"ansible_python_interpreter": sys.executable, "ansible_become": False})] + list(flags)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(re.search(r'"out": (\{.*?\n    \})', r.stdout, re.S).group(1)), r.stdout


def test_the_module_writes_changes_only_what_differs_and_removes(tmp_path):
    root = tmp_path / "root"
    conf, helper, gone = root / "etc/modprobe.d/gdrdrv.conf", root / "libexec/gdrdrv-mknod", root / "etc/old"
    src = root / "var/build/src"
    files = [entry(dest=str(conf)), entry(dest=str(helper), content="#!/bin/sh\necho ok\n", mode="0755"),
             entry(dest=str(gone), state="absent", content=None),
             entry(dest=str(src), state="directory", content=None, mode="0755")]
    out, text = run_module(tmp_path, files, "--check", "--diff")
    assert out["changed"] and out["changed_files"] == [str(conf), str(helper), str(src)] and not root.exists()
    assert "+options gdrdrv dbg_enabled=0" in text  # the diff of a file check mode would create
    out, dummy = run_module(tmp_path, files)
    assert [f["action"] for f in out["files"]] == ["created", "created", "ok", "created"] and out["ran"] == []
    assert src.is_dir() and oct(src.stat().st_mode & 0o777) == "0o755"
    assert conf.read_text() == "options gdrdrv dbg_enabled=0\n" and oct(helper.stat().st_mode & 0o777) == "0o755"
    assert sorted(os.listdir(conf.parent)) == ["gdrdrv.conf"]  # no temporary file left beside it
    out, dummy = run_module(tmp_path, files)
    assert out["changed"] is False and [f["action"] for f in out["files"]] == ["ok", "ok", "ok", "ok"]
    helper.chmod(0o777)
    src.chmod(0o700)
    gone.write_text("left by an older release\n")
    files[0]["content"] = "options gdrdrv dbg_enabled=1\n"
    out, text = run_module(tmp_path, files, "--diff")
    assert [f["action"] for f in out["files"]] == ["updated", "mode", "removed", "mode"]
    assert oct(src.stat().st_mode & 0o777) == "0o755"
    assert "-options gdrdrv dbg_enabled=0" in text and "+options gdrdrv dbg_enabled=1" in text
    assert conf.read_text() == "options gdrdrv dbg_enabled=1\n" and oct(helper.stat().st_mode & 0o777) == "0o755"
    assert not gone.exists()


def test_a_directory_where_a_file_goes_stops_the_call(tmp_path):
    (tmp_path / "root/etc/gdrdrv.conf").mkdir(parents=True)
    playbook = tmp_path / "p.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"gpufleet.gdrcopy.gdrcopy_files": {"files": [entry(dest=str(tmp_path / "root/etc/gdrdrv.conf"))]}}]}]))
    env = dict(os.environ, ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    r = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                        str(playbook), "-e", json.dumps({"ansible_python_interpreter": sys.executable,
                                                          "ansible_become": False})],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "is there and is no regular file: move it away, then run again" in r.stdout


# --- run() in process, with the module's few calls given ----------------------------------------------------------

class Failed(Exception):
    pass


class Stub:
    def __init__(self, files, check_mode=False, diff=False, groups=()):
        self.params, self.check_mode, self._diff, self.calls = {"files": files, "groups": list(groups)}, check_mode, \
            diff, []

    @staticmethod
    def atomic_move(src, dest):
        os.rename(src, dest)

    def fail_json(self, msg, **kw):
        raise Failed(msg)

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return "/usr/sbin/" + name

    def run_command(self, argv):
        self.calls.append(argv)
        return 0, "", ""


def test_run_writes_then_runs_what_the_changed_files_ask_for(tmp_path, monkeypatch):
    monkeypatch.setattr(FO, "chrooted", lambda: False)
    monkeypatch.setattr(os.path, "isdir", lambda p, isdir=os.path.isdir: p == "/run/systemd/system" or isdir(p))
    unit, conf = tmp_path / "gdrcopy.service", tmp_path / "ld/gdrcopy.conf"
    files = [entry(dest=str(unit), content="[Unit]\n", after="daemon-reload"),
             entry(dest=str(conf), content="/opt/gdrcopy/current/lib\n", after="ldconfig")]
    m = Stub(files, diff=True)
    r = M.run(m)
    assert r["ran"] == ["ldconfig", "daemon-reload"] and m.calls == [["/usr/sbin/ldconfig"],
                                                                     ["/usr/sbin/systemctl", "daemon-reload"]]
    assert [d["after"] for d in r["diff"]] == ["[Unit]\n", "/opt/gdrcopy/current/lib\n"]
    m = Stub(files)
    assert M.run(m)["changed"] is False and m.calls == []  # nothing changed: nothing runs
    files[0]["content"] = "[Unit]\nDescription=x\n"
    m = Stub(files, check_mode=True)
    r = M.run(m)
    assert r["changed_files"] == [str(unit)] and r["ran"] == [] and m.calls == [] and unit.read_text() == "[Unit]\n"


def test_run_refuses_a_bad_entry_and_a_directory_before_writing(tmp_path):
    with pytest.raises(Failed, match="is not an absolute file path"):
        M.run(Stub([entry(dest="relative"), entry(dest=str(tmp_path / "x"))]))
    assert not (tmp_path / "x").exists()
    (tmp_path / "d").mkdir()
    with pytest.raises(Failed, match="is there and is no regular file"):
        M.run(Stub([entry(dest=str(tmp_path / "d"))]))


def test_a_link_where_a_file_goes_is_replaced_and_a_binary_file_says_so_in_the_diff(tmp_path):
    (tmp_path / "target").write_text("x\n")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    r = M.run(Stub([entry(dest=str(tmp_path / "link"), content="file\n"),
                    entry(dest=str(tmp_path / "bin"), content="text\n")], diff=True))
    assert not (tmp_path / "link").is_symlink() and (tmp_path / "link").read_text() == "file\n"
    assert (tmp_path / "target").read_text() == "x\n"
    assert r["diff"][1]["before"] == "(binary, 3 bytes)\n"


def test_a_unit_is_enabled_by_its_wants_link_made_through_a_rename(tmp_path):
    unit, wants = tmp_path / "gdrcopy.service", tmp_path / "multi-user.target.wants" / "gdrcopy.service"
    link = entry(dest=str(wants), state="link", content=None, src=str(unit))
    r = M.run(Stub([link], check_mode=True, diff=True))
    assert r["changed_files"] == [str(wants)] and not wants.parent.exists()
    assert r["diff"] == [{"before_header": str(wants), "after_header": str(wants), "before": "",
                          "after": "-> %s\n" % unit}]
    r = M.run(Stub([link]))
    assert r["files"] == [{"dest": str(wants), "action": "created"}] and os.readlink(wants) == str(unit)
    assert os.listdir(wants.parent) == ["gdrcopy.service"]  # no temporary link left
    assert M.run(Stub([link]))["changed"] is False
    wants.unlink()
    wants.symlink_to("/dev/null")  # pointed elsewhere by hand
    r = M.run(Stub([link], diff=True))
    assert r["files"][0]["action"] == "updated" and os.readlink(wants) == str(unit)
    assert r["diff"][0]["before"] == "-> /dev/null\n"
    r = M.run(Stub([dict(link, state="absent", src=None)]))
    assert r["files"][0]["action"] == "removed" and not os.path.lexists(wants)
    wants.write_text("a file\n")
    with pytest.raises(Failed, match="is there and is no symbolic link: move it away"):
        M.run(Stub([link]))


def test_a_missing_group_is_made_first_and_an_existing_one_left(monkeypatch):
    def getgrnam(name):  # this host has root's group and no other
        if name != "root":
            raise KeyError(name)
        return ("root", "x", 0, [])
    monkeypatch.setattr(FO.grp, "getgrnam", getgrnam)
    m = Stub([], groups=["root", "gdrdrv"], check_mode=True)
    r = M.run(m)
    assert r["groups"] == [{"name": "root", "action": "ok"}, {"name": "gdrdrv", "action": "created"}]
    assert r["changed"] is True and m.calls == []
    m = Stub([], groups=["root", "gdrdrv"])
    assert M.run(m)["changed"] is True and m.calls == [["/usr/sbin/groupadd", "--system", "gdrdrv"]]
    m = Stub([], groups=["root"])
    assert M.run(m)["changed"] is False and m.calls == []
    m = Stub([], groups=["GPU.users"], check_mode=True)  # what gdrcopy_device_group accepts, the module does too
    assert M.run(m)["groups"] == [{"name": "GPU.users", "action": "created"}]
    with pytest.raises(Failed, match="groups: gdr drv is no group name"):
        M.run(Stub([], groups=["gdr drv"]))


def test_a_retired_name_goes_only_where_this_project_wrote_it(tmp_path):
    """The names before 0.3.0 (gdrdrv.conf, gdrcopy.service and its wants link), which upstream's packaging uses too."""
    conf, unit = tmp_path / "gdrdrv.conf", tmp_path / "gdrcopy.service"
    wants = tmp_path / "multi-user.target.wants" / "gdrcopy.service"
    retired = [entry(dest=str(wants), state="retired", content=None, src=str(unit)),
               entry(dest=str(unit), state="retired", content=None, after="daemon-reload"),
               entry(dest=str(conf), state="retired", content=None)]
    assert M.run(Stub(retired))["changed"] is False  # none there
    header = "# Ansible managed (gdrcopy-ansible, role gdrcopy): changes here are overwritten by the next run.\n"
    conf.write_text(header + "install gdrdrv ...\n")
    unit.write_text(header + "[Unit]\n")
    wants.parent.mkdir()
    wants.symlink_to(unit)
    r = M.run(Stub(retired, check_mode=True, diff=True))
    assert r["changed_files"] == [str(wants), str(unit), str(conf)] and conf.exists() and os.path.islink(wants)
    assert r["diff"][1]["before"] == "(written by gdrcopy-ansible before 0.3.0)\n"
    r = M.run(Stub(retired))
    assert [f["action"] for f in r["files"]] == ["removed", "removed", "removed"]
    assert not (conf.exists() or unit.exists() or os.path.lexists(wants))
    # upstream's: a file without the header, a wants link to its own unit
    conf.write_text("options gdrdrv dbg_enabled=0\n")
    wants.symlink_to("/usr/lib/systemd/system/gdrcopy.service")
    r = M.run(Stub(retired))
    assert r["changed"] is False and conf.exists() and os.path.islink(wants)


def test_a_retired_entry_takes_no_content():
    assert FO.check_entry(entry(state="retired")) == (
        "files: /etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf is retired: no content, and src only as the absolute "
        "target of our link")
    assert FO.check_entry(entry(state="retired", content=None)) is None
