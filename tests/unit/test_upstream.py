"""Upstream's own gdrcopy install on a host (gdrcopy_facts.upstream_facts, module_utils/gdrcopy_upstream.py): what its
debs, rpms, DKMS module, init script, unit, udev rules and libraries leave is found in a root laid out as upstream's
packaging leaves it (docs/UPSTREAM-GDRCOPY.md), reported as a concern, refused by the plan in one sentence naming
what was found and both choices, or planned for removal. molecule/lifecycle installs real debs built from the
fixture's packages/ and runs the removal (plugins/modules/gdrcopy_upstream.py) on a real kernel."""

from pathlib import Path

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts as F
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_verdict as V
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_plan as PLAN
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_upstream as U
from test_gdrcopy_info import FakeModule

K1, K2 = "6.1.0-41-amd64", "6.1.0-42-amd64"
STATUS = """Package: gdrdrv-dkms
Status: install ok installed
Version: 2.4.4

Package: libgdrapi
Status: install ok installed
Architecture: amd64
Version: 2.4.4

Package: gdrcopy-tests
Status: deinstall ok config-files
Version: 2.4.4

Package: zstd
Status: install ok installed
Version: 1.5.4+dfsg2-5
"""


def write(root, path, text=""):
    full = Path(root) / path.lstrip("/")
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(text)


@pytest.fixture
def upstream_host(tmp_path):
    """A Debian host that followed upstream's README: its two debs, DKMS's gdrdrv for both kernels, the init script,
    the DKMS source, the library in the multiarch dir, and this project's own gdrdrv for K1 too."""
    root = tmp_path / "root"
    write(root, "/var/lib/dpkg/status", STATUS)
    for k in (K1, K2):
        write(root, "/boot/vmlinuz-%s" % k)
        write(root, "/lib/modules/%s/kernel/.keep" % k)
        write(root, "/lib/modules/%s/modules.dep" % k, "updates/dkms/gdrdrv.ko:\n")
        write(root, "/lib/modules/%s/updates/dkms/gdrdrv.ko" % k)
        (root / "var/lib/dkms/gdrdrv/2.4.4" / k / "x86_64/module").mkdir(parents=True)
    (root / "var/lib/dkms/gdrdrv/2.4.4/source").symlink_to("/usr/src/gdrdrv-2.4.4")
    write(root, "/lib/modules/%s/updates/gdrcopy/gdrdrv.ko" % K1)
    write(root, "/etc/init.d/gdrdrv", "#!/bin/sh\nmknod -m 666 /dev/gdrdrv c $major 0\n")
    write(root, "/usr/src/gdrdrv-2.4.4/dkms.conf", 'PACKAGE_NAME="gdrdrv"\n')
    write(root, "/usr/lib/x86_64-linux-gnu/libgdrapi.so.2.4")
    return str(root)


def read(root):
    m = FakeModule()
    h = F.Host(m, root, live=False)
    kernels = F.kernel_facts(h, "")
    return {"kernel": kernels, "upstream": F.upstream_facts(h, kernels["installed"])}


def test_what_upstreams_debs_and_dkms_leave_is_found(upstream_host):
    up = read(upstream_host)["upstream"]
    assert up["packages"] == [{"name": "gdrdrv-dkms", "version": "2.4.4"}, {"name": "libgdrapi", "version": "2.4.4"}]
    assert up["dkms"] == [{"version": "2.4.4", "kernels": [K1, K2]}]
    assert up["files"] == ["/etc/init.d/gdrdrv", "/usr/lib/x86_64-linux-gnu/libgdrapi.so.2.4", "/usr/src/gdrdrv-2.4.4"]
    assert up["modules"] == ["/lib/modules/%s/updates/dkms/gdrdrv.ko" % k for k in (K1, K2)]
    assert U.found(up)


def test_a_host_without_it_has_nothing_found(tmp_path):
    write(tmp_path / "root", "/var/lib/dpkg/status", "Package: zstd\nStatus: install ok installed\nVersion: 1\n")
    up = read(str(tmp_path / "root"))["upstream"]
    assert up == {"packages": [], "dkms": [], "files": [], "modules": []} and not U.found(up) and not U.refusal(up)


def test_it_is_a_concern_and_two_gdrdrv_builds_for_one_kernel_are_another(upstream_host):
    facts = read(upstream_host)
    found = [f["text"] for f in V.upstream_findings(facts)]
    assert found[0].startswith("upstream's gdrcopy install is on this host (gdrdrv-dkms 2.4.4, libgdrapi 2.4.4, "
                               "DKMS gdrdrv/2.4.4 (%s, %s), /etc/init.d/gdrdrv," % (K1, K2))
    assert found[1] == ("kernel %s has 2 gdrdrv builds installed (/lib/modules/%s/updates/dkms/gdrdrv.ko, "
                        "/lib/modules/%s/updates/gdrcopy/gdrdrv.ko): which one modprobe loads depends on depmod's "
                        "order" % (K1, K1, K1))
    assert len(found) == 2  # K2 has DKMS's alone


