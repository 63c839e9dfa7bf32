# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""The fleet report: one row of structured data per host, the hosts grouped by the codes of their findings
(module_utils/gdrcopy_verdict), rendered as Markdown (120 columns), one self-contained HTML page (filter box and
health toggles in inline script, nothing fetched) and JSON for programs (schema_version, docs/report.schema.json).
Pure functions and the file writer; the action plugin (plugins/action/gdrcopy_report.py) calls them on the
controller."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import html
import json
import os
import textwrap

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_verdict as V

SCHEMA_VERSION = 1
FILES = {"markdown": "gdrcopy-report.md", "html": "gdrcopy-report.html", "json": "gdrcopy-report.json"}
HEALTH_ORDER = {"red": 0, "amber": 1, "green": 2}
SEVERITY_ORDER = {"blocker": 0, "concern": 1}
NO_DATA = "no status came back from this host: it failed earlier in this run or was unreachable"
# the roles' exported facts that say what is left to do (status.yml passes their sentences as `pending`)
PENDING_CODES = (("gdrcopy_reboot_required", "reboot_required"), ("gdrcopy_reload_pending", "reload_pending"),
                 ("mok_signing_enrollment_pending", "mok_enrollment_pending"))


# --- one host: findings -----------------------------------------------------------------------------------------

FAILED_NAMES_SHOWN = 6


def sanity_failure(sanity):
    """gdrcopy_sanity's failure in one sentence, naming at most FAILED_NAMES_SHOWN tests."""
    names = sanity.get("failed_tests") or []
    if not sanity.get("failed"):
        return "gdrcopy_sanity failed: %s" % sanity.get("msg", "")
    shown = ", ".join(names[:FAILED_NAMES_SHOWN]) or "names not printed"
    more = " and %d more" % (len(names) - FAILED_NAMES_SHOWN) if len(names) > FAILED_NAMES_SHOWN else ""
    return "gdrcopy_sanity failed %d of %d tests: %s%s" % (sanity["failed"], sanity["total"], shown, more)


def verify_findings(verify, smoke):
    """Blockers from the verify step: a failed smoke check or gdrcopy_sanity."""
    out = []
    smoke = verify.get("smoke") or smoke or {}
    if smoke.get("ran") and not smoke.get("passed"):
        out.append(V.finding("smoke_failed", "the gdrcopy smoke check failed: %s" % smoke.get("msg", "")))
    sanity = (verify.get("tests") or {}).get("sanity") or {}
    if sanity and not sanity.get("ok"):
        out.append(V.finding("sanity_failed", sanity_failure(sanity)))
    return out


def pending_findings(pending):
    """The roles' "left to do" sentences (status.yml's pending: each names its fact) as concerns."""
    out = []
    for sentence in pending or []:
        code = next((c for fact, c in PENDING_CODES if fact in sentence), "reload_pending")
        out.append(V.finding(code, sentence))
    return out


def host_findings(info, verify, smoke, pending):
    """Every finding of a host: gdrcopy_info's, then verify's, then what the roles left to do."""
    found = list(info.get("findings") or [])
    return V.unique(found + verify_findings(verify, smoke) + pending_findings(pending))


# --- one host: structured details ---------------------------------------------------------------------------------

def gdrdrv_kernels(info):
    """The installed kernels that have a gdrdrv module."""
    return [k["release"] for k in info.get("kernel", {}).get("installed", []) if k.get("gdrdrv")]


def tests_details(verify, smoke):
    smoke = verify.get("smoke") or smoke or {}
    tests = verify.get("tests") or {}
    out = {"smoke": ("passed" if smoke.get("passed") else "failed") if smoke.get("ran") else "not run",
           "sanity": None, "skipped": "", "copybw": None, "copylat": None}
    sanity = tests.get("sanity") if tests.get("ran") else None
    if sanity:
        out["sanity"] = {"passed": sanity["passed"], "total": sanity["total"], "waived": sanity.get("waived") or 0}
    elif tests and not tests.get("ran"):
        out["skipped"] = tests.get("reason", "")
    bw = (tests.get("copybw") or {}).get("results") or []
    if bw and bw[0].get("write_MBps") is not None:
        out["copybw"] = {"size": bw[0]["size"], "write_MBps": bw[0]["write_MBps"], "read_MBps": bw[0]["read_MBps"] or 0}
    lat = (tests.get("copylat") or {}).get("results") or {}
    to_rows, from_rows = lat.get("gdr_copy_to_mapping") or [], lat.get("gdr_copy_from_mapping") or []
    if to_rows and from_rows:
        out["copylat"] = {"size": to_rows[0]["size"], "to_gpu_us": to_rows[0]["us"], "from_gpu_us": from_rows[0]["us"],
                          "statistic": tests["copylat"].get("statistic") or "time"}
    return out


