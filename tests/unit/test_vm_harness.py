"""tests/harness/vm.py's pure parts: which mounts belong to an image root (so `unroot` unmounts exactly those,
deepest first, and never deletes a tree with the build host's /dev still mounted in it), and the image key; and the
KVM probe's hands off the caller's standard input."""

import os
import sys
import termios
from pathlib import Path

import pytest

from conftest import load_script

HARNESS = Path(__file__).resolve().parents[1] / "harness"
CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"


vm = load_script(HARNESS / "vm.py", "vm_harness")


def test_the_mounts_of_an_image_root_deepest_first():
    """The controller's mountinfo captured while `vm.py root` had /tmp/imgtest/root mounted."""
    text = (CAPTURES / "mountinfo-controller.txt").read_text()
    points = vm.mounts_under(Path("/tmp/imgtest/root"), text)
    assert set(points) == {f"/tmp/imgtest/root/{p}" for p in ("proc", "sys", "dev", "dev/pts", "etc/resolv.conf")}
    assert points.index("/tmp/imgtest/root/dev/pts") < points.index("/tmp/imgtest/root/dev")
    assert vm.mounts_under(Path("/tmp/imgtest"), text) == points  # a parent sees them too
    assert vm.mounts_under(Path("/tmp/imgtest/roo"), text) == []  # a prefix of a name is not a parent


def test_a_tree_with_mounts_is_never_made_into_a_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(vm, "mounts_under", lambda tree: [str(tree / "dev")])
    with pytest.raises(SystemExit, match="still has mounts in it"):
        vm.make_disk(tmp_path, tmp_path / "disk.img", "1G")
    assert not (tmp_path / "disk.img").exists()


def test_the_image_key_follows_the_build_script_and_its_inputs():
    inputs = vm.image_inputs()
    key = vm.image_key(inputs)
    assert key == vm.image_key(dict(inputs)) and len(key) == 16
    assert vm.image_key(dict(inputs, EXTRA_PACKAGES="vim")) != key


kernel_abi = load_script(HARNESS / "kernel_abi.py", "kernel_abi")
# linux-headers-* names of the archive's main suites (2026-12-07): bookworm's two 6.1 ABIs and trixie's two 6.12 ones,
# each with the cloud and rt flavours beside, and the metapackages, which name no ABI.
BOOKWORM = ["linux-headers-6.1.0-50-amd64", "linux-headers-6.1.0-47-amd64", "linux-headers-6.1.0-50-cloud-amd64",
            "linux-headers-6.1.0-47-rt-amd64", "linux-headers-6.1.0-50-common", "linux-headers-amd64",
            "linux-headers-6.1.0-9-amd64"]
TRIXIE = ["linux-headers-6.12.107+deb13-amd64", "linux-headers-6.12.107+deb13-cloud-amd64",
          "linux-headers-6.12.117+deb13-amd64", "linux-headers-6.12.117+deb13-rt-amd64",
          "linux-headers-6.12.117+deb13-common", "linux-headers-6.12.115+deb13.1-amd64", "linux-headers-amd64"]


@pytest.mark.parametrize("current, names, other", [
    ("6.1.0-50-amd64", BOOKWORM, "6.1.0-47-amd64"),  # 47 > 9: numbers, not text
    ("6.1.0-47-amd64", BOOKWORM, "6.1.0-50-amd64"),
    ("6.12.117+deb13-amd64", TRIXIE, "6.12.115+deb13.1-amd64"),  # a rebuild (+deb13.1) is an ABI of its own
    ("6.12.117+deb13-cloud-amd64", TRIXIE, "6.12.107+deb13-cloud-amd64"),  # the same flavour only
    ("6.12.117+deb13-amd64", BOOKWORM, None),  # another series is no second kernel
    ("6.1.0-50-amd64", ["linux-headers-6.1.0-50-amd64"], None),
])
def test_the_image_picks_the_newest_other_abi_of_the_series_and_flavour(current, names, other):
    assert kernel_abi.pick_other(current, names) == other


def test_the_kernel_pick_refuses_what_is_no_abi_name():
    with pytest.raises(ValueError, match="not a Debian kernel ABI"):
        kernel_abi.pick_other("amd64", TRIXIE)
    assert kernel_abi.parse("6.12.117+deb13-amd64")[:2] == ((6, 12), "amd64")


def test_an_image_of_an_unknown_suite_is_refused(monkeypatch):
    monkeypatch.delenv("GDRCOPY_VM_SUITE", raising=False)
    assert vm.image_inputs()["SUITE"] == "bookworm" and vm.image_inputs("trixie")["SUITE"] == "trixie"
    assert vm.image_key(vm.image_inputs("trixie")) != vm.image_key(vm.image_inputs())
    with pytest.raises(SystemExit, match="one of bookworm, trixie"):
        vm.image_inputs("sid")


