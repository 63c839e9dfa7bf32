"""gdrcopy_info against file-system captures: the shared H200 host and a small synthetic image root."""

import json
import os

import pytest

import gdrcopy_info


class FakeModule:
    """What gdrcopy_info uses of AnsibleModule: tool lookup and argv commands (recorded)."""

    def __init__(self, tools=None, outputs=None):
        self.tools, self.outputs, self.calls = tools or {}, outputs or {}, []

    def get_bin_path(self, name, opt_dirs=None):
        return self.tools.get(name)

    def run_command(self, argv, environ_update=None):
        assert environ_update == {"LC_ALL": "C"}
        self.calls.append(argv)
        return self.outputs.get(tuple(argv), (1, "", "not found"))


@pytest.fixture
def h200_root(shared_fixture):
    shared_fixture("hosts/h200-vm-modules-disabled", "README.md")  # fails clearly when ../shared is missing
    from conftest import SHARED
    return str(SHARED / "fixtures" / "hosts" / "h200-vm-modules-disabled" / "fs")


def test_the_h200_capture(h200_root):
    m = FakeModule()  # the capture has no kmod tools at all
    r = gdrcopy_info.gather(m, h200_root, "/usr/local/cuda", "/var/lib/gdrcopy-ansible/build", "/opt/gdrcopy")
    assert r["kernel"]["modules_disabled"] is True
    assert r["kernel"]["sig_enforce"] is True
    assert r["kernel"]["efi"] is False
    assert r["kernel"]["installed"] == []  # no /lib/modules in the capture
    assert r["kernel"]["running"] == ""  # an inspected root is not the running host
    assert r["nvidia"]["loaded"] is True
    assert (r["nvidia"]["version"], r["nvidia"]["flavor"]) == ("580.159.04", "open")
    assert r["nvidia"]["source_trees"] == []
    assert r["nvidia"]["source_match"] == {"reason": "no NVIDIA kernel source tree (nv-p2p.h) was found"}
    assert r["gdrdrv"]["loaded"] is False and r["gdrdrv"]["major"] == -1
    assert r["gdrdrv"]["device"]["exists"] is False and r["gdrdrv"]["device"]["ok"] is False
    assert r["library"] == {"paths": [], "version": ""}
    assert r["builds"] == {} and r["installs"] == {}
    assert set(r["tools"].values()) == {""}
    assert m.calls == []


def write(root, rel, text=""):
    path = os.path.join(root, rel.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


@pytest.fixture
def image_root(tmp_path):
    """An image with two kernels (one without headers), two NVIDIA source trees, a build stamp and an install stamp."""
    root = str(tmp_path)
    for k in ("6.1.0-47-amd64", "6.1.0-50-amd64"):
        write(root, f"/boot/vmlinuz-{k}")
        write(root, f"/boot/config-{k}", "CONFIG_MODULE_SIG=y\nCONFIG_MODULE_SIG_HASH=\"sha256\"\n")
        os.makedirs(os.path.join(root, f"lib/modules/{k}/kernel"))
    write(root, "/lib/modules/6.1.0-50-amd64/modules.dep", "updates/gdrcopy/gdrdrv.ko: extra/nvidia.ko\nextra/nvidia.ko:\n")
    write(root, "/lib/modules/6.1.0-50-amd64/updates/gdrcopy/gdrdrv.ko")
    os.makedirs(os.path.join(root, "usr/src/linux-headers-6.1.0-50-amd64"))
    write(root, "/usr/src/linux-headers-6.1.0-50-amd64/Makefile")
    os.symlink("/usr/src/linux-headers-6.1.0-50-amd64", os.path.join(root, "lib/modules/6.1.0-50-amd64/build"))
    os.makedirs(os.path.join(root, "lib/modules/5.10.0-9-amd64/updates"))  # leftovers of a removed kernel
    for d, lic in (("nvidia-current-535.261.03", "NVIDIA"), ("nvidia-current-open-535.261.03", "Dual MIT/GPL")):
        write(root, f"/usr/src/{d}/dkms.conf", 'PACKAGE_VERSION="535.261.03"\n')
        write(root, f"/usr/src/{d}/nvidia/nv-p2p.h")
        write(root, f"/usr/src/{d}/nvidia/nv-frontend.c", f'MODULE_LICENSE("{lic}");\n')
    stamp = {"component": "lib", "source": "2.6-abc"}
    write(root, "/var/lib/gdrcopy-ansible/build/2.6-abc/lib/.gdrcopy-stamp.json", json.dumps(stamp))
    write(root, "/opt/gdrcopy/2.6/.gdrcopy-install.json", "not json")
    return root


def test_an_image_root(image_root):
    modinfo = "/usr/sbin/modinfo"
    m = FakeModule(tools={"modinfo": modinfo}, outputs={
        (modinfo, "-b", image_root, "-k", "6.1.0-50-amd64", "-F", "version", "nvidia"): (0, "535.261.03\n", ""),
        (modinfo, "-b", image_root, "-k", "6.1.0-50-amd64", "-F", "license", "nvidia"): (0, "Dual MIT/GPL\n", ""),
    })
    r = gdrcopy_info.gather(m, image_root, "/usr/local/cuda", "/var/lib/gdrcopy-ansible/build", "/opt/gdrcopy")
    kernels = {k["release"]: k for k in r["kernel"]["installed"]}
    assert list(kernels) == ["6.1.0-47-amd64", "6.1.0-50-amd64"]  # the leftover 5.10 dir is no kernel
    assert kernels["6.1.0-50-amd64"]["headers"] is True  # through the image's absolute symlink
    assert kernels["6.1.0-47-amd64"]["headers"] is False
    assert kernels["6.1.0-50-amd64"]["sig_hash"] == "sha256"
    assert kernels["6.1.0-50-amd64"]["gdrdrv"] == ["/lib/modules/6.1.0-50-amd64/updates/gdrcopy/gdrdrv.ko"]
    assert kernels["6.1.0-47-amd64"]["gdrdrv"] == []
    nv = r["nvidia"]
    assert (nv["loaded"], nv["version"], nv["flavor"]) == (False, "535.261.03", "open")
    assert nv["version_source"] == "modinfo -k 6.1.0-50-amd64 nvidia"
    assert nv["source_match"]["dir"] == "/usr/src/nvidia-current-open-535.261.03/nvidia"
    assert [t["flavor"] for t in nv["source_trees"]] == ["proprietary", "open"]
    assert r["builds"] == {"/var/lib/gdrcopy-ansible/build/2.6-abc/lib": {"component": "lib", "source": "2.6-abc"}}
    assert r["installs"] == {"/opt/gdrcopy/2.6": {}}


def test_an_explicit_nvidia_source_dir(image_root):
    m = FakeModule()
    r = gdrcopy_info.gather(m, image_root, "/usr/local/cuda", "/b", "/p",
                            nvidia_src_dir="/usr/src/nvidia-current-535.261.03/nvidia")
    assert r["nvidia"]["source_match"]["flavor"] == "proprietary"
    assert r["nvidia"]["source_match"]["reason"] == "set by the user (gdrcopy_nvidia_src_dir)"
    r = gdrcopy_info.gather(m, image_root, "/usr/local/cuda", "/b", "/p", nvidia_src_dir="/nowhere")
    assert "dir" not in r["nvidia"]["source_match"]
    assert "holds no nv-p2p.h" in r["nvidia"]["source_match"]["reason"]
