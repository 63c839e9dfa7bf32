#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Test helper of the secureboot scenario (rotation.yml): sign a module on the controller with the collection's
Python signer, as gdrcopy_build's action plugin does, so the scenario can load it beside the copy the kernel's own
sign-file signed with the same key and hash.

    python_sign.py COLLECTIONS KEY CERT KERNEL HASH IN OUT
"""
import sys

sys.path.insert(0, sys.argv[1])
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_modsign as MS  # noqa: E402


def main(collections, key, cert, kernel, hash_name, src, dest):
    with open(key, "rb") as f:
        private = MS.load_private_key(f.read())
    with open(cert, "rb") as f:
        certificate = MS.load_certificate(f.read())
    with open(src, "rb") as f:
        data = f.read()
    signed = MS.Signer(private, certificate).sign(data, kernel, hash_name)[0]
    with open(dest, "wb") as f:
        f.write(signed)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
