# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""A command a module must not go on without: run it on the host (gdrcopy_facts.Host), and stop the module with one
sentence naming the command, its exit code and its words when it fails. Used by gdrcopy_mok, gdrcopy_peermem,
gdrcopy_upstream and (the MOK password) gdrcopy_uninstall."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class Failed(Exception):
    """A sentence that fails the host."""


def checked(argv, rc, out, err):
    """out of a command that ran; Failed when it exited non-zero."""
    if rc != 0:
        raise Failed("%s failed (exit %d): %s" % (" ".join(argv), rc, (err or out).strip() or "no output"))
    return out


def must(h, argv):
    """Run argv on the host: its output; Failed when it exits non-zero."""
    return checked(argv, *h.run(argv))


def main(module, work):
    """The common main(): the result of work(module, module.params), or fail_json with the Failed sentence."""
    try:
        result = work(module, module.params)
    except Failed as err:
        module.fail_json(msg=str(err), changes=[])
    module.exit_json(**result)