def test_the_cut_proxy_relays_the_first_connections_then_refuses(tmp_path):
    """tests/harness/cut_proxy.py (fault case 9): a real relay to a local echo server, then the cut."""
    import socket
    import subprocess
    import sys
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def echo():
        for _ in range(2):
            conn, _ = server.accept()
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data.upper())

    threading.Thread(target=echo, daemon=True).start()
    count = tmp_path / "count"
    argv = [sys.executable, str(HARNESS / "cut_proxy.py"), "--count", str(count), "--allow", "2", "127.0.0.1",
            str(port)]
    for _ in range(2):
        r = subprocess.run(argv, input=b"ssh-2.0 hello", capture_output=True, timeout=20)
        assert (r.returncode, r.stdout) == (0, b"SSH-2.0 HELLO")
    r = subprocess.run(argv, input=b"again", capture_output=True, timeout=20)
    assert r.returncode == 255 and r.stdout == b""
    assert b"connection 3 refused" in r.stderr
    assert count.read_text() == "3\n"
    server.close()


# What QEMU does to its standard input with `-serial stdio` (char-stdio.c, qemu_chr_open_stdio): O_NONBLOCK on fd 0
# and, on a terminal, raw mode; both are undone only by an atexit handler, which a SIGKILL never runs.
FAKE_QEMU = """#!{python}
import fcntl, os, sys, termios, time
fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK)
if os.isatty(0):
    attrs = termios.tcgetattr(0)
    attrs[3] &= ~(termios.ECHO | termios.ICANON | termios.ISIG | termios.IEXTEN)
    termios.tcsetattr(0, termios.TCSANOW, attrs)
sys.stdout.buffer.write(b"[    0.5] Run /init as init process\\n")
sys.stdout.flush()
while True:
    time.sleep(60)
"""


@pytest.mark.parametrize("kind", ["pipe", "pty"])
def test_the_kvm_probe_leaves_the_callers_stdin_blocking(kind, tmp_path, monkeypatch):
    """The first `make demo` on a fresh host stopped right after boot: `Ansible requires blocking IO on
    stdin/stdout/stderr. Non-blocking file handles detected: <stdin>`. The KVM probe (vm.kvm_works, run as is)
    started QEMU with `-serial stdio` on the caller's stdin; QEMU set O_NONBLOCK on that file description (and raw
    mode on a terminal) and the probe's SIGKILL left it so. Every QEMU the harness starts gets /dev/null instead.

    The `qemu-system-x86_64` on PATH here is a stand-in, so the test runs without QEMU or /dev/kvm: it does what
    QEMU's stdio chardev does to fd 0 (fcntl O_NONBLOCK, raw mode on a tty), prints the marker the probe waits for,
    and sleeps until the probe kills it. Real QEMU 7.2 does the same: a pipe given to it as stdin comes back
    non-blocking after the kill, a pty non-blocking and in raw mode."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "qemu-system-x86_64"
    fake.write_text(FAKE_QEMU.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GDRCOPY_VM_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: path == "/dev/kvm" or real_access(path, mode, **kw))

    if kind == "pipe":
        ours, other = os.pipe()
    else:
        other, ours = os.openpty()  # stdin is the pty's terminal side
    try:
        tty_before = termios.tcgetattr(ours) if kind == "pty" else None
        assert os.get_blocking(ours)
        saved = os.dup(0)
        try:
            os.dup2(ours, 0)
            assert vm.kvm_works(tmp_path / "image", "6.1.0-test") is True  # the stand-in ran and was killed
            stdin_blocking = os.get_blocking(0)
        finally:
            os.dup2(saved, 0)
            os.close(saved)
        damage = [what for what, bad in [
            ("stdin left non-blocking", not stdin_blocking or not os.get_blocking(ours)),
            ("terminal settings changed", kind == "pty" and termios.tcgetattr(ours) != tty_before)] if bad]
    finally:
        os.close(ours)
        os.close(other)
    assert damage == []


def test_the_vcpus_of_a_vm_follow_gdrcopy_vm_cpus(monkeypatch):
    """make test sets GDRCOPY_VM_CPUS=1 while two scenarios run at once; unset, a VM gets 2 vCPUs where there are
    2 cores; a bad value stops `up` with one sentence."""
    monkeypatch.setenv("GDRCOPY_VM_CPUS", "1")
    assert vm.default_cpus() == 1
    monkeypatch.delenv("GDRCOPY_VM_CPUS")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert vm.default_cpus() == 2
    monkeypatch.setenv("GDRCOPY_VM_CPUS", "two")
    with pytest.raises(SystemExit, match="GDRCOPY_VM_CPUS must be a whole number"):
        vm.default_cpus()
