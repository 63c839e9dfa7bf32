"""module_utils/gdrcopy_plan.py (the action plugin gdrcopy_plan): the kernels, the headers, the NVIDIA source and
each blocker's sentence, from what gdrcopy_info read and what the package manager answered. The plugin runs for real
in the VM scenarios (preflight of every converge) and in test_preflight_host.py."""

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_plan as PLAN

K1, K2, K3 = "6.1.0-41-amd64", "6.1.0-42-amd64", "6.1.0-43-amd64"
TREE = {"dir": "/usr/src/nvidia-535.261.03/nvidia", "version": "535.261.03", "flavor": "proprietary",
        "reason": "matches the driver"}


def info(headers=(K1, K2), installed=(K1, K2), tree=TREE, version="535.261.03", group=True, hook=None):
    return {"groups": {"gdrcopy": group},
            "kernel": {"installed": [{"release": k, "headers": k in headers} for k in installed]},
            "nvidia": {"version": version, "flavor": "proprietary", "source_match": tree},
            "kernel_hook": hook or {"ok": True}}


def query(*found, missing=()):
    return {"results": [{"item": k, "rc": 0} for k in found] + [{"item": k, "rc": 100} for k in missing]}


def plan(i, kernels=(), mode="host", create=False, headers=None, source=None, candidates=()):
    return PLAN.plan(i, list(kernels), mode, "gdrcopy", create, headers or {}, source or {}, list(candidates),
                     "linux-headers-{kernel}")


def test_every_installed_kernel_with_headers_is_built_for():
    p = plan(info())
    assert p["kernels"] == [K1, K2] and p["kernels_skipped"] == [] and p["headers_to_install"] == []
    assert p["nvidia"] == TREE and p["nvidia_source_package"] == "" and p["notes"] == []


@pytest.mark.fault(3)
def test_a_kernel_without_headers_to_install_is_skipped_and_said():
    p = plan(info(headers=(K1,), installed=(K1, K2, K3)), headers=query(K3, missing=[K2]))
    assert p["kernels"] == [K1, K3] and p["kernels_skipped"] == [K2] and p["headers_to_install"] == [K3]
    assert p["notes"] == [
        "no headers for %s, and the package manager has none to install (linux-headers-{kernel}): gdrdrv is not built "
        "for it, and will not load when the host boots it. Install the headers by hand, or remove the kernel." % K2]


def test_a_listed_kernel_that_cannot_be_built_for_stops_the_host():
    with pytest.raises(PLAN.Blocked, match="^no kernel to build gdrdrv for: %s has no headers" % K2):
        plan(info(headers=(K1,)), kernels=[K1, K2], headers=query(missing=[K2]))
    with pytest.raises(PLAN.Blocked, match="^gdrcopy_kernels lists 9.9.9, not installed on this host"):
        plan(info(), kernels=["9.9.9"])
    with pytest.raises(PLAN.Blocked, match="^no kernel to build gdrdrv for: no kernel is installed"):
        plan(info(installed=()))


def test_a_missing_group_stops_unless_it_may_be_created():
    with pytest.raises(PLAN.Blocked, match='^gdrcopy_device_group "gdrcopy" does not exist on this host'):
        plan(info(group=False))
    assert plan(info(group=False), create=True)["kernels"] == [K1, K2]


@pytest.mark.fault(4)
def test_the_nvidia_source_is_a_matching_tree_or_a_package_else_the_host_stops():
    none = {"reason": "/usr/src holds no nv-p2p.h"}
    found = {"results": [{"item": "nvidia-kernel-source-535", "rc": 0, "stdout": "Version: 535.261.03-1\n"},
                         {"item": "nvidia-open-kernel-source", "rc": 100}]}
    p = plan(info(tree=none), source=found, candidates=["nvidia-open-kernel-source", "nvidia-kernel-source-535"])
    assert p["nvidia"] == none and p["nvidia_source_package"] == "nvidia-kernel-source-535"
    with pytest.raises(PLAN.Blocked) as e:
        plan(info(tree=none), candidates=["nvidia-kernel-source-535"])
    assert str(e.value).startswith("/usr/src holds no nv-p2p.h. gdrdrv is built against the NVIDIA kernel source")
    assert "(nvidia-kernel-source-535)" in str(e.value)


APT_SHOW = """Package: nvidia-kernel-dkms
Version: 535.261.03-1~deb12u1
Architecture: amd64

Package: nvidia-kernel-dkms
Version: 1:535.247.01-1
Architecture: amd64
"""
DNF_INFO = """Available Packages
Name         : kmod-nvidia-latest-dkms
Epoch        : 3
Version      : 535.261.03
Release      : 1.el9
Architecture : x86_64

Name         : kmod-nvidia-latest-dkms
Epoch        : 3
Version      : 550.54.15
Release      : 1.el9
"""