GPU_KEYS = ("index", "name", "uuid", "bus_id", "bar1_total_mib", "bar1_used_pct", "numa_node", "cpu_affinity")


def gpu_details(gpu):
    """One GPU for the report; a saved result from before the one GPU schema gets its fields' types."""
    out = dict((k, gpu.get(k)) for k in GPU_KEYS)
    out["bus_id"] = P.smi_bus_to_sysfs(out["bus_id"] or "")
    out["index"] = P.parse_int("%s" % out["index"]) if out["index"] is not None else None
    for key in ("name", "uuid", "cpu_affinity"):
        out[key] = out[key] or ""
    out["numa_node"] = -1 if out["numa_node"] is None else out["numa_node"]
    link = gpu.get("link") or {}
    out["link_width"], out["link_max_width"] = link.get("width"), link.get("max_width")
    out["fabric_state"] = (gpu.get("fabric") or {}).get("state", "")
    out["nvlink_peers"] = (gpu.get("nvlink") or {}).get("peers", {})
    return out


def signing_details(info):
    sign = info.get("signing") or {}
    mod = V.running_gdrdrv(info)
    verdict = sign.get("gdrdrv") or {}
    return {"enforced": sign.get("enforced"), "enforced_by": sign.get("enforced_by", []), "hash": sign.get("hash", ""),
            "secure_boot": info["secure_boot"]["enabled"], "mok": info["secure_boot"]["mok"]["state"],
            "gdrdrv_installed": bool(mod), "signed": mod.get("signed"), "signer": mod.get("signer", ""),
            "ours": mod.get("ours"), "accepted": verdict.get("accepted"), "why": verdict.get("why", "")}


def host_details(info, verify, smoke, mode):
    gc, nv = info["gdrcopy"], info["nvidia"]
    # gdrdrv 2.5+ says its version in /proc/driver/gdrdrv/params; an older loaded one: its module file's (modinfo)
    driver = gc["driver_version"] or (V.running_gdrdrv(info).get("version", "") if info["gdrdrv"]["loaded"] else "")
    return {
        "mode": mode or ("host" if info.get("live") else "image"),
        "kernel": info["kernel"]["running"],
        "gdrcopy": {"pinned": gc["release"], "installed": gc.get("installed_release", ""),
                    "library": gc["library_version"], "driver": driver,
                    "driver_loaded": info["gdrdrv"]["loaded"], "kernels": gdrdrv_kernels(info)},
        "nvidia": {"version": nv["version"], "flavor": nv["flavor"], "loaded": nv["loaded"]},
        "cuda_driver": info["cuda"].get("driver_version") or "",
        "backend": {"active": info["backend"]["active"], "reason": info["backend"]["reason"],
                    "configured": info["backend"].get("configured", "")},
        "signing": signing_details(info),
        "load_order": list(info["load_order"]),
        "gpus": [gpu_details(g) for g in info.get("gpus") or []],
        "tests": tests_details(verify, smoke),
    }


def legacy_findings(info):
    """The findings of a gdrcopy_info result older than the codes (a saved result): its sentences under 'other'."""
    return ([V.finding("other_blocker", t) for t in info.get("blockers") or []]
            + [V.finding("other_concern", t) for t in info.get("concerns") or []])


def host_row(name, data):
    """Everything the report says about one host, as plain data."""
    info = data.get("info") or {}
    verify, smoke = data.get("verify") or {}, data.get("smoke") or {}
    if not info.get("health"):
        found = [V.finding("no_status", NO_DATA)] + verify_findings(verify, smoke)
        return {"host": name, "health": "red", "findings": found, "details": None}
    if "findings" not in info:
        info = dict(info, findings=legacy_findings(info))
    found = host_findings(info, verify, smoke, data.get("pending"))
    last = info.get("last_verify") or {}
    shown = {"tests": verify.get("tests") or last.get("tests") or {},
             "smoke": verify.get("smoke") or smoke or last.get("smoke") or {}}
    return {"host": name, "health": V.health(found), "findings": found,
            "details": host_details(info, shown, {}, data.get("mode"))}


