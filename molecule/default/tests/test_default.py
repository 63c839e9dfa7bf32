"""What the default scenario proves on the VM: a real Debian kernel, the harness's kernels and stand-ins,
and what site.yml did."""

import re

import pytest


def installed_kernels(host):
    return sorted(f.removeprefix("vmlinuz-") for f in host.file("/boot").listdir() if f.startswith("vmlinuz-"))


def nvidia_source_version(host):
    trees = [d for d in host.file("/usr/src").listdir() if re.fullmatch(r"nvidia-current-\d+\.\d+(\.\d+)?", d)]
    assert len(trees) == 1, trees
    return trees[0].removeprefix("nvidia-current-")


def test_runs_a_real_debian_kernel(host):
    release = host.check_output("uname -r")
    assert re.fullmatch(r"\d+\.\d+\.\d+-\d+-amd64", release), release
    assert "Debian" in host.file("/proc/version").content_string
    assert release in installed_kernels(host)
    assert host.package(f"linux-image-{release}").is_installed


def test_two_kernels_are_installed_with_headers(host):
    kernels = installed_kernels(host)
    assert len(kernels) >= 2, kernels
    for k in kernels:
        assert host.package(f"linux-headers-{k}").is_installed, k
        assert host.file(f"/lib/modules/{k}/build/Makefile").exists, k


@pytest.mark.parametrize("kernel_index", [0, 1])
def test_standins_are_built_for_every_kernel(host, kernel_index):
    kernel = installed_kernels(host)[kernel_index]
    for name in ("nvidia", "nvidia-peermem"):
        out = host.check_output(f"modinfo -k {kernel} -F filename {name}")
        assert out.endswith(f"/extra/gdrcopy-test-standins/{name}.ko"), out


def test_nvidia_standin_loads_with_modprobe_and_carries_the_source_version(host):
    host.run_test("modprobe nvidia")
    version = nvidia_source_version(host)
    assert host.file("/sys/module/nvidia/version").content_string.strip() == version
    assert version in host.file("/proc/driver/nvidia/version").content_string
    # every function of the real nv-p2p.h is exported by the loaded stand-in
    exported = set(host.check_output("awk '$4 == \"[nvidia]\" {print $3}' /proc/kallsyms").split())
    header = host.file(f"/usr/src/nvidia-current-{version}/nvidia/nv-p2p.h").content_string
    declared = set(re.findall(r"^(?:int|void)\s+(nvidia_p2p_\w+)\s*\(", header, re.M))
    assert declared and declared <= exported, declared - exported


def test_nvidia_peermem_standin_loads_after_nvidia(host):
    host.run_test("modprobe nvidia-peermem")
    assert host.file("/sys/module/nvidia_peermem").is_directory
    assert host.file("/sys/module/nvidia/holders/nvidia_peermem").exists


def test_preflight_passed_and_nothing_else_is_claimed_yet(host):
    # site.yml ran its preflight against this host: the fact file it leaves is checked by later stages.
    assert host.file("/proc/sys/kernel/modules_disabled").content_string.strip() == "0"
