#!/usr/bin/env python3
"""Pick the test image's second kernel: the newest other ABI of the running kernel's series and flavour.

    apt-cache pkgnames linux-headers- | kernel_abi.py CURRENT

CURRENT is the ABI that linux-image-amd64 pulls in (bookworm: 6.1.0-50-amd64; trixie: 6.12.117+deb13-amd64). The
names read on standard input are package names (linux-headers-<abi>); printed is the newest <abi> of the same
series (6.1.0-<n> on bookworm, 6.12.<n>+deb13[.<m>] on trixie) and flavour (amd64, not cloud-amd64 or rt-amd64)
other than CURRENT, or nothing (exit 1) when the archive has none. Test-only (tests/harness/build-image.sh).
"""

from __future__ import annotations

import re
import sys

# <upstream version>[-<abi number>][+deb<release>[.<rebuild>]]-<flavour>: 6.1.0-50-amd64, 6.12.117+deb13-amd64,
# 6.12.115+deb13.1-amd64. The series is major.minor (6.1, 6.12); the flavour is what follows the ABI.
ABI = re.compile(r"^(?P<major>\d+)\.(?P<minor>\d+)\.(?P<patch>\d+)(?:-(?P<abi>\d+))?"
                 r"(?:\+deb(?P<deb>\d+)(?:\.(?P<rebuild>\d+))?)?-(?P<flavour>[a-z0-9][a-z0-9-]*)$")


def parse(abi: str):
    """(series, flavour, sort key) of a kernel ABI name, or None for a name of another shape."""
    m = ABI.match(abi)
    if not m:
        return None
    n = {k: int(v) if v and v.isdigit() else v for k, v in m.groupdict().items()}
    key = (n["major"], n["minor"], n["patch"], n["abi"] or 0, n["rebuild"] or 0)
    return (n["major"], n["minor"]), n["flavour"], key


def pick_other(current: str, names) -> str | None:
    """The newest ABI among linux-headers-<abi> names with current's series and flavour, other than current."""
    mine = parse(current)
    if mine is None:
        raise ValueError("not a Debian kernel ABI name: %r" % current)
    found = []
    for name in names:
        name = name.strip()
        if not name.startswith("linux-headers-"):
            continue
        abi = name[len("linux-headers-"):]
        other = parse(abi)
        if other and abi != current and other[:2] == mine[:2]:
            found.append((other[2], abi))
    return max(found)[1] if found else None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    other = pick_other(argv[0], sys.stdin)
    if other is None:
        return 1
    print(other)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