def causes(rows):
    """The hosts grouped by finding code, blockers first, then by how many hosts, then in the order the rows (red
    first) name them: [{code, severity, title, remedy, count, hosts}]. A host counts once per code; the remedy is
    the one most of them got."""
    groups = {}
    for row in rows:
        for f in row["findings"]:
            g = groups.setdefault(f["code"], {"code": f["code"], "severity": f["severity"],
                                              "title": V.title(f["code"]), "remedies": {}, "hosts": []})
            if row["host"] not in g["hosts"]:
                g["hosts"].append(row["host"])
                g["remedies"][f["remedy"]] = g["remedies"].get(f["remedy"], 0) + 1
    out = []
    for g in groups.values():
        remedy = sorted(g.pop("remedies").items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        out.append(dict(g, remedy=remedy, count=len(g["hosts"]), hosts=sorted(g["hosts"])))
    first = dict((code, i) for i, code in enumerate(groups))  # the order the rows (red first) name them
    return sorted(out, key=lambda c: (SEVERITY_ORDER[c["severity"]], -c["count"], first[c["code"]]))


def build_report(hosts, title, generated):
    """The whole report as plain data: rows sorted red first, then amber, then green, then by name; generated is
    an ISO 8601 time stamp."""
    rows = sorted((host_row(name, data) for name, data in hosts.items()),
                  key=lambda r: (HEALTH_ORDER[r["health"]], r["host"]))
    summary = dict((h, sum(r["health"] == h for r in rows)) for h in HEALTH_ORDER)
    summary["hosts"] = len(rows)
    return {"schema_version": SCHEMA_VERSION, "title": title, "generated": generated, "summary": summary,
            "causes": causes(rows), "hosts": rows}


# --- words for people (HTML and Markdown say the same) -------------------------------------------------------------

def gdrcopy_text(g):
    installed = " (%s)" % g["installed"] if g["installed"] and g["installed"] != g["library"] else ""
    driver = g["driver"] or ("loaded" if g["driver_loaded"] else "not loaded")
    return "pinned %s, library %s%s, driver %s" % (g["pinned"] or "-", g["library"] or "none", installed, driver)


def nvidia_text(d):
    nv = d["nvidia"]
    text = ("%s %s%s" % (nv["version"], nv["flavor"], "" if nv["loaded"] else " (not loaded)")
            if nv["version"] else "none")
    return "%s, CUDA %s" % (text, d["cuda_driver"] or "unknown")


def signing_text(s):
    if s["enforced"]:
        head = "enforced (%s)" % ", ".join(s["enforced_by"])
    else:
        head = "not enforced" if s["enforced"] is False else "enforcement unknown"
    if s["hash"]:
        head += ", " + s["hash"]
    if not s["gdrdrv_installed"]:
        signer = "no gdrdrv installed"
    elif s["signer"]:
        signer = "signed by " + s["signer"] + (" (our key)" if s["ours"] else "")
    else:
        signer = {True: "signed (signer unknown: no modinfo)", False: "unsigned"}.get(s["signed"], "signer unknown")
    accepted = {True: "accepted", False: "REFUSED", None: ""}[s["accepted"]] if s["gdrdrv_installed"] else ""
    return "; ".join(p for p in (head, signer + (" - " + accepted if accepted else ""),
                                 "Secure Boot %s" % {True: "on", False: "off"}.get(s["secure_boot"], "unknown")) if p)


def gpus_text(gpus):
    if not gpus:
        return "none"
    names = sorted(set(g["name"] or "?" for g in gpus))
    bar1 = [g["bar1_used_pct"] for g in gpus if g["bar1_used_pct"] is not None]
    links = sorted(set("x%s/x%s" % (g["link_width"], g["link_max_width"]) for g in gpus if g["link_width"]))
    peers = max([sum(g["nvlink_peers"].values()) for g in gpus] or [0])
    text = "%d x %s" % (len(gpus), ", ".join(names))
    if bar1:
        text += "; BAR1 up to %d%% used" % max(bar1)
    if links:
        text += "; PCIe " + ", ".join(links)
    if peers:
        text += "; NVLink up to %d links per GPU" % peers
    return text


def tests_text(t):
    parts = []
    if t["smoke"] != "not run":
        parts.append("smoke " + ("passed" if t["smoke"] == "passed" else "FAILED"))
    if t["sanity"]:
        s = t["sanity"]
        parts.append("sanity %d/%d passed%s" % (s["passed"], s["total"], ", %d waived" % s["waived"] if s["waived"]
                                                else ""))
    elif t["skipped"]:
        parts.append("GPU tests skipped: " + t["skipped"])
    if t["copybw"]:
        b = t["copybw"]
        parts.append("copybw %s B: write %.0f MB/s, read %.0f MB/s" % (b["size"], b["write_MBps"], b["read_MBps"]))
    if t["copylat"]:
        lat = t["copylat"]
        parts.append("copylat %s B: to GPU %.2f us, from GPU %.2f us (%s)" % (
            lat["size"], lat["to_gpu_us"], lat["from_gpu_us"], lat["statistic"]))
    return "; ".join(parts) or "not run"


def display(d):
    """The words of a host's details: (column, text) in the order the page and the Markdown show them."""
    if not d:
        return []
    return [("Kernel", d["kernel"] or "(image)"), ("gdrcopy", gdrcopy_text(d["gdrcopy"])),
            ("NVIDIA", nvidia_text(d)), ("Backend", d["backend"]["active"]),
            ("Signing", signing_text(d["signing"])), ("GPUs", gpus_text(d["gpus"])), ("Tests", tests_text(d["tests"]))]


def more_display(d):
    """What the page folds under "more" and Markdown lists after the columns."""
    if not d:
        return []
    g = d["gdrcopy"]["kernels"]
    return [("mode", d["mode"]), ("backend reason", d["backend"]["reason"]),
            ("gdrdrv installed for", ", ".join(g) or "no kernel"), ("MOK", d["signing"]["mok"]),
            ("signature", d["signing"]["why"] or "-"),
            ("load order", " -> ".join(d["load_order"]) or "nothing loaded")] + [
        ("GPU %s" % gpu["index"], "%s %s, %s, NUMA %s, CPUs %s%s" % (
            gpu["name"], gpu["uuid"] or "", gpu["bus_id"], gpu["numa_node"], gpu["cpu_affinity"] or "-",
            ", fabric " + gpu["fabric_state"] if gpu["fabric_state"] not in ("", "N/A") else ""))
        for gpu in d["gpus"]]


# --- Markdown (120 columns) ----------------------------------------------------------------------------------------

WIDTH = 120
HEALTH_MARK = {"green": "GREEN", "amber": "AMBER", "red": "RED"}


def wrap(text, first, rest):
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest, break_long_words=True,
                         break_on_hyphens=False) or [first.rstrip()]