def info(upstream):
    return {"groups": {"gdrcopy": True}, "upstream": upstream,
            "kernel": {"installed": [{"release": K1, "headers": True}]},
            "nvidia": {"version": "535.261.03", "flavor": "proprietary",
                       "source_match": {"dir": "/usr/src/nvidia", "version": "535.261.03"}},
            "kernel_hook": {"ok": True}}


def test_the_plan_refuses_upstreams_install_by_default_and_names_both_choices(upstream_host):
    up = read(upstream_host)["upstream"]
    with pytest.raises(PLAN.Blocked) as e:
        PLAN.plan(info(up), [], "host", "gdrcopy", False, {}, {}, [], "linux-headers-{kernel}")
    msg = str(e.value)
    assert msg.startswith("this host has upstream's own gdrcopy install (gdrdrv-dkms 2.4.4, libgdrapi 2.4.4, DKMS")
    assert "Set gdrcopy_upstream_packages: replace" in msg and "or remove it yourself" in msg
    assert msg.endswith("Nothing was changed.")
    p = PLAN.plan(info(up), [], "host", "gdrcopy", False, {}, {}, [], "linux-headers-{kernel}", "replace")
    assert p["upstream_remove"] is True and p["notes"][0].startswith("upstream's gdrcopy install is removed first")
    # the DMA-BUF backend builds no gdrdrv, but upstream's libgdrapi would still shadow ours: the same refusal
    dmabuf = dict(info(up), cuda={"driver_version": "13.3"})
    with pytest.raises(PLAN.Blocked, match="^this host has upstream's own gdrcopy install"):
        PLAN.plan(dmabuf, [], "host", "gdrcopy", False, {}, {}, [], "linux-headers-{kernel}", "refuse", "dmabuf", "2.6")
    p = PLAN.plan(dmabuf, [], "host", "gdrcopy", False, {}, {}, [], "linux-headers-{kernel}", "replace", "dmabuf", "2.6")
    assert p["upstream_remove"] is True and p["backend"]["name"] == "dmabuf" and p["kernels"] == []
    p = PLAN.plan(info({"packages": [], "dkms": [], "files": [], "modules": []}), [], "host", "gdrcopy", False, {},
                  {}, [], "linux-headers-{kernel}")
    assert p["upstream_remove"] is False and p["notes"] == []


def test_what_is_left_after_the_packages_is_sorted_into_steps(upstream_host):
    up = dict(read(upstream_host)["upstream"], packages=[])
    left = U.leftovers(dict(up, files=up["files"] + ["/usr/lib/systemd/system/gdrcopy.service"]))
    assert left["dkms"] == ["2.4.4"] and left["init"] == ["/etc/init.d/gdrdrv"]
    assert left["files"] == ["/usr/lib/x86_64-linux-gnu/libgdrapi.so.2.4", "/usr/src/gdrdrv-2.4.4",
                             "/usr/lib/systemd/system/gdrcopy.service"]
    assert left["modules"] == {K1: ["/lib/modules/%s/updates/dkms/gdrdrv.ko" % K1],
                               K2: ["/lib/modules/%s/updates/dkms/gdrdrv.ko" % K2]}
    assert left["ldconfig"] and left["daemon_reload"]


@pytest.mark.parametrize("manager, argv", [
    ("/usr/bin/apt-get", ["/usr/bin/apt-get", "-y", "-q", "purge", "gdrdrv-dkms", "libgdrapi"]),
    ("/usr/bin/dnf", ["/usr/bin/dnf", "-y", "remove", "gdrdrv-dkms", "libgdrapi"]),
])
def test_the_packages_go_with_their_own_scripts(manager, argv):
    assert U.package_argv(manager, ["libgdrapi", "gdrdrv-dkms"]) == argv


def test_an_init_script_leaves_the_boot_sequence_before_its_file_goes():
    assert U.init_argv("/usr/sbin/update-rc.d", "/etc/init.d/gdrdrv") == ["/usr/sbin/update-rc.d", "-f", "gdrdrv",
                                                                          "remove"]
    assert U.init_argv("/sbin/chkconfig", "/etc/init.d/gdrcopy") == ["/sbin/chkconfig", "--del", "gdrcopy"]


def test_rpm_versions_are_read():
    text = "installed gdrcopy 2.4.4-1.el9\npackage gdrcopy-kmod is not installed\ninstalled gdrcopy-devel 2.4.4-1.el9\n"
    assert P.parse_rpm_versions(text) == {"gdrcopy": "2.4.4-1.el9", "gdrcopy-devel": "2.4.4-1.el9"}
