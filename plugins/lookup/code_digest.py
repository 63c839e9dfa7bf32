# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: code_digest
short_description: The sha256 of the code this collection runs
description:
  - Digests, on the controller, every file the collection's roles and playbooks run - each role's C(defaults),
    C(files), C(handlers), C(meta), C(tasks), C(templates) and C(vars), the plugins, the playbooks, and
    C(site.yml), C(ansible.cfg) and C(meta/runtime.yml) where they exist - by path relative to the collection
    root, so the same code digests the same from any checkout or install.
  - Documentation (READMEs, C(docs/)) is left out; a README edit is no reason to rerun a converged host.
  - Preflight records the digest with a verified run; a run whose code digests differently is not converged.
version_added: "0.1.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  _terms:
    description: The collection root to digest. Default - the root of the collection this plugin belongs to.
    type: list
    elements: path
    required: false
"""

EXAMPLES = r"""
- name: Digest the code of this run
  ansible.builtin.set_fact:
    code: "{{ lookup('gpufleet.gdrcopy.code_digest') }}"
"""

RETURN = r"""
_raw:
  description: One sha256 (64 lowercase hex digits) per root.
  type: list
  elements: str
"""

import hashlib
import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

ROLE_DIRS = ("defaults", "files", "handlers", "meta", "tasks", "templates", "vars")
# The collection root: plugins/lookup/code_digest.py -> ../../..
OWN_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def code_files(root):
    """The files the collection runs, as sorted paths relative to root."""
    found = []
    roles = os.path.join(root, "roles")
    for role in sorted(os.listdir(roles)) if os.path.isdir(roles) else []:
        for sub in ROLE_DIRS:
            found.extend(_walk(root, os.path.join("roles", role, sub)))
    found.extend(p for p in _walk(root, "plugins") if p.endswith(".py"))
    # The entry point and the checkout's own settings (site.yml imports playbooks/site.yml; ansible.cfg sets the
    # strategy, become and the paths), where they exist: an installed collection has neither.
    found.extend(n for n in ("site.yml", "ansible.cfg", "meta/runtime.yml") if os.path.isfile(os.path.join(root, n)))
    playbooks = os.path.join(root, "playbooks")
    if os.path.isdir(playbooks):
        found.extend(os.path.join("playbooks", n) for n in os.listdir(playbooks)
                     if n.endswith((".yml", ".yaml")) and os.path.isfile(os.path.join(playbooks, n)))
    return sorted(found)


def _walk(root, rel):
    top = os.path.join(root, rel)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in filenames:
            if not name.endswith((".pyc", ".pyo")):
                yield os.path.relpath(os.path.join(dirpath, name), root)


def digest(root):
    """sha256 over the relative paths (one a line) and then the content of each file in that order."""
    files = code_files(root)
    h = hashlib.sha256()
    h.update(("\n".join(files) + "\n").encode("utf-8"))
    for rel in files:
        with open(os.path.join(root, rel), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        del variables, kwargs  # no options besides the terms
        roots = terms or [OWN_ROOT]
        out = []
        for root in roots:
            if not os.path.isdir(os.path.join(root, "roles")):
                raise AnsibleLookupError("code_digest: %s is no collection root (it has no roles/)" % root)
            out.append(digest(root))
        return out