def render_markdown(report):
    s = report["summary"]
    lines = ["# %s" % report["title"], ""]
    lines += wrap("Generated %s: %d hosts, %d red, %d amber, %d green." % (
        report["generated"], s["hosts"], s["red"], s["amber"], s["green"]), "", "")
    if report["causes"]:
        lines += ["", "## Causes", ""]
    for c in report["causes"]:
        lines += wrap("**%d host%s**: %s (%s, `%s`). What to do: %s." % (
            c["count"], "" if c["count"] == 1 else "s", c["title"], c["severity"], c["code"], c["remedy"]), "- ", "  ")
        lines += wrap(", ".join(c["hosts"]), "  Hosts: ", "    ")
    bad = [r for r in report["hosts"] if r["health"] != "green"]
    if bad:
        lines += ["", "## Red and amber hosts"]
    for row in bad:
        lines += ["", "### %s: %s" % (row["host"], HEALTH_MARK[row["health"]]), ""]
        for f, remedy in V.remedies_once(row["findings"]):
            lines += wrap("%s `%s`: %s" % (f["severity"], f["code"], f["text"]), "- ", "  ")
            lines += wrap("what to do: " + remedy, "  ", "  ") if remedy else []
        lines += [""] if row["details"] else []
        for key, value in display(row["details"]) + more_display(row["details"]):
            lines += wrap("%s: %s" % (key, value), "- ", "  ")
    green = [r for r in report["hosts"] if r["health"] == "green"]
    if green:
        lines += ["", "## Green hosts (%d)" % len(green), ""]
    for row in green:
        lines += wrap("%s: %s" % (row["host"], "; ".join(v for k, v in display(row["details"]))), "- ", "  ")
    return "\n".join(lines) + "\n"