def test_every_version_a_package_query_lists_is_read_with_its_upstream_part():
    assert PLAN.package_versions(APT_SHOW) == [("535.261.03-1~deb12u1", "535.261.03"), ("1:535.247.01-1", "535.247.01")]
    assert PLAN.package_versions(DNF_INFO) == [("535.261.03-1.el9", "535.261.03"), ("550.54.15-1.el9", "550.54.15")]
    assert PLAN.package_versions("") == [] and PLAN.package_versions("E: No packages found") == []


def source_query(**stdout):
    return {"results": [{"item": k, "rc": 0, "stdout": v} for k, v in stdout.items()]
            + [{"item": "nvidia-kernel-source-535", "rc": 100, "stdout": ""}]}


def test_the_nvidia_source_package_is_chosen_by_the_driver_version_before_it_is_installed():
    none = {"reason": "/usr/src holds no nv-p2p.h"}
    candidates = ["nvidia-kernel-source-535", "nvidia-kernel-dkms", "kmod-nvidia-latest-dkms"]
    p = plan(info(tree=none), source=source_query(**{"nvidia-kernel-dkms": APT_SHOW}), candidates=candidates)
    assert (p["nvidia_source_package"], p["nvidia_source_version"]) == ("nvidia-kernel-dkms", "535.261.03-1~deb12u1")
    p = plan(info(tree=none, version="550.54.15"), source=source_query(**{"kmod-nvidia-latest-dkms": DNF_INFO}),
             candidates=candidates)
    assert (p["nvidia_source_package"], p["nvidia_source_version"]) == ("kmod-nvidia-latest-dkms", "550.54.15-1.el9")
    # known, but not in the driver's version: stop before installing the wrong nv-p2p.h, and say what there is
    with pytest.raises(PLAN.Blocked) as e:
        plan(info(tree=none, version="560.35.03"), source=source_query(**{"nvidia-kernel-dkms": APT_SHOW}),
             candidates=candidates)
    assert str(e.value).startswith("no NVIDIA kernel source package for driver 560.35.03: the package manager has "
                                   "nvidia-kernel-dkms 535.261.03-1~deb12u1, 1:535.247.01-1.")
    # a matching tree on the host: no package at all
    p = plan(info(), source=source_query(**{"nvidia-kernel-dkms": APT_SHOW}), candidates=candidates)
    assert p["nvidia_source_package"] == "" and p["nvidia"] == TREE


def test_host_mode_needs_a_driver_and_image_mode_does_not():
    with pytest.raises(PLAN.Blocked, match="^no NVIDIA driver on this host"):
        plan(info(version=""))
    assert plan(info(version=""), mode="image")["kernels"] == [K1, K2]
    with pytest.raises(PLAN.Blocked, match=r"\(no NVIDIA driver found: nothing is loaded"):
        plan(info(version="", tree={"reason": "no tree"}), mode="image")


def test_a_failed_kernel_hook_is_said_once():
    hook = {"ok": False, "kernel": K3, "time": 0, "msg": "gdrcopy-kernel-hook: build failed"}
    assert plan(info(hook=hook))["notes"] == [
        "the kernel hook failed for %s at 1970-01-01 00:00:00 UTC: gdrcopy-kernel-hook: build failed. This run "
        "builds what is missing." % K3]


def test_answered_reads_a_skipped_loop_as_nothing():
    assert PLAN.answered({"skipped": True, "results": []}) == [] and PLAN.answered({}) == []


@pytest.mark.fault(5)
@pytest.mark.parametrize("kernel, sentence", [
    ({"modular": False, "running": K1}, "this kernel (%s) has no loadable module support "
     "(/proc/sys/kernel/modules_disabled is absent): gdrdrv cannot be loaded here." % K1),
    ({"modular": True, "modules_disabled": True}, "module loading is disabled on this host "
     "(kernel.modules_disabled=1): gdrdrv cannot be loaded until reboot;"),
])
def test_a_host_that_cannot_load_modules_stops_first_and_an_image_does_not(kernel, sentence):
    i = info(group=False, version="")  # blockers that come later do not hide it
    i["kernel"].update(kernel)
    with pytest.raises(PLAN.Blocked) as err:
        plan(i)
    assert str(err.value).startswith(sentence) and "set gdrcopy_mode: image" in str(err.value)
    i = info()
    i["kernel"].update(kernel)
    assert plan(i, mode="image")["kernels"] == [K1, K2]


def test_a_host_of_another_os_family_stops_with_what_each_family_has_behind_it():
    """The sentence says what README: Platforms says (Debian 12 and 13 proven, the rest unit-tested), not more."""
    suse = dict(info(), os={"os_family": "Suse", "distribution": "SLES", "distribution_version": "15.6"})
    with pytest.raises(PLAN.Blocked, match=r"^SLES 15\.6 \(OS family Suse\) is not supported: gdrcopy-ansible has "
                                           r"package tables for the Debian family \(proven on Debian 12 and 13;") as e:
        plan(suse)
    assert "README: Platforms" in str(e.value) and "Nothing was changed." in str(e.value)
    assert plan(dict(info(), os={"os_family": "Debian"}))["kernels"] == [K1, K2]
