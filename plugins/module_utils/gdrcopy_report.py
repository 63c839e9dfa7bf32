# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""The fleet report: rows per host, Markdown, a self-contained HTML page and JSON, from what gdrcopy_info and the
verify step found on every host. Pure functions and the file writer; the action plugin
(plugins/action/gdrcopy_report.py) calls them on the controller."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import html
import json
import os

FILES = {"markdown": "gdrcopy-report.md", "html": "gdrcopy-report.html", "json": "gdrcopy-report.json"}
HEALTH_ORDER = {"red": 0, "amber": 1, "green": 2}
NO_DATA = "no status came back from this host: it failed earlier in this run or was unreachable"


# --- one host --------------------------------------------------------------------------------------------------

def running_gdrdrv(info):
    """The gdrdrv module file of the running kernel (or, for an image, of its newest kernel), or {}."""
    kernel = info.get("kernel", {})
    installed = kernel.get("installed", [])
    match = [k for k in installed if k["release"] == kernel.get("running")] or installed[-1:]
    modules = match[0].get("gdrdrv_modules", []) if match else []
    return modules[0] if modules else {}


def signer_text(info):
    mod = running_gdrdrv(info)
    if not mod:
        return "no gdrdrv installed"
    if mod.get("signer"):
        return mod["signer"] + (" (our key)" if mod.get("ours") else "")
    return {True: "signed (signer unknown: no modinfo)", False: "unsigned"}.get(mod.get("signed"), "unknown")


FAILED_NAMES_SHOWN = 6


def sanity_failure(sanity):
    """gdrcopy_sanity's failure in one sentence, naming at most FAILED_NAMES_SHOWN tests."""
    names = sanity.get("failed_tests") or []
    if not sanity.get("failed"):
        return "gdrcopy_sanity failed: %s" % sanity.get("msg", "")
    shown = ", ".join(names[:FAILED_NAMES_SHOWN]) or "names not printed"
    more = " and %d more" % (len(names) - FAILED_NAMES_SHOWN) if len(names) > FAILED_NAMES_SHOWN else ""
    return "gdrcopy_sanity failed %d of %d tests: %s%s" % (sanity["failed"], sanity["total"], shown, more)


def verify_sentences(verify, smoke):
    """Blockers from the verify step: a failed smoke check or gdrcopy_sanity."""
    out = []
    smoke = verify.get("smoke") or smoke or {}
    if smoke.get("ran") and not smoke.get("passed"):
        out.append("the gdrcopy smoke check failed: %s" % smoke.get("msg", ""))
    sanity = (verify.get("tests") or {}).get("sanity") or {}
    if sanity and not sanity.get("ok"):
        out.append(sanity_failure(sanity))
    return out


def bench_text(tests):
    """copybw and copylat figures in a few words, or ''."""
    parts = []
    bw = (tests.get("copybw") or {}).get("results") or []
    if bw and bw[0].get("write_MBps") is not None:
        parts.append("copybw %s B: write %.0f MB/s, read %.0f MB/s"
                     % (bw[0]["size"], bw[0]["write_MBps"], bw[0]["read_MBps"] or 0))
    lat = (tests.get("copylat") or {}).get("results") or {}
    to_rows, from_rows = lat.get("gdr_copy_to_mapping") or [], lat.get("gdr_copy_from_mapping") or []
    if to_rows and from_rows:
        parts.append("copylat %s B: to GPU %.2f us, from GPU %.2f us (%s)" % (
            to_rows[0]["size"], to_rows[0]["us"], from_rows[0]["us"], tests["copylat"].get("statistic") or "time"))
    return "; ".join(parts)


def tests_text(verify, smoke):
    smoke = verify.get("smoke") or smoke or {}
    tests = verify.get("tests") or {}
    parts = []
    if smoke.get("ran"):
        parts.append("smoke %s" % ("passed" if smoke.get("passed") else "FAILED"))
    sanity = tests.get("sanity") if tests.get("ran") else None
    if sanity:
        parts.append("sanity %d/%d passed%s" % (sanity["passed"], sanity["total"],
                                                ", %d waived" % sanity["waived"] if sanity["waived"] else ""))
    elif tests and not tests.get("ran"):
        parts.append("GPU tests skipped: " + tests.get("reason", ""))
    return "; ".join(parts) or "not run"


