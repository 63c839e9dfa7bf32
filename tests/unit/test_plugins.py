"""The collection's controller-side plugins: the code_digest lookup, the connection_available test and the
gdrcopy_report action plugin's argument handling."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.lookup import code_digest
from conftest import COLLECTIONS, REPO, TEST_COLLECTIONS

BIN = Path(sys.executable).parent


def small_collection(root):
    for rel, text in {"roles/r/tasks/main.yml": "---\n", "roles/r/README.md": "doc\n", "roles/r/files/x": "x\n",
                      "plugins/modules/m.py": "# m\n", "plugins/modules/__pycache__/m.cpython-311.pyc": "c",
                      "playbooks/site.yml": "---\n", "playbooks/README.md": "doc\n", "docs/D.md": "doc\n",
                      "README.md": "doc\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_digest_covers_what_runs_by_relative_path_and_no_doc(tmp_path):
    root = small_collection(tmp_path / "a")
    assert code_digest.code_files(str(root)) == [
        "playbooks/site.yml", "plugins/modules/m.py", "roles/r/files/x", "roles/r/tasks/main.yml"]
    expected = hashlib.sha256(b"playbooks/site.yml\nplugins/modules/m.py\nroles/r/files/x\nroles/r/tasks/main.yml\n"
                              b"---\n# m\nx\n---\n").hexdigest()
    assert code_digest.digest(str(root)) == expected
    other = shutil.copytree(root, tmp_path / "elsewhere" / "b")
    assert code_digest.digest(str(other)) == expected, "where the collection lies does not matter"
    (other / "README.md").write_text("changed\n")
    (other / "roles" / "r" / "README.md").write_text("changed\n")
    assert code_digest.digest(str(other)) == expected, "documentation is no input"
    (other / "roles" / "r" / "files" / "x").write_text("y\n")
    assert code_digest.digest(str(other)) != expected


def test_the_digest_of_this_collection_is_its_own_root():
    assert code_digest.OWN_ROOT in (str(REPO), str(REPO / "collections" / "ansible_collections" / "gpufleet"
                                                  / "gdrcopy"))
    assert "plugins/lookup/code_digest.py" in code_digest.code_files(code_digest.OWN_ROOT)


def test_the_lookup_refuses_a_directory_that_is_no_collection(tmp_path):
    from ansible.errors import AnsibleLookupError
    with pytest.raises(AnsibleLookupError, match="no collection root"):
        code_digest.LookupModule().run([str(tmp_path)])


def ansible_playbook(tmp_path, playbook, collections, *args, **more_env):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=":".join(map(str, collections)),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", **more_env)
    r = subprocess.run([str(BIN / "ansible-playbook"), str(playbook), *args], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    return r.returncode, " ".join((r.stdout + r.stderr).split())


@pytest.mark.parametrize("with_general", [False, True])
def test_connection_available_follows_what_the_controller_has(tmp_path, with_general):
    """Run inside Ansible (the collection loader routes short names): core plugins are there, community.general's
    chroot only with that collection on the collections path, an unknown name never."""
    book = tmp_path / "t.yml"
    book.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "connection": "local", "tasks": [
        {"ansible.builtin.debug": {"msg": "RESULT {% for n in names %}{{ n is gpufleet.gdrcopy.connection_available }},"
                                          "{% endfor %}"},
         "vars": {"names": ["ssh", "local", "ansible.builtin.ssh", "no.such.connection", "nosuch", "chroot",
                            "community.general.chroot"]}}]}]))
    collections = [COLLECTIONS] + ([TEST_COLLECTIONS] if with_general else [])
    rc, out = ansible_playbook(tmp_path, book, collections, "-i", "localhost,")
    assert rc == 0, out
    general = "True" if with_general else "False"
    assert "RESULT True,True,True,False,False,%s,%s," % (general, general) in out, out


def test_an_image_host_without_community_general_stops_in_one_sentence(tmp_path):
    """Plain ansible-core (the collections path holds only this collection): preflight stops a chroot host before
    any task needs its connection, and says what to install."""
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu_nodes]\nimage ansible_connection=community.general.chroot ansible_host=%s\n" % (tmp_path / "root"))
    rc, out = ansible_playbook(tmp_path, REPO / "playbooks" / "preflight.yml", [COLLECTIONS],
                               "-i", str(inventory), "-e", json.dumps({"ansible_python_interpreter": sys.executable}))
    assert rc != 0, out
    assert ("the connection plugin community.general.chroot (ansible_connection of image) is not installed on the "
            "controller: image mode through a chroot needs the community.general collection (ansible-galaxy "
            "collection install -r collections/requirements.yml); nothing was changed.") in out, out
    assert re.search(r"image : ok=0 changed=0 unreachable=0 failed=1", out), out


@pytest.mark.parametrize("mode, connection, resolved", [
    ("auto", "ssh", "host"), ("auto", "community.general.chroot", "image"), ("auto", "chroot", "image"),
    ("auto", None, "host"), ("host", "chroot", "host"), ("image", "ssh", "image"), (" image ", "local", "image")])
def test_the_mode_resolves_from_gdrcopy_mode_and_the_connection(mode, connection, resolved):
    from ansible_collections.gpufleet.gdrcopy.plugins.filter.resolve_mode import resolve_mode
    assert resolve_mode(mode, connection) == resolved


def test_a_mode_that_is_no_mode_is_named():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpufleet.gdrcopy.plugins.filter.resolve_mode import resolve_mode
    with pytest.raises(AnsibleFilterError, match="gdrcopy_mode is 'chroot': set it to auto, host or image"):
        resolve_mode("chroot")


def test_the_mode_is_resolved_in_one_place():
    """Preflight and each role (alone, without preflight) resolve the mode through the one filter; before, four
    expressions did, and mok_signing and nvidia_peermem ignored gdrcopy_mode."""
    users = {p.relative_to(REPO).as_posix(): p.read_text() for p in
             [REPO / "playbooks" / "preflight.yml"] + sorted((REPO / "roles").glob("*/vars/main.yml"))}
    assert {p for p, text in users.items() if "gpufleet.gdrcopy.resolve_mode(ansible_connection" in text} == set(users)
    assert not [p for p, text in users.items() if "'chroot'" in text or "chroot]" in text]


# --- converged hosts split off in one place (plugins/filter/skip_converged.py) ------------------------------------

def test_converged_hosts_leave_the_patterns_of_the_plays_that_change_things(tmp_path):
    """Ansible itself: preflight's group_by, then plays whose pattern goes through the filter. The converged host
    runs none of them, the kernels-only host only the one that keeps it, the others all; with no host converged the
    pattern is left as it is and Ansible warns about no unknown group."""
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("".join("%s ansible_connection=local ansible_python_interpreter=%s\n" % (h, sys.executable)
                                 for h in ("done", "kernel", "fresh")))
    plays = [{"hosts": "all", "gather_facts": False, "tasks": [
        {"ansible.builtin.group_by": {"key": "{{ 'gdrcopy_new_kernels' if inventory_hostname == 'kernel' "
                                             "else 'gdrcopy_converged' }}"},
         "when": "inventory_hostname in split"}]}]
    for name, keep in (("peermem", "false"), ("gdrcopy", "true")):
        plays.append({"name": name, "gather_facts": False,
                      "hosts": "{{ 'all' | gpufleet.gdrcopy.skip_converged(groups, new_kernels=%s) }}" % keep,
                      "tasks": [{"ansible.builtin.debug": {"msg": "RAN %s {{ inventory_hostname }}" % name}}]})
    book = tmp_path / "split.yml"
    book.write_text(json.dumps(plays))
    rc, out = ansible_playbook(tmp_path, book, [COLLECTIONS], "-i", str(inventory), "-e",
                               json.dumps({"split": ["done", "kernel"]}))
    assert rc == 0, out
    ran = set(re.findall(r"RAN (\w+ \w+)", out))
    assert ran == {"peermem fresh", "gdrcopy fresh", "gdrcopy kernel"}, out
    rc, out = ansible_playbook(tmp_path, book, [COLLECTIONS], "-i", str(inventory), "-e", json.dumps({"split": []}))
    assert rc == 0 and "Could not match" not in out, out
    assert len(set(re.findall(r"RAN (\w+ \w+)", out))) == 6, out


def test_the_plays_that_change_things_take_the_filter_and_preflight_names_its_groups():
    import yaml
    from ansible_collections.gpufleet.gdrcopy.plugins.filter import skip_converged as S
    books = {p.stem: yaml.safe_load(p.read_text()) for p in (REPO / "playbooks").glob("*.yml")}
    patterns = {name: play["hosts"] for name, book in books.items() for play in book if "hosts" in play}
    assert patterns["nvidia_peermem"].endswith("| gpufleet.gdrcopy.skip_converged(groups) }}")
    assert patterns["mok_signing"].endswith("| gpufleet.gdrcopy.skip_converged(groups, dmabuf=true) }}")
    assert patterns["gdrcopy"].endswith("| gpufleet.gdrcopy.skip_converged(groups, new_kernels=true) }}")
    assert all("skip_converged" not in patterns[p] for p in ("preflight", "verify", "status"))  # they report all
    assert "file: tasks/converged.yml" in (REPO / "playbooks" / "preflight.yml").read_text()
    text = (REPO / "playbooks" / "tasks" / "converged.yml").read_text()  # what preflight does on a converged host
    assert "key: \"{{ '%s' if __preflight_new_kernels else '%s' }}\"" % (S.NEW_KERNELS, S.CONVERGED) in text
    # a converged run changes nothing (molecule's idempotence run): the group is the run's inventory, not the host's
    assert re.search(r"ansible.builtin.group_by:\n +key: .*\n +changed_when: false", text), text
    preflight = (REPO / "playbooks" / "preflight.yml").read_text()  # and the hosts without gdrdrv
    assert re.search(r"ansible.builtin.group_by:\n +key: %s\n +when: __gdrcopy_plan.backend.name .*== 'dmabuf'\n"
                     r" +changed_when: false" % S.DMABUF, preflight), preflight


def test_skip_converged_leaves_out_the_dmabuf_hosts_when_asked():
    from ansible_collections.gpufleet.gdrcopy.plugins.filter import skip_converged as S
    groups = {"gdrcopy_converged": [], "gdrcopy_dmabuf": ["a"]}
    assert S.skip_converged("gpu", groups, dmabuf=True) == "gpu:!gdrcopy_converged:!gdrcopy_dmabuf"
    assert S.skip_converged("gpu", groups) == "gpu:!gdrcopy_converged"
    assert S.skip_converged("gpu", {"all": []}, dmabuf=True) == "gpu"


@pytest.mark.parametrize("pattern, groups, new_kernels, out", [
    ("all", {"all": [], "gdrcopy_converged": ["a"]}, False, "all:!gdrcopy_converged"),
    ("gpu,cpu", {"gdrcopy_converged": [], "gdrcopy_new_kernels": []}, False,
     "gpu,cpu:!gdrcopy_converged:!gdrcopy_new_kernels"),
    ("gpu", {"gdrcopy_converged": [], "gdrcopy_new_kernels": []}, True, "gpu:!gdrcopy_converged"),
    ("gpu", {"all": []}, False, "gpu"),
])
def test_skip_converged_excludes_the_groups_that_exist(pattern, groups, new_kernels, out):
    from ansible_collections.gpufleet.gdrcopy.plugins.filter.skip_converged import skip_converged
    assert skip_converged(pattern, groups, new_kernels) == out


def test_skip_converged_names_an_empty_pattern():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpufleet.gdrcopy.plugins.filter.skip_converged import skip_converged
    with pytest.raises(AnsibleFilterError, match="gdrcopy_hosts"):
        skip_converged(" ", {})


# --- the connection plugin loaded once in the controller (plugins/callback/connection_preload.py) -----------------

PROBE = """
import sys
from ansible.plugins.callback import CallbackBase
class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "probe"
    CALLBACK_NEEDS_ENABLED = True
    def v2_playbook_on_stats(self, stats):
        self._display.display("IN MAIN %s" % ("ansible_collections.community.general.plugins.connection.chroot"
                                              in sys.modules))
