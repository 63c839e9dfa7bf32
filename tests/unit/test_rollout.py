"""Rolling batches (plugins/filter/batches.py, fail_percentage.py), the proxy environment (proxy_env.py) and Debian's
reboot flag (gdrcopy_fileops.reboot_flag): the values a play's serial, max_fail_percentage and environment take, one
sentence for a bad one, and a real playbook run in batches that stops once a batch fails."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.gdrcopy.plugins.filter.batches import batches
from ansible_collections.gpufleet.gdrcopy.plugins.filter.fail_percentage import fail_percentage
from ansible_collections.gpufleet.gdrcopy.plugins.filter.proxy_env import proxy_env
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_fileops as FO
from conftest import COLLECTIONS, REPO, StubModule as Module


@pytest.mark.parametrize("value, serial", [
    (0, 0), (10, 10), ("10", 10), (" 5 ", 5), ("10%", "10%"), ("100%", "100%"), ([1, "10%", "50%"], [1, "10%", "50%"]),
    (["25%"], "25%"), (["2", 4], [2, 4]),
])
def test_serial_values(value, serial):
    assert batches(value) == serial


@pytest.mark.parametrize("value", ["10x", "0%", "101%", "-1", -1, True, None, "1e3", "10 %", [], [1, "x"], {"a": 1},
                                   1000000, "5\n", list(range(33))])
def test_a_bad_serial_is_refused_by_name(value):
    with pytest.raises(AnsibleFilterError, match=r"^gdrcopy_serial(\[\d+\])? must be a number of hosts"):
        batches(value)


@pytest.mark.parametrize("value, pct", [(0, 0), (100, 100), ("10", 10), (" 50 ", 50)])
def test_fail_percentages(value, pct):
    assert fail_percentage(value) == pct


@pytest.mark.parametrize("value", [101, -1, "10%", True, None, "ten", 1.5, [10]])
def test_a_bad_fail_percentage_is_refused_by_name(value):
    with pytest.raises(AnsibleFilterError, match="^gdrcopy_max_fail_percentage must be a whole number from 0 to 100"):
        fail_percentage(value)


@pytest.mark.parametrize("value, env", [
    (None, {}), ({}, {}), ("", {}),
    ({"https_proxy": "http://proxy.example.org:3128", "HTTP_PROXY": "http://user:p%40ss@192.0.2.1:8080/",
      "no_proxy": "localhost,127.0.0.1,.cluster.example.org,10.0.0.0/8,[2001:db8::1]"},
     {"https_proxy": "http://proxy.example.org:3128", "HTTP_PROXY": "http://user:p%40ss@192.0.2.1:8080/",
      "no_proxy": "localhost,127.0.0.1,.cluster.example.org,10.0.0.0/8,[2001:db8::1]"}),
    ({"all_proxy": "socks5h://[2001:db8::2]:1080"}, {"all_proxy": "socks5h://[2001:db8::2]:1080"}),
])
def test_proxy_environments(value, env):
    assert proxy_env(value) == env


@pytest.mark.parametrize("value, why", [
    ("http://proxy:3128", "is a str, not a mapping"),
    ({"LD_PRELOAD": "/tmp/x.so"}, "names 'LD_PRELOAD', which is not a proxy variable"),
    ({"Https_Proxy": "http://p:1"}, "names 'Https_Proxy'"),
    ({"https_proxy": 3128}, "gives https_proxy a int"),
    ({"https_proxy": "proxy:3128"}, "gives https_proxy a value that is not one proxy URL"),
    ({"https_proxy": "http://p:1 -o x"}, "gives https_proxy a value that is not one proxy URL"),
    ({"https_proxy": "http://p:1\nX=1"}, "gives https_proxy a value that is not one proxy URL"),
    ({"https_proxy": "http://p/path"}, "gives https_proxy a value that is not one proxy URL"),
    ({"no_proxy": "a, b"}, "gives no_proxy a value that is not a list of hosts"),
    ({"no_proxy": "a;b"}, "gives no_proxy a value that is not a list of hosts"),
])
def test_a_bad_proxy_environment_is_refused_by_name_without_its_value(value, why):
    with pytest.raises(AnsibleFilterError, match="^gdrcopy_proxy_env ") as e:
        proxy_env(value)
    assert why in str(e.value)
    assert "-o x" not in str(e.value) and "p%40ss" not in str(e.value)


def flag_root(tmp_path, debian=True, pkgs=None, flag=None):
    root = tmp_path / "host"
    (root / "run").mkdir(parents=True)
    (root / "etc").mkdir()
    if debian:
        (root / "etc" / "debian_version").write_text("12.8\n")
    if pkgs is not None:
        (root / "run" / "reboot-required.pkgs").write_text(pkgs)
    if flag is not None:
        (root / "run" / "reboot-required").write_bytes(flag)
    return root


def test_the_reboot_flag_names_the_project_while_a_reboot_is_needed(tmp_path):
    root = flag_root(tmp_path)
    assert FO.reboot_flag(Module(), True, check_mode=True, root=str(root)) is True
    assert not (root / "run" / "reboot-required").exists()
    assert FO.reboot_flag(Module(), True, root=str(root)) is True
    assert (root / "run" / "reboot-required").read_bytes() == FO.REBOOT_TEXT
    assert (root / "run" / "reboot-required.pkgs").read_text() == "gdrcopy-ansible\n"
    assert FO.reboot_flag(Module(), True, root=str(root)) is False
    assert FO.reboot_flag(Module(), False, root=str(root)) is True
    assert sorted(os.listdir(root / "run")) == []
    assert FO.reboot_flag(Module(), False, root=str(root)) is False


def test_a_flag_another_package_set_stays(tmp_path):
    """A kernel upgrade's postinst asked for the reboot too: only the project's line goes."""
    root = flag_root(tmp_path, pkgs="linux-image-6.1.0-47-amd64\n", flag=FO.REBOOT_TEXT)
    assert FO.reboot_flag(Module(), True, root=str(root)) is True
    assert (root / "run" / "reboot-required.pkgs").read_text() == "linux-image-6.1.0-47-amd64\ngdrcopy-ansible\n"
    assert FO.reboot_flag(Module(), False, root=str(root)) is True
    assert (root / "run" / "reboot-required.pkgs").read_text() == "linux-image-6.1.0-47-amd64\n"
    assert (root / "run" / "reboot-required").exists()


def test_no_flag_outside_debian(tmp_path):
    root = flag_root(tmp_path, debian=False)
    assert FO.reboot_flag(Module(), True, root=str(root)) is False
    assert os.listdir(root / "run") == []


def run_uninstall_check(tmp_path, *extra):
    inventory = tmp_path / "hosts.ini"
    # n2 has a prefix the inputs refuse: its batch fails. Every host runs on this controller, checking only.
    inventory.write_text("[nodes]\nn1\nn2 gdrcopy_prefix=relative/path\nn3\nn4\n[nodes:vars]\nansible_connection=local\n"
                         "ansible_become=false\nansible_python_interpreter=%s\n" % sys.executable)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    playbook_bin = str(Path(sys.executable).parent / "ansible-playbook")
    r = subprocess.run([playbook_bin, "-i", str(inventory), str(REPO / "playbooks" / "uninstall.yml"), "--check",
                        "-e", "gdrcopy_hosts=nodes", *extra], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    return r.returncode, r.stdout + r.stderr


def recapped(out):
    """The hosts of the run's recap lines ("n1    : ok=5 ...")."""
    return re.findall(r"^(n\d)\s+: ok=", out.split("PLAY RECAP")[-1], re.M)


def test_a_failed_batch_stops_the_rollout(tmp_path):
    """Batches of two: n1 and n2 first; n2 fails, which is more than 0 % of its batch, so n3 and n4 never run."""
    rc, out = run_uninstall_check(tmp_path, "-e", "gdrcopy_serial=2", "-e", "gdrcopy_max_fail_percentage=0")
    assert rc != 0
    assert "gdrcopy_prefix" in out
    assert out.count("PLAY [Uninstall gdrcopy-ansible]") == 1
    assert recapped(out) == ["n1", "n2"]


def test_without_a_limit_the_other_batches_go_on(tmp_path):
    """The default (100 %): the failed host leaves the run, the next batch runs."""
    rc, out = run_uninstall_check(tmp_path, "-e", "gdrcopy_serial=2")
    assert rc != 0
    assert out.count("PLAY [Uninstall gdrcopy-ansible]") == 2
    assert recapped(out) == ["n1", "n2", "n3", "n4"]