def gpu_text(info):
    gpus = info.get("gpus") or []
    if not gpus:
        return "none"
    names = sorted(set(g.get("name") or "?" for g in gpus))
    bar1 = [g["bar1_used_pct"] for g in gpus if g.get("bar1_used_pct") is not None]
    links = sorted(set("x%s/x%s" % (g["link"]["width"], g["link"]["max_width"]) for g in gpus
                       if g.get("link", {}).get("width")))
    text = "%d x %s" % (len(gpus), ", ".join(names))
    if bar1:
        text += "; BAR1 up to %d%% used" % max(bar1)
    if links:
        text += "; PCIe " + ", ".join(links)
    return text


def host_row(name, data):
    """Everything the report says about one host, as plain data."""
    info = data.get("info") or {}
    verify, smoke = data.get("verify") or {}, data.get("smoke") or {}
    if not info.get("health"):
        return {"host": name, "health": "red", "blockers": [NO_DATA] + verify_sentences(verify, smoke),
                "warnings": [], "details": {}}
    blockers = list(info["blockers"]) + verify_sentences(verify, smoke)
    warnings = list(info["concerns"]) + list(data.get("pending") or [])
    health = "red" if blockers else ("amber" if warnings else "green")
    gc, nv = info["gdrcopy"], info["nvidia"]
    details = {
        "mode": data.get("mode") or ("host" if info.get("live") else "image"),
        "kernel": info["kernel"]["running"] or "(image)",
        "gdrcopy": "pinned %s, library %s, driver %s" % (gc["release"] or "-", gc["library_version"] or "none",
                                                         gc["driver_version"] or ("loaded" if info["gdrdrv"]["loaded"]
                                                                                  else "not loaded")),
        "nvidia": ("%s %s%s" % (nv["version"], nv["flavor"], "" if nv["loaded"] else " (not loaded)")
                   if nv["version"] else "none"),
        "cuda_driver": info["cuda"].get("driver_version") or "unknown",
        "backend": info["backend"]["active"],
        "backend_reason": info["backend"]["reason"],
        "signer": signer_text(info),
        "secure_boot": {True: "on", False: "off"}.get(info["secure_boot"]["enabled"], "unknown"),
        "mok": info["secure_boot"]["mok"]["state"],
        "load_order": " -> ".join(info["load_order"]) or "nothing loaded",
        "gpus": gpu_text(info),
        "tests": tests_text(verify, smoke),
        "bandwidth": bench_text(verify.get("tests") or {}),
    }
    return {"host": name, "health": health, "blockers": blockers, "warnings": warnings, "details": details}


def build_report(hosts, title, generated):
    """The whole report as plain data: rows sorted red first, then amber, then green, then by name."""
    rows = sorted((host_row(name, data) for name, data in hosts.items()),
                  key=lambda r: (HEALTH_ORDER[r["health"]], r["host"]))
    summary = dict((h, sum(r["health"] == h for r in rows)) for h in HEALTH_ORDER)
    summary["hosts"] = len(rows)
    return {"title": title, "generated": generated, "summary": summary, "hosts": rows}


# --- Markdown --------------------------------------------------------------------------------------------------

MD_COLUMNS = (("Kernel", "kernel"), ("gdrcopy", "gdrcopy"), ("NVIDIA", "nvidia"), ("CUDA", "cuda_driver"),
              ("Backend", "backend"), ("Signer", "signer"), ("Bandwidth", "bandwidth"))
HEALTH_MARK = {"green": "GREEN", "amber": "AMBER", "red": "**RED**"}


def md_cell(text):
    return (text or "-").replace("|", "\\|").replace("\n", " ")


def render_markdown(report):
    s = report["summary"]
    lines = ["# %s" % report["title"], "",
             "Generated %s: %d hosts, %d green, %d amber, %d red."
             % (report["generated"], s["hosts"], s["green"], s["amber"], s["red"]), "",
             "| Host | Health | " + " | ".join(c[0] for c in MD_COLUMNS) + " |",
             "|---|---|" + "---|" * len(MD_COLUMNS)]
    for row in report["hosts"]:
        cells = [md_cell(row["details"].get(c[1])) for c in MD_COLUMNS]
        lines.append("| %s | %s | %s |" % (md_cell(row["host"]), HEALTH_MARK[row["health"]], " | ".join(cells)))
    for row in report["hosts"]:
        lines += ["", "## %s: %s" % (row["host"], row["health"])]
        lines += md_list("Blockers", row["blockers"]) + md_list("Warnings", row["warnings"])
        if row["details"]:
            lines += ["", "| | |", "|---|---|"]
            lines += ["| %s | %s |" % (key.replace("_", " "), md_cell(value)) for key, value in row["details"].items()]
    return "\n".join(lines) + "\n"