# --- HTML --------------------------------------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:1.25rem 2rem;color:#1d2330;
background:#f6f7f9}
h1{font-size:1.4rem;margin:0 0 .2rem}h2{font-size:1.05rem;margin:1rem 0 .4rem}
.meta{color:#5b6475;margin-bottom:.6rem}
.bar{display:flex;gap:.6rem;align-items:center;flex-wrap:wrap;margin-bottom:.6rem}
.bar label{display:inline-flex;align-items:center;gap:.3rem;padding:.2rem .7rem;border-radius:1rem;font-weight:600;
cursor:pointer}
.bar input[type=search]{padding:.3rem .6rem;min-width:22rem;border:1px solid #c4c9d2;border-radius:.4rem}
table{border-collapse:collapse;width:100%;background:#fff;box-shadow:0 1px 3px rgba(0,0,0,.12)}
th{background:#2b3445;color:#fff;text-align:left;padding:.35rem .5rem;font-size:.8rem}
td{border-top:1px solid #e3e6eb;padding:.35rem .5rem;vertical-align:top;font-size:.8rem}
table.causes td{padding:.25rem .5rem}
.pill{display:inline-block;min-width:3.6rem;text-align:center;padding:.1rem .45rem;border-radius:1rem;
font-weight:700;font-size:.7rem;text-transform:uppercase}
.red{background:#ffd5d2;color:#8e1b10}.amber{background:#ffe8b0;color:#7a4b00}.green{background:#d8f3dc;color:#1b5e20}
.blocker{background:#ffd5d2;color:#8e1b10}.concern{background:#ffe8b0;color:#7a4b00}
tr.red td:first-child{border-left:5px solid #d93025}tr.amber td:first-child{border-left:5px solid #f2a600}
tr.green td:first-child{border-left:5px solid #2e7d32}tr.green td{padding-top:.2rem;padding-bottom:.2rem}
td.host{width:34%}ul{margin:.2rem 0;padding-left:1rem}li.blocker,li.concern{background:none}
li.blocker{color:#8e1b10}li.concern{color:#7a4b00}.remedy{color:#3d4656}.remedy:before{content:"\\2192  "}
details{margin-top:.2rem}summary{cursor:pointer;color:#3b5bdb}.hosts{color:#5b6475}
dl{display:grid;grid-template-columns:max-content auto;gap:.1rem .6rem;margin:.3rem 0}dt{color:#5b6475}
.hidden{display:none}.count{font-weight:700;white-space:nowrap}code{font-size:.75rem;color:#5b6475}
"""
# The filter and the toggles: inline, nothing fetched; rows carry their health and their text to match. A link to
# gdrcopy-report.html#q=<words> opens the page filtered.
SCRIPT = """
(function(){var q=document.getElementById('filter'),boxes=document.querySelectorAll('.bar input[type=checkbox]'),
rows=document.querySelectorAll('#hosts tbody tr'),shown=document.getElementById('shown');
function apply(){var words=q.value.toLowerCase().split(/\\s+/).filter(Boolean),on={},n=0;
boxes.forEach(function(b){on[b.value]=b.checked;});
rows.forEach(function(r){var t=r.getAttribute('data-text'),ok=on[r.getAttribute('data-health')]&&
words.every(function(w){return t.indexOf(w)>=0;});r.classList.toggle('hidden',!ok);if(ok){n++;}});
shown.textContent=n+' of '+rows.length+' hosts shown';}
q.addEventListener('input',apply);boxes.forEach(function(b){b.addEventListener('change',apply);});
document.querySelectorAll('a.cause').forEach(function(a){a.addEventListener('click',function(ev){ev.preventDefault();
q.value=a.getAttribute('data-code');apply();});});
if(location.hash.indexOf('#q=')===0){q.value=decodeURIComponent(location.hash.slice(3));}apply();})();
"""
HOST_COLUMNS = ("Kernel", "gdrcopy", "NVIDIA", "Backend", "Signing", "GPUs", "Tests")


def e(text):
    return html.escape("%s" % (text if text not in (None, "") else "-"))


def html_findings(findings):
    if not findings:
        return ""
    return "<ul>%s</ul>" % "".join('<li class="%s">%s <code>%s</code>%s</li>' % (
        f["severity"], e(f["text"]), e(f["code"]), '<div class="remedy">%s</div>' % e(remedy) if remedy else "")
        for f, remedy in V.remedies_once(findings))


def html_row(row):
    d = row["details"]
    shown = dict(display(d))
    more = ""
    if d:
        more = "<details><summary>more</summary><dl>%s</dl></details>" % "".join(
            "<dt>%s</dt><dd>%s</dd>" % (e(k), e(v)) for k, v in more_display(d))
    first = '<b>%s</b> <span class="pill %s">%s</span>%s%s' % (
        e(row["host"]), row["health"], row["health"], html_findings(row["findings"]), more)
    words = " ".join([row["host"], row["health"]] + [f["code"] + " " + f["text"] for f in row["findings"]]
                     + list(shown.values())).lower()
    return '<tr class="%s" data-health="%s" data-text="%s"><td class="host">%s</td>%s</tr>' % (
        row["health"], row["health"], html.escape(words), first,
        "".join("<td>%s</td>" % e(shown.get(c, "")) for c in HOST_COLUMNS))


HOSTS_FOLDED = 12


def html_cause(c):
    names = ", ".join(c["hosts"][:HOSTS_FOLDED])
    rest = ""
    if c["count"] > HOSTS_FOLDED:
        rest = "<details><summary>and %d more</summary>%s</details>" % (
            c["count"] - HOSTS_FOLDED, e(", ".join(c["hosts"][HOSTS_FOLDED:])))
    return ('<tr><td><span class="pill %s">%s</span></td><td class="count">%d host%s</td><td><a href="#" class="cause" '
            'data-code="%s"><b>%s</b></a> <code>%s</code><div class="remedy">%s</div></td><td class="hosts">%s%s</td>'
            '</tr>' % (c["severity"], c["severity"], c["count"], "" if c["count"] == 1 else "s", e(c["code"]),
                       e(c["title"]), e(c["code"]), e(c["remedy"]), e(names), rest))


def render_html(report):
    s = report["summary"]
    toggles = "".join('<label class="%s"><input type="checkbox" value="%s" checked> %d %s</label>' % (h, h, s[h], h)
                      for h in ("red", "amber", "green"))
    cause_rows = "".join(html_cause(c) for c in report["causes"])
    causes_table = ('<h2>Causes</h2><table class="causes" id="causes"><thead><tr><th></th><th>Hosts</th><th>Cause and '
                    'what to do</th><th>Which</th></tr></thead><tbody>%s</tbody></table>' % cause_rows
                    if report["causes"] else "<h2>Causes</h2><p>Nothing to report: every host is green.</p>")
    head = "".join("<th>%s</th>" % e(c) for c in HOST_COLUMNS)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style>"
            "</head><body><h1>%s</h1><div class=\"meta\">Generated %s &middot; %d hosts &middot; schema %d</div>"
            "%s<h2>Hosts</h2><div class=\"bar\">%s<input type=\"search\" id=\"filter\" placeholder=\"filter: host, code, "
            "kernel, words...\"><span id=\"shown\"></span></div><table id=\"hosts\"><thead><tr><th>Host</th>%s</tr>"
            "</thead><tbody>%s</tbody></table><script>%s</script></body></html>\n" % (
                e(report["title"]), CSS, e(report["title"]), e(report["generated"]), s["hosts"],
                report["schema_version"], causes_table, toggles, head, "".join(html_row(r) for r in report["hosts"]),
                SCRIPT))


def render_json(report):
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


RENDERERS = {"markdown": render_markdown, "html": render_html, "json": render_json}


# --- I/O -------------------------------------------------------------------------------------------------------

def previous_content(dest):
    """What the JSON report already in dest says, without its time stamp (None when there is none)."""
    try:
        with open(os.path.join(dest, FILES["json"])) as f:
            old = json.load(f)
    except (IOError, OSError, ValueError):
        return None
    old.pop("generated", None)
    return old


def write_report(dest, report):
    if not os.path.isdir(dest):
        os.makedirs(dest)
    paths = {}
    for form, name in FILES.items():
        paths[form] = os.path.join(dest, name)
        tmp = paths[form] + ".tmp"
        with open(tmp, "w") as f:
            f.write(RENDERERS[form](report))
        os.rename(tmp, paths[form])
    return paths