"""


@pytest.mark.parametrize("inventory, loaded", [
    # on a group, as the fleet benchmark's inventory has it
    ("[images]\nimage ansible_host=/nonexistent\n[images:vars]\nansible_connection=community.general.chroot\n", True),
    ("image ansible_connection=community.general.chroot ansible_host=/nonexistent\n", True),  # on the host
    ("node ansible_connection=local\n", False),  # ansible.builtin: nothing to preload
    ("image ansible_connection=no.such.connection\n", False),  # left to the worker
])
def test_the_controller_loads_a_collection_connection_before_the_workers_fork(tmp_path, inventory, loaded):
    """Ansible itself, with the callback as ansible.cfg enables it: a task that every host skips never loads a
    connection in a worker, so only the callback can have loaded community.general's chroot into the main process;
    a name that does not load changes nothing for the run."""
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "probe.py").write_text(PROBE)
    (tmp_path / "hosts.ini").write_text(inventory)
    book = tmp_path / "t.yml"
    book.write_text(json.dumps([{"hosts": "all", "gather_facts": False, "tasks": [
        {"ansible.builtin.ping": None, "when": False}]}]))
    rc, out = ansible_playbook(tmp_path, book, [COLLECTIONS, TEST_COLLECTIONS], "-i", str(tmp_path / "hosts.ini"),
                               ANSIBLE_CALLBACK_PLUGINS=str(tmp_path / "probe"),
                               ANSIBLE_CALLBACKS_ENABLED="gpufleet.gdrcopy.connection_preload,probe")
    assert rc == 0, out
    assert "IN MAIN %s" % loaded in out, out


def test_ansible_cfg_enables_the_preload():
    import configparser
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "ansible.cfg")
    assert "gpufleet.gdrcopy.connection_preload" in cfg.get("defaults", "callbacks_enabled").split(",")


def test_the_second_read_of_a_run_takes_the_os_facts_of_the_first(tmp_path):
    """Ansible itself, on this machine: a read returns its OS facts as ansible_facts (here marked, through the
    option); the next read's action plugin hands those to the module, which returns them instead of importing
    Ansible's fact collectors again (a collected value would be this machine's, not the mark)."""
    marked = {"distribution": "Marked", "os_family": "Marked", "pkg_mgr": "apt"}
    book = tmp_path / "t.yml"
    book.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "connection": "local", "tasks": [
        {"gpufleet.gdrcopy.gdrcopy_verify": {"image": True, "os_facts": marked}},
        {"gpufleet.gdrcopy.gdrcopy_verify": {"image": True}, "register": "second"},
        {"ansible.builtin.debug": {"msg": "SECOND {{ second.os.distribution }} {{ second.os.os_family }}"}}]}]))
    rc, out = ansible_playbook(tmp_path, book, [COLLECTIONS], "-i", "localhost,",
                               "-e", json.dumps({"ansible_python_interpreter": sys.executable}))
    assert rc == 0, out
    assert "SECOND Marked Marked" in out, out


def test_the_site_plays_enter_the_roles_without_ansibles_argument_spec_task(tmp_path):
    """preflight checks every role's variables against its argument spec (gdrcopy_inputs): the role plays do not
    repeat that check (one task per role and host)."""
    rc, out = ansible_playbook(tmp_path, REPO / "site.yml", [COLLECTIONS, TEST_COLLECTIONS], "-i", "localhost,",
                               "-e", "gdrcopy_hosts=localhost", "--list-tasks")
    assert rc == 0, out
    assert "Check and normalise the gdrcopy variables" in out, out
    assert "Validating arguments against arg spec" not in out, out


# What AnsiballZ ships with a module and every host compiles at each module start: the collection's module_utils it
# imports, followed through their own imports (as ansible-core's recursive finder does).
UTILS_PREFIX = "ansible_collections.gpufleet.gdrcopy.plugins.module_utils."


def _utils_imported(path):
    import ast
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(UTILS_PREFIX):
                names.add(node.module[len(UTILS_PREFIX):])
            elif node.module + "." == UTILS_PREFIX:
                names.update(a.name for a in node.names)
    return names


def _shipped(module_path):
    utils, todo = set(), _utils_imported(module_path)
    while todo:
        name = todo.pop()
        if name not in utils:
            utils.add(name)
            todo |= _utils_imported(REPO / "plugins" / "module_utils" / (name + ".py"))
    return utils


def _host_modules():
    """The modules that start on a host: those without an action plugin, and those whose action plugin runs them."""
    for module in sorted((REPO / "plugins" / "modules").glob("gdrcopy_*.py")):
        action = REPO / "plugins" / "action" / module.name
        if not action.exists() or "_execute_module" in action.read_text():
            yield module


@pytest.mark.parametrize("module", list(_host_modules()), ids=lambda p: p.stem)
def test_a_module_that_starts_on_the_host_ships_no_controller_validation(module):
    # gdrcopy_inputs checks the roles' variables on the controller; in a module's payload it cost every module
    # start 5 ms of compiling (a tenth of the collection's share) for one pattern.
    shipped = _shipped(module)
    assert "gdrcopy_inputs" not in shipped, sorted(shipped)
    assert "gdrcopy_report" not in shipped and "gdrcopy_plan" not in shipped, sorted(shipped)


def test_findings_are_console_lines_with_each_remedy_once_and_anything_else_one_clear_error():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpufleet.gdrcopy.plugins.filter.finding_lines import finding_lines
    found = [{"code": "modules_disabled", "severity": "blocker", "text": "module loading disabled", "remedy": "ship it"},
             {"code": "no_module_tree", "severity": "blocker", "text": "no module tree", "remedy": "ship it"},
             {"code": "no_library", "severity": "blocker", "text": "no libgdrapi", "remedy": "run site.yml"}]
    assert finding_lines(found) == ["blocker modules_disabled: module loading disabled -> ship it",
                                    "blocker no_module_tree: no module tree",
                                    "blocker no_library: no libgdrapi -> run site.yml"]
    assert finding_lines([]) == []
    for bad in ("module loading is disabled", [{"code": "x"}]):
        with pytest.raises(AnsibleFilterError, match="finding_lines takes the findings of gdrcopy_info"):
            finding_lines(bad)


def test_preflight_and_verify_watch_the_same_signing_files():
    """The converged check reads the key dir and the host's key pairs (DKMS's, shim-signed's); the record verify
    writes must hold them too, or a host with DKMS's pair is never converged (found by molecule/lifecycle's
    dmabuf.yml after upstream.yml left DKMS's key: "files./var/lib/dkms/mok.key is new" on every rerun)."""
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpufleet.gdrcopy.plugins.filter.converged_watch import converged_watch
    inputs = {"mok_signing_key_dir": "/var/lib/gdrcopy-ansible/mok",
              "mok_signing_host_key_paths": [{"key": "/var/lib/dkms/mok.key", "cert": "/var/lib/dkms/mok.pub"}]}
    assert converged_watch(inputs) == ["/var/lib/gdrcopy-ansible/mok/*", "/var/lib/gdrcopy-ansible/mok/.*",
                                       "/var/lib/dkms/mok.key", "/var/lib/dkms/mok.pub"]
    assert converged_watch({}) == []
    with pytest.raises(AnsibleFilterError, match="mok_signing_host_key_paths must be a list of"):
        converged_watch(dict(inputs, mok_signing_host_key_paths=["/var/lib/dkms/mok.key"]))
    for playbook in ("preflight.yml", "verify.yml"):
        assert "gpufleet.gdrcopy.converged_watch" in (REPO / "playbooks" / playbook).read_text(), playbook