def md_list(heading, items):
    return ["", "%s:" % heading, ""] + ["- %s" % item for item in items] if items else []


# --- HTML ------------------------------------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:2rem;color:#1d2330;
background:#f6f7f9}
h1{font-size:1.5rem;margin:0 0 .25rem}
.meta{color:#5b6475;margin-bottom:1.25rem}
.counts span{display:inline-block;margin-right:.75rem;padding:.25rem .75rem;border-radius:1rem;font-weight:600}
table.fleet{border-collapse:collapse;width:100%;background:#fff;box-shadow:0 1px 3px rgba(0,0,0,.12)}
table.fleet th{background:#2b3445;color:#fff;text-align:left;padding:.5rem .6rem;font-size:.85rem}
table.fleet td{border-top:1px solid #e3e6eb;padding:.5rem .6rem;vertical-align:top;font-size:.85rem}
.pill{display:inline-block;min-width:4rem;text-align:center;padding:.15rem .5rem;border-radius:1rem;
font-weight:700;font-size:.75rem;text-transform:uppercase}
span.green{background:#d8f3dc;color:#1b5e20}span.amber{background:#ffe8b0;color:#7a4b00}
span.red{background:#ffd5d2;color:#8e1b10}
tr.red td{background:#fffafa}tr.red td:first-child{border-left:5px solid #d93025}
tr.amber td:first-child{border-left:5px solid #f2a600}tr.green td:first-child{border-left:5px solid #2e7d32}
table.fleet td:first-child{width:40%}
ul.blockers li{color:#8e1b10}ul.warnings li{color:#7a4b00}
ul{margin:.25rem 0;padding-left:1.1rem}
details{margin-top:.35rem}summary{cursor:pointer;color:#3b5bdb}
dl{display:grid;grid-template-columns:max-content auto;gap:.15rem .75rem;margin:.4rem 0}dt{color:#5b6475}
"""
HTML_COLUMNS = (("Kernel", "kernel"), ("gdrcopy", "gdrcopy"), ("NVIDIA / CUDA", None), ("Backend", "backend"),
                ("Signer", "signer"), ("Tests and bandwidth", None))


def e(text):
    return html.escape("%s" % (text if text not in (None, "") else "-"))


def html_list(css, items):
    return '<ul class="%s">%s</ul>' % (css, "".join("<li>%s</li>" % e(i) for i in items)) if items else ""


def html_row(row):
    d = row["details"]
    cells = [e(d.get("kernel")), e(d.get("gdrcopy")),
             "%s<br>CUDA %s" % (e(d.get("nvidia")), e(d.get("cuda_driver"))), e(d.get("backend")),
             e(d.get("signer")), e(d.get("tests")) + ("<br>" + e(d["bandwidth"]) if d.get("bandwidth") else "")
             ] if d else [""] * 6
    details = ""
    if d:
        details = "<details><summary>details</summary><dl>%s</dl></details>" % "".join(
            "<dt>%s</dt><dd>%s</dd>" % (e(k.replace("_", " ")), e(v)) for k, v in d.items())
    first = '<b>%s</b> <span class="pill %s">%s</span>%s%s%s' % (
        e(row["host"]), row["health"], row["health"], html_list("blockers", row["blockers"]),
        html_list("warnings", row["warnings"]), details)
    return '<tr class="%s"><td>%s</td>%s</tr>' % (row["health"], first, "".join("<td>%s</td>" % c for c in cells))


def render_html(report):
    s = report["summary"]
    counts = "".join('<span class="%s">%d %s</span>' % (h, s[h], h) for h in ("red", "amber", "green"))
    head = "".join("<th>%s</th>" % e(c[0]) for c in HTML_COLUMNS)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style>"
            "</head><body><h1>%s</h1><div class=\"meta\">Generated %s &middot; %d hosts</div>"
            "<div class=\"counts\">%s</div><br><table class=\"fleet\"><thead><tr><th>Host</th>%s</tr></thead>"
            "<tbody>%s</tbody></table></body></html>\n" % (
                e(report["title"]), CSS, e(report["title"]), e(report["generated"]), s["hosts"], counts, head,
                "".join(html_row(r) for r in report["hosts"])))


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
