# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: proxy_env
short_description: gdrcopy_proxy_env checked and made into a play's environment
description:
  - The proxy variables the plays that download or install set on every task (C(environment)), so that the
    controller's download of the release and the hosts' package manager (apt, dnf) reach the network through a proxy.
  - A mapping of the proxy names C(http_proxy), C(https_proxy), C(ftp_proxy), C(all_proxy) and C(no_proxy) (lower or
    upper case) to strings. A C(*_proxy) value is one URL (C(http), C(https), C(socks5) or C(socks5h); user, port and
    a final C(/) allowed); C(no_proxy) is a comma-separated list of host names, domains, addresses and networks.
  - Anything else fails the first task of the play, before anything changes, with one sentence naming
    C(gdrcopy_proxy_env); an empty mapping (the default) sets nothing.
  - A package manager's own proxy configuration (C(/etc/apt/apt.conf.d), C(dnf.conf)) keeps working without it.
version_added: "0.3.0"
author: gdrcopy-ansible contributors (@gpufleet)
options:
  _input:
    description: The value of C(gdrcopy_proxy_env).
    type: raw
    required: true
"""

EXAMPLES = r"""
# inventory group_vars: every download and package install of the plays goes through the proxy
# gdrcopy_proxy_env:
#   https_proxy: http://proxy.example.org:3128
#   http_proxy: http://proxy.example.org:3128
#   no_proxy: localhost,127.0.0.1,.cluster.example.org
- name: Show the environment a play sets
  ansible.builtin.debug:
    msg: "{{ gdrcopy_proxy_env | default({}) | gpufleet.gdrcopy.proxy_env }}"
"""

RETURN = r"""
_value:
  description: The same mapping, with string keys and values.
  type: dict
"""

import re

from ansible.errors import AnsibleFilterError

NAMES = ("http_proxy", "https_proxy", "ftp_proxy", "all_proxy", "no_proxy")
# scheme://[user[:password]@]host[:port][/]: RFC 3986 characters of the authority, nothing that ends a shell word
# or a line.
_PROXY = re.compile(r"^(https?|socks5h?)://[A-Za-z0-9._~%!$&'()*+,;=:@\[\]-]{1,2000}/?\Z")
_NO_PROXY = re.compile(r"^[A-Za-z0-9.*:/\[\]_-]+(,[A-Za-z0-9.*:/\[\]_-]+)*\Z")


def _fail(why):
    raise AnsibleFilterError(
        "gdrcopy_proxy_env %s: give a mapping of %s (lower or upper case) to a proxy URL such as "
        "http://proxy.example.org:3128, and no_proxy a comma-separated list of hosts, or leave it unset" % (
            why, ", ".join(NAMES)))


def proxy_env(value):
    """gdrcopy_proxy_env as a play's environment: {name: value} for the proxy names only, each value checked."""
    if value is None or value == "":
        return {}
    if not isinstance(value, dict):
        _fail("is a %s, not a mapping" % type(value).__name__)
    out = {}
    for name, text in value.items():
        if not isinstance(name, str) or name.lower() not in NAMES or name not in (name.lower(), name.upper()):
            _fail("names %r, which is not a proxy variable" % (name,))
        if not isinstance(text, str):
            _fail("gives %s a %s, not a string" % (name, type(text).__name__))
        pattern = _NO_PROXY if name.lower() == "no_proxy" else _PROXY
        if not pattern.match(text):
            # the value may hold a password: name the variable, not the value
            _fail("gives %s a value that is not %s" % (
                name, "a list of hosts" if pattern is _NO_PROXY else "one proxy URL (http, https, socks5, socks5h)"))
        out[str(name)] = str(text)
    return out


class FilterModule(object):
    def filters(self):
        return {"proxy_env": proxy_env}
