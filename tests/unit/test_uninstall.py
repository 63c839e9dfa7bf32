"""playbooks/uninstall.yml's module, gdrcopy_uninstall (module_utils/gdrcopy_uninstall.py): what it removes is found
from the one table of the project's paths and the roles' inputs; a tree with every file the roles write loses all
of them, and nothing that was there before; a file at one of the project's names that it did not write is kept;
the packages go only when apt removes nothing else with them (real `apt-get -s` output)."""

import json
import os
from pathlib import Path

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_fileops as FO
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_uninstall as U
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import PATHS
from conftest import FIXTURES, StubModule
from test_converged import destinations, resolve
from test_gdrcopy_info import write

KERNELS = ("6.1.0-44-amd64", "6.1.0-47-amd64")
GONE = "6.1.0-40-amd64"  # a kernel removed since: only the gdrdrv the roles installed is left of it
PREFIX, BUILD, KEYS = "/opt/gdrcopy", PATHS["state_dir"] + "/build", PATHS["state_dir"] + "/mok"
HEADER = "# Ansible managed (gdrcopy-ansible, role gdrcopy): changes here are overwritten by the next run.\n"


def link(root, path, target):
    full = Path(root, path.lstrip("/"))
    full.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, full)


def listing(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.append("/" + os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


@pytest.fixture
def before(tmp_path):
    """A Debian host before the first run: its own files beside each place the roles write."""
    root = str(tmp_path / "host")
    for k in KERNELS:
        write(root, f"/lib/modules/{k}/kernel/drivers/net/e1000.ko", b"\x7fELF")
        write(root, f"/lib/modules/{k}/modules.dep", "kernel/drivers/net/e1000.ko:\n")
    write(root, "/etc/modprobe.d/blacklist.conf", "blacklist pcspkr\n")
    write(root, "/etc/ld.so.conf.d/libc.conf", "/usr/local/lib\n")
    write(root, "/etc/kernel/postinst.d/initramfs-tools", "#!/bin/sh\n")
    link(root, "/etc/systemd/system/multi-user.target.wants/ssh.service", "/lib/systemd/system/ssh.service")
    write(root, "/usr/local/bin/site-tool", "#!/bin/sh\n")
    write(root, "/etc/dkms/framework.conf", "")  # DKMS installed: mok_signing points it at the key
    os.makedirs(os.path.join(root, "etc/dkms/framework.conf.d"))
    write(root, "/opt/other/app", "x")
    write(root, "/var/lib/dpkg/status", "Package: zstd\n")
    return root


def install(root):
    """Every file the roles write (the entries of their vars, as test_converged finds them), and what their modules
    leave: gdrdrv per kernel, the library under the prefix, build dirs, records, the key, the packages record."""
    for dummy, module, dest, task in destinations():
        path, entry = resolve(dest), task[module]
        if "{{" in path or module.endswith((".stat", ".find", ".slurp")) or entry.get("state") in ("link", "absent", "retired"):
            continue  # read only, or not a file the roles write
        write(root, path, HEADER)
    write(root, "/etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf", HEADER + "install gdrdrv ...\n")
    write(root, "/etc/modprobe.d/gdrcopy-ansible-nv_peer_mem.conf", "# Ansible managed (gdrcopy-ansible, role "
          "nvidia_peermem)\nblacklist nv_peer_mem\n")
    write(root, "/etc/systemd/system/gdrcopy-ansible.service", HEADER + "[Unit]\n")
    link(root, "/etc/systemd/system/multi-user.target.wants/gdrcopy-ansible.service", "/etc/systemd/system/gdrcopy-ansible.service")
    write(root, "/etc/ld.so.conf.d/gdrcopy.conf", HEADER + "/opt/gdrcopy/current/lib\n")
    write(root, "/etc/kernel/header_postinst.d/zz-gdrcopy-ansible", "#!/bin/sh\n")
    write(root, "/etc/dkms/framework.conf.d/gdrcopy-ansible.conf", "mok_signing_key='/x'\n")
    write(root, PATHS["driver_record"], "{}")
    for k in KERNELS + (GONE,):
        write(root, f"/lib/modules/{k}/updates/gdrcopy/gdrdrv.ko", b"\x7fELF gdrdrv")
    write(root, f"{PREFIX}/2.6/lib/libgdrapi.so.2.6", b"\x7fELF")
    write(root, f"{PREFIX}/2.6/.gdrcopy-install.json", "{}")
    write(root, f"{PREFIX}/2.5/.gdrcopy-install.json", "{}")
    write(root, f"{PREFIX}/.2.6.new/lib/libgdrapi.so.2.6", b"half")  # a killed install's staging tree
    link(root, f"{PREFIX}/current", "2.6")
    write(root, f"{BUILD}/2.6-c9eaf059/driver/{KERNELS[0]}/.gdrcopy-stamp.json", "{}")
    write(root, PATHS["converged_record"], "{}")
    write(root, PATHS["hook_status"], "{}")
    write(root, PATHS["packages_record"], json.dumps({"installed": ["zstd"]}))
    write(root, f"{KEYS}/mok.key", "-----BEGIN PRIVATE KEY-----\n")
    write(root, f"{KEYS}/mok.der", b"0\x82")
    link(root, PATHS["mok_signer"], f"{KEYS}/mok.der")


def test_an_uninstall_leaves_the_tree_as_it_was_before_the_first_run(before):
    was = listing(before)
    install(before)
    found = U.plan(before, PREFIX, BUILD, KEYS, keep_key=False)
    assert found["kernels"] == list(KERNELS)  # depmod for the installed kernels, not for the one removed since
    assert (found["ldconfig"], found["unit"], found["foreign"]) == (True, True, [])
    removed = U.remove(before, found)
    assert sorted(set(listing(before)) ^ set(was)) == []
    assert "/usr/local/libexec" in removed and "/etc/kernel/header_postinst.d" in removed  # emptied parents
    assert f"/lib/modules/{GONE}" in removed  # nothing of that kernel is left
    # a second plan finds nothing
    again = U.plan(before, PREFIX, BUILD, KEYS, keep_key=False)
    assert (again["files"], again["dirs"], again["kernels"]) == ([], [], [])


def test_the_names_before_0_3_0_go_where_this_project_wrote_them_and_upstreams_stay(before):
    install(before)
    write(before, "/etc/modprobe.d/gdrdrv.conf", HEADER + "install gdrdrv ...\n")  # ours, from an older release
    write(before, "/etc/systemd/system/gdrcopy.service", HEADER + "[Unit]\n")
    link(before, "/etc/systemd/system/multi-user.target.wants/gdrcopy.service", "/etc/systemd/system/gdrcopy.service")
    found = U.plan(before, PREFIX, BUILD, KEYS, keep_key=False)
    assert {"/etc/modprobe.d/gdrdrv.conf", "/etc/systemd/system/gdrcopy.service",
            "/etc/systemd/system/multi-user.target.wants/gdrcopy.service"} <= set(found["files"])
    assert found["foreign"] == []
    # upstream's EL9 unit, enabled: its wants link is not ours
    os.unlink(os.path.join(before, "etc/systemd/system/multi-user.target.wants/gdrcopy.service"))
    link(before, "/etc/systemd/system/multi-user.target.wants/gdrcopy.service", "/usr/lib/systemd/system/gdrcopy.service")
    found = U.plan(before, PREFIX, BUILD, KEYS, keep_key=False)
    assert found["foreign"] == ["/etc/systemd/system/multi-user.target.wants/gdrcopy.service"]
    U.remove(before, found)
    assert os.path.islink(os.path.join(before, "etc/systemd/system/multi-user.target.wants/gdrcopy.service"))


def test_the_key_is_kept_unless_asked_for(before):
    install(before)
    found = U.plan(before, PREFIX, BUILD, KEYS, keep_key=True)
    U.remove(before, found)
    left = [p for p in listing(before) if p.startswith(PATHS["state_dir"])]
    assert left == [PATHS["state_dir"], KEYS, KEYS + "/mok.der", KEYS + "/mok.key"]
    assert not os.path.lexists(os.path.join(before, PATHS["mok_signer"].lstrip("/")))


def test_a_key_kept_elsewhere_goes_only_when_asked_for(before):
    install(before)
    write(before, "/srv/keys/mok/mok.key", "-----BEGIN PRIVATE KEY-----\n")
    U.remove(before, U.plan(before, PREFIX, BUILD, "/srv/keys/mok", keep_key=True))
    assert os.path.exists(os.path.join(before, "srv/keys/mok/mok.key"))
    assert not os.path.exists(os.path.join(before, PATHS["state_dir"].lstrip("/")))
    U.remove(before, U.plan(before, PREFIX, BUILD, "/srv/keys/mok", keep_key=False))
    assert not os.path.exists(os.path.join(before, "srv/keys"))


def test_files_at_our_names_that_we_did_not_write_are_kept(before):
    """Upstream's packaging uses /etc/modprobe.d/gdrdrv.conf and gdrcopy.service too (this project's names before
    0.3.0); a unit of that name in /etc may be the admin's."""
    write(before, "/etc/modprobe.d/gdrdrv.conf", "# upstream gdrdrv-dkms\noptions gdrdrv dbg_enabled=0\n")
    write(before, "/etc/systemd/system/gdrcopy.service", "[Unit]\nDescription=site unit\n")
    found = U.plan(before, PREFIX, BUILD, KEYS, keep_key=True)
    assert found["foreign"] == ["/etc/modprobe.d/gdrdrv.conf", "/etc/systemd/system/gdrcopy.service"]
    assert found["unit"] is False
    U.remove(before, found)
    assert Path(before, "etc/modprobe.d/gdrdrv.conf").read_text().startswith("# upstream")


def test_a_custom_prefix_and_build_root_are_found_and_only_our_releases_under_it_go(before):
    write(before, "/srv/gdrcopy/2.6/.gdrcopy-install.json", "{}")
    write(before, "/srv/gdrcopy/vendor-2.4/lib/libgdrapi.so.2.4", b"\x7fELF")  # not installed by gdrcopy-install
    link(before, "/srv/gdrcopy/current", "2.6")
    write(before, "/scratch/gdrbuild/2.6-abc/lib/.gdrcopy-stamp.json", "{}")
    found = U.plan(before, "/srv/gdrcopy", "/scratch/gdrbuild", KEYS, keep_key=True)
    assert "/srv/gdrcopy/2.6" in found["dirs"] and "/srv/gdrcopy/current" in found["files"]
    assert "/scratch/gdrbuild" in found["dirs"]
    U.remove(before, found)
    assert listing(before + "/srv") == ["/gdrcopy", "/gdrcopy/vendor-2.4", "/gdrcopy/vendor-2.4/lib",
                                        "/gdrcopy/vendor-2.4/lib/libgdrapi.so.2.4"]


def test_the_packages_record_keeps_every_name_once_and_refuses_bad_ones(tmp_path):
    path, Module = str(tmp_path / "packages.json"), StubModule
    assert FO.record_packages(Module(), ["zstd"], path=path) is True
    assert FO.record_packages(Module(), ["zstd"], path=path) is False
    assert FO.record_packages(Module(), ["xz-utils", "linux-headers-6.1.0-47-amd64"], check_mode=True,
                              path=path) is True
    assert FO.read_packages(path) == ["zstd"]
    assert FO.record_packages(Module(), ["linux-headers-6.1.0-47-amd64", "zstd"], path=path) is True
    assert FO.read_packages(path) == ["linux-headers-6.1.0-47-amd64", "zstd"]
    with pytest.raises(ValueError, match="is no package name"):
        FO.record_packages(Module(), ["zstd; rm -rf /"], path=path)
    Path(path).write_text('{"installed": ["zstd", "../etc", 7]}')
    assert FO.read_packages(path) == ["zstd"]
    Path(path).write_text("[]")
    assert FO.read_packages(path) == []


def apt(name):
    return (FIXTURES / "apt" / name).read_text()


def test_apt_simulations_are_read_from_their_remv_and_purg_lines():
    assert U.apt_removals(apt("purge-zstd.txt")) == ["zstd"]
    assert U.apt_removals(apt("purge-xz-utils.txt")) == [
        "build-essential", "dpkg-dev", "tcl-dev", "tcl8.6-dev", "tk-dev", "tk8.6-dev", "xz-utils"]
    assert U.apt_removals(apt("purge-refused.txt")) == []


def test_a_package_that_another_one_needs_is_kept_and_the_rest_go():
    """Captured simulations from Debian 12: purging xz-utils would take build-essential along, openssl is refused."""
    answers = {"zstd": apt("purge-zstd.txt"), "xz-utils": apt("purge-xz-utils.txt")}

    def simulate(names):
        if "openssl" in names:
            return None  # apt-get -s exits 100 (purge-refused.txt)
        return sorted(set(p for n in names for p in U.apt_removals(answers[n])))

    assert U.removable(["zstd"], simulate) == (["zstd"], [])
    assert U.removable(["zstd", "xz-utils", "openssl"], simulate) == (["zstd"], ["openssl", "xz-utils"])
    # a dependent that is ours too goes with it
    answers["build-essential"] = "Purg build-essential [12.9]\n"
    wanted = ["build-essential", "dpkg-dev", "tcl-dev", "tcl8.6-dev", "tk-dev", "tk8.6-dev", "xz-utils"]
    answers.update((n, "Purg %s [1]\n" % n) for n in wanted if n not in answers)
    assert U.removable(wanted, simulate) == (wanted, [])


class RmmodModule:
    """What unload() asks of AnsibleModule: where rmmod is, and running it (rc as the kernel would answer)."""

    def __init__(self, rc):
        self.rc, self.calls = rc, []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return "/sbin/" + name

    def run_command(self, argv):
        self.calls.append(argv)
        return self.rc, "", "rmmod: ERROR: Module gdrdrv is in use" if self.rc else ""


def result():
    return {"removed": [], "pending": False, "unloaded": False, "msg": ""}


def sysfs(tmp_path, refcnt):
    d = tmp_path / "sys" / "module" / "gdrdrv"
    d.mkdir(parents=True)
    (d / "refcnt").write_text(refcnt + "\n")
    return str(d)


@pytest.mark.parametrize("refcnt, rc, pending, calls", [
    ("0", 0, False, 1),   # free: unloaded
    ("2", 0, True, 0),    # held: never offered to rmmod, pending
    ("0", 1, True, 1),    # opened between the read and rmmod: pending, not a failure
])
def test_gdrdrv_is_unloaded_only_when_free_and_a_lost_race_is_pending(tmp_path, refcnt, rc, pending, calls):
    from ansible_collections.gpufleet.gdrcopy.plugins.modules import gdrcopy_uninstall as M
    module, out, node = RmmodModule(rc), result(), tmp_path / "gdrdrv"
    node.write_text("")  # stands for /dev/gdrdrv
    M.unload(module, out, check=False, sysfs=sysfs(tmp_path, refcnt), device=str(node))
    assert (out["pending"], out["unloaded"], len(module.calls)) == (pending, not pending, calls)
    assert ("stays loaded until the next boot" in out["msg"]) is pending
    assert node.exists() is pending and out["removed"] == ([] if pending else [str(node)])


def test_check_mode_offers_nothing_to_the_kernel(tmp_path):
    from ansible_collections.gpufleet.gdrcopy.plugins.modules import gdrcopy_uninstall as M
    module, out = RmmodModule(0), result()
    M.unload(module, out, check=True, sysfs=sysfs(tmp_path, "0"), device=str(tmp_path / "no-node"))
    assert (out["unloaded"], module.calls, out["removed"]) == (True, [], [])
    M.unload(module, result(), check=False, sysfs=str(tmp_path / "not-loaded"))
    assert module.calls == []


LIST_DELETE = """[key 1]
SHA1 Fingerprint: 3a:0f:...
Certificate:
    Data:
        Version: 3 (0x2)
        Serial Number:
            51:3a:0f:9c:1d
        Signature Algorithm: sha256WithRSAEncryption
        Issuer: CN = gdrcopy-vm module signing
[key 2]
        Serial Number: 4096 (0x1000)
"""


def test_the_serials_of_the_keys_waiting_for_deletion_are_read():
    assert U.list_serials(LIST_DELETE) == ["513A0F9C1D", "4096"]
    assert U.list_serials("MokDel is empty\n") == []


@pytest.mark.parametrize("state, pending, action", [
    ("enrolled", [], "request"),                  # enrolled: ask MokManager to delete it
    ("enrolled", ["513A0F9C1D"], "pending"),       # asked already: wait for the console, ask nothing again
    ("not_enrolled", [], "absent"),
    ("pending", [], "absent"),                    # only its enrollment is pending: nothing to delete yet
    ("unknown", [], "unknown"),                   # no EFI, no mokutil, no certificate
])
def test_what_an_uninstall_does_about_the_signing_certificate(state, pending, action):
    assert U.mok_deletion(state, "513A0F9C1D", pending) == action
    assert U.mok_message(action, "/var/lib/gdrcopy-ansible/mok/mok.der")


def test_a_deletion_without_its_password_stops_before_anything_changes(monkeypatch, before):
    from ansible_collections.gpufleet.gdrcopy.plugins.modules import gdrcopy_uninstall as M
    from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts as F
    monkeypatch.setattr(F, "cert_mok_state", lambda h, cert, efi: {"state": "enrolled", "serial": "513A0F9C1D"})

    class Module(StubModule):
        @staticmethod
        def get_bin_path(name, **kw):
            return None  # no mokutil here: nothing pending can be listed

    params = {"mok_delete": True, "mok_password": "", "image": False, "key_dir": before + KEYS}
    with pytest.raises(U.UninstallError, match="needs the password MokManager asks for: set "
                                               "mok_signing_enrollment_password"):
        M.delete_mok(Module(), params, check=False)
    out = M.delete_mok(Module(check_mode=True), dict(params, mok_password="pw"), check=True)
    assert out["action"] == "request" and "confirm it at the console" in out["msg"]


def test_the_packages_record_can_be_kept_while_the_rest_of_the_state_goes(before):
    """While a MOK deletion waits, the uninstall keeps mokutil and its record (the rest of the state directory goes)."""
    install(before)
    found = U.plan(before, PREFIX, BUILD, KEYS, keep_key=False, keep_paths=(PATHS["packages_record"],))
    assert PATHS["state_dir"] not in found["dirs"] and PATHS["packages_record"] not in found["files"]
    U.remove(before, found)
    left = [p for p in listing(before) if p.startswith(PATHS["state_dir"])]
    assert left == [PATHS["state_dir"], PATHS["packages_record"]]
    again = U.plan(before, PREFIX, BUILD, KEYS, keep_key=False, keep_paths=(PATHS["packages_record"],))
    assert (again["files"], again["dirs"]) == ([], [])


@pytest.mark.parametrize("states, chosen", [
    ({"mok.der": "not_enrolled", "controller.der": "enrolled"}, "controller.der"),  # after a rotation to the controller
    ({"mok.der": "enrolled", "controller.der": "enrolled"}, "mok.der"),
    ({"mok.der": "not_enrolled"}, "mok.der"),  # none trusted: the first kept, whose deletion is "absent"
    ({}, ""),
])
def test_without_the_signer_link_the_kept_certificate_the_firmware_trusts_is_deleted(monkeypatch, tmp_path, states,
                                                                                       chosen):
    """An earlier uninstall removed the signer link and kept the keys; after a rotation the replaced certificate
    (mok.der) may be deleted from the MOK list already while the controller's is enrolled: the latter is asked for."""
    from ansible_collections.gpufleet.gdrcopy.plugins.modules import gdrcopy_uninstall as M
    from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts as F
    for name in states:
        (tmp_path / name).write_bytes(b"der")
    monkeypatch.setattr(F, "cert_mok_state", lambda h, cert, efi: {
        "state": states.get(os.path.basename(cert), "unknown"), "serial": "513A0F9C1D"})
    monkeypatch.setitem(M.PATHS, "mok_signer", str(tmp_path / "no-link"))

    class Module(StubModule):
        @staticmethod
        def get_bin_path(name, **kw):
            return None

    params = {"mok_delete": True, "mok_password": "pw", "image": False, "key_dir": str(tmp_path)}
    out = M.delete_mok(Module(check_mode=True), params, check=True)
    assert out["cert"] == (str(tmp_path / chosen) if chosen else "")
    assert out["action"] == {"controller.der": "request", "mok.der": "request" if len(states) == 2 else "absent",
                             "": "unknown"}[chosen]
