# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Fleet builds: one host of the play compiles each distinct build, the controller keeps it, the others take it.

A build is named by a hash of its stamp (its inputs: release, sha256, kernel, NVIDIA source, flavor, tests), so two
hosts with the same inputs want the same name. The controller's cache holds <name>.tar.gz with its sha256 in
<name>.tar.gz.sha256, written when the controller received it; an entry whose checksum is not the recorded one is
not used (and deleted). Each missing name is compiled and shared by one host of the play that needs it (and may
build, see gdrcopy_fleet_builders): of those, the one with the fewest builds picked so far, so that the compiles
run on different hosts at once; a name no permitted host needs is compiled by each host that needs it. Pure
functions here (the plan); the controller's side is the action plugins gdrcopy_fleet (the plan, run once) and
gdrcopy_build (sharing and taking around the module call).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import SHA256_RE, _path_ok, file_sha256

NAME_RE = re.compile(r"^(lib|driver-[A-Za-z0-9][A-Za-z0-9._+~-]{0,127})-[0-9a-f]{16}\Z")
SUFFIX = ".tar.gz"


class FleetError(Exception):
    pass


def build_name(stamp):
    """The cache name of the build of stamp: lib-<hash16> or driver-<kernel>-<hash16>."""
    digest = hashlib.sha256(json.dumps(stamp, sort_keys=True).encode("utf-8")).hexdigest()[:16]
    if stamp.get("component") == "lib":
        return "lib-" + digest
    return "driver-%s-%s" % (stamp["kernel"], digest)


def lacking(want):
    """The builds one host lacks, [{dir, stamp, name}] in build order (library first).

    want: {lib: {dir, stamp} or None, driver_dir, stamp_base, kernels: [...], builds: {dir: stamp found on disk}}."""
    found = want.get("builds") or {}
    rows = []
    if want.get("lib"):
        rows.append((want["lib"]["dir"], dict(want["lib"]["stamp"])))
    for kernel in want.get("kernels") or []:
        rows.append((os.path.join(want["driver_dir"], kernel), dict(want["stamp_base"], kernel=kernel)))
    return [{"dir": d, "stamp": s, "name": build_name(s)} for d, s in rows if found.get(d) != s]


def recorded_sha256(text):
    """The sha256 of a .sha256 file's text ('<hex>  <file>'), or '' when it holds none."""
    words = (text or "").split()
    return words[0] if words and SHA256_RE.match(words[0]) else ""


def plan(play_hosts, wants, ready, builders=None):
    """Who compiles what and who takes what.

    play_hosts: the play's hosts in order; wants: {host: lacking(...)}; ready: names the controller holds with the
    recorded checksum; builders: hosts that may build for others (None: any host of the play).
    Returns {builders: {name: host}, hosts: {host: {share: [{dir, name}], take: [{dir, name}], own: [name]}}}:
    share = what the host compiles and brings to the controller, take = what it unpacks from there (ready now, or
    shared by its builder in this run), own = what it compiles for itself alone (no permitted host shares it)."""
    allowed = set(play_hosts if builders is None else builders)
    needed_by = {}  # each missing name: the permitted hosts that need it, in play order (names in first-need order)
    for host in play_hosts:
        if host not in allowed:
            continue
        for row in wants.get(host) or []:
            if row["name"] not in ready:
                needed_by.setdefault(row["name"], []).append(host)
    # Spread the compiles: each name goes to the host of those that need it with the fewest picked so far (the
    # first in play order on a tie), so that different builds compile on different hosts at the same time.
    picked, load = {}, {}
    for name, hosts in needed_by.items():
        host = min(hosts, key=lambda h: load.get(h, 0))  # min keeps the first of equals
        picked[name] = host
        load[host] = load.get(host, 0) + 1
    hosts = {}
    for host in play_hosts:
        mine = {"share": [], "take": [], "own": []}
        for row in wants.get(host) or []:
            entry = {"dir": row["dir"], "name": row["name"]}
            if row["name"] in ready or (row["name"] in picked and picked[row["name"]] != host):
                mine["take"].append(entry)
            elif picked.get(row["name"]) == host:
                mine["share"].append(entry)
            else:
                mine["own"].append(row["name"])
        hosts[host] = mine
    return {"builders": picked, "hosts": hosts}


def plan_play(hosts, wants, cache, builders=None, check=False):
    """The plan for hosts (wants: {host: want, see lacking}) after a look at the cache entries the play needs.

    An entry whose checksum is not the recorded one is deleted (in check mode only reported) and built again."""
    lacks = dict((h, lacking(wants[h])) for h in hosts if wants.get(h) is not None)
    names = sorted(set(row["name"] for rows in lacks.values() for row in rows))
    ready, deleted = [], []
    for name in names:
        if cached(cache, name):
            ready.append(name)
        elif any(os.path.exists(p) for p in (entry_path(cache, name), entry_path(cache, name) + ".sha256")):
            if not check:
                drop(cache, name)
            deleted.append(name)
    out = plan([h for h in hosts if h in lacks], lacks, set(ready), builders)
    out.update(ready=ready, deleted=deleted, changed=bool(deleted))
    return out


def check_entries(entries, what):
    """[{dir, name}] with an absolute dir and a well-formed name, or FleetError naming the bad one."""
    out = []
    for i, entry in enumerate(entries or []):
        if not isinstance(entry, dict) or not NAME_RE.match(str(entry.get("name", ""))):
            raise FleetError("%s[%d]: a build name (lib-<16 hex> or driver-<kernel>-<16 hex>) is wanted, got %r"
                             % (what, i, entry))
        path = str(entry.get("dir", ""))
        if not _path_ok(path):
            raise FleetError("%s[%d]: an absolute build directory is wanted, got %r" % (what, i, path))
        out.append({"dir": path, "name": entry["name"]})
    return out


# --- the controller's cache (I/O at the edge) --------------------------------------------------------------

def entry_path(cache, name):
    return os.path.join(cache, name + SUFFIX)


def cached(cache, name):
    """The recorded sha256 of the cache entry name when the file has it, else ''."""
    path = entry_path(cache, name)
    try:
        with open(path + ".sha256") as f:
            recorded = recorded_sha256(f.read())
        return recorded if recorded and file_sha256(path) == recorded else ""
    except (IOError, OSError):
        return ""


def drop(cache, name):
    """Delete a cache entry and its record; True when something was there."""
    gone = False
    for path in (entry_path(cache, name), entry_path(cache, name) + ".sha256"):
        try:
            os.unlink(path)
            gone = True
        except OSError:
            pass
    return gone


def store(cache, name, data):
    """Write data as the entry name, then its record, each through a temporary file and a rename: a reader sees
    the whole entry or none. Returns its sha256."""
    if not NAME_RE.match(name):
        raise FleetError("not a build name: %r" % name)
    if not os.path.isdir(cache):
        os.makedirs(cache, 0o755)
    digest = hashlib.sha256(data).hexdigest()
    path = entry_path(cache, name)
    try:
        os.unlink(path + ".sha256")  # no moment where a new file stands beside the old record
    except OSError:
        pass
    for target, content in ((path, data), (path + ".sha256", ("%s  %s%s\n" % (digest, name, SUFFIX)).encode())):
        tmp = "%s.%d.tmp" % (target, os.getpid())
        with open(tmp, "wb") as f:
            f.write(content)
        os.rename(tmp, target)
    return digest
