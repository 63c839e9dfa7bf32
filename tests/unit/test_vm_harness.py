"""tests/harness/vm.py's pure parts: which mounts belong to an image root (so `unroot` unmounts exactly those,
deepest first, and never deletes a tree with the build host's /dev still mounted in it), and the image key."""

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
