#!/usr/bin/env python3
"""Test-only ssh ProxyCommand that cuts a host off in the middle of a run (fault case 9).

    ssh -o ProxyCommand='python3 cut_proxy.py --count FILE --allow N %h %p' ...

Relays stdin/stdout to HOST:PORT for the first N connections counted in FILE (shared by every ssh of the run,
under a lock); from connection N+1 on it refuses at once, and ssh reports the host unreachable, as when a node
drops off the network. --allow -1 relays every connection.
"""

import argparse
import fcntl
import os
import selectors
import socket
import sys


def take_ticket(count_file: str) -> int:
    """Increment the connection count in count_file and return the new value (safe across processes)."""
    fd = os.open(count_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.read(fd, 32).decode().strip()
        n = int(raw or 0) + 1
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, f"{n}\n".encode())
        return n
    finally:
        os.close(fd)


def relay(sock: socket.socket, stdin: int = 0, stdout: int = 1) -> None:
    """Copy stdin to the socket and the socket to stdout until the socket closes."""
    sel = selectors.DefaultSelector()
    sel.register(stdin, selectors.EVENT_READ, "in")
    sel.register(sock, selectors.EVENT_READ, "sock")
    while True:
        for key, _ in sel.select():
            if key.data == "in":
                data = os.read(stdin, 65536)
                if data:
                    sock.sendall(data)
                else:
                    sel.unregister(stdin)
                    sock.shutdown(socket.SHUT_WR)
            else:
                data = sock.recv(65536)
                if not data:
                    return
                os.write(stdout, data)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", required=True, help="file counting this run's connections")
    p.add_argument("--allow", type=int, required=True, help="connections relayed before the cut (-1: all)")
    p.add_argument("host")
    p.add_argument("port", type=int)
    a = p.parse_args(argv)
    n = take_ticket(a.count)
    if 0 <= a.allow < n:
        print(f"cut_proxy: connection {n} refused: {a.host} is cut off after {a.allow}", file=sys.stderr)
        return 255
    with socket.create_connection((a.host, a.port), timeout=30) as sock:
        sock.settimeout(None)
        relay(sock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
