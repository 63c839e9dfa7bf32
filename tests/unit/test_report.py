"""The fleet report (library/gdrcopy_report.py): rows, Markdown, self-contained HTML and JSON, rendered from real
gdrcopy_info results (the H200 device run) and from gdrcopy_info run on the synthetic roots of
test_gdrcopy_info, plus the module run for real by ansible-playbook (files, check mode, changed)."""

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_report as R
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_facts
from conftest import REPO
from test_gdrcopy_info import params, working_module, working_root  # noqa: F401  (fixture)
from test_parsers import COPYBW, COPYLAT_AVG, SANITY_PASSED

DEVICE = REPO / "tests" / "fixtures" / "hosts" / "h200-device-gdrcopy-2.6-tests"


def device_info(name):
    return json.loads((DEVICE / f"info-{name}.json").read_text())


@pytest.fixture
def fleet(working_root):  # noqa: F811  (the imported fixture)
    """Five hosts: the H200 as it is (red), the H200 whose gdrcopy_sanity failed (red), a host that failed before
    status (red), a working host with concerns (amber) and a passing one with bandwidth figures (green)."""
    m = working_module(working_root)
    amber = gdrcopy_facts.gather(m, params(working_root, release="2.6"), gdrcopy_facts.Host(m, working_root, live=True))
    green = dict(copy.deepcopy(amber), concerns=[], health="green")
    installed = device_info("installed")
    passing = {"ran": True, "reason": "", "gpu_id": 0, "sanity": P.parse_sanity(SANITY_PASSED, 0),
               "copybw": P.parse_copybw(COPYBW, 0), "copylat": P.parse_copylat(COPYLAT_AVG, 0)}
    smoke = {"ran": True, "method": "library", "passed": True, "runtime_version": "2.6", "driver_version": "2.6",
             "expected": "2.6", "msg": "gdr_open ok; runtime 2.6, driver 2.6"}
    return {
        "gpu-h200-01": {"info": device_info("asis"), "mode": "host"},
        "gpu-h200-02": {"info": installed, "verify": {"tests": installed["tests"]}, "mode": "host"},
        "gpu-h100-07": {"info": amber, "smoke": smoke, "mode": "host",
                        "pending": ["a reload of gdrdrv is pending: it was in use (gdrcopy_reload_pending)"]},
        "gpu-h100-08": {"info": green, "verify": {"smoke": smoke, "tests": passing}, "mode": "host"},
        "gpu-old-03": {"verify": {"tests": installed["tests"]}},
    }


@pytest.fixture
def report(fleet):
    return R.build_report(fleet, "GPU nodes, rack 12", "2026-11-29 20:05:39 UTC")


def rows(report):
    return {r["host"]: r for r in report["hosts"]}


def test_rows_are_sorted_red_amber_green_and_counted(report):
    assert [r["host"] for r in report["hosts"]] == ["gpu-h200-01", "gpu-h200-02", "gpu-old-03", "gpu-h100-07",
                                                     "gpu-h100-08"]
    assert [r["health"] for r in report["hosts"]] == ["red", "red", "red", "amber", "green"]
    assert report["summary"] == {"red": 3, "amber": 1, "green": 1, "hosts": 5}


def test_the_h200_as_it_is(report):
    row = rows(report)["gpu-h200-01"]
    assert row["blockers"] == [
        "module loading is disabled on this host (kernel.modules_disabled=1): gdrdrv cannot be loaded until reboot",
        "the 2.6 DMA-BUF path cannot replace gdrdrv here: CUDA driver 13.0 < 13.3",
        "libgdrapi is not installed (ldconfig knows no libgdrapi.so.2)"]
    d = row["details"]
    assert (d["kernel"], d["nvidia"], d["cuda_driver"], d["backend"]) == ("6.18.44-fc-v657-gpu", "580.159.04 open",
                                                                          "13.0", "none")
    assert d["gdrcopy"] == "pinned 2.6, library none, driver not loaded"
    assert d["signer"] == "no gdrdrv installed" and d["secure_boot"] == "off"
    assert d["gpus"] == "1 x NVIDIA H200; BAR1 up to 0% used; PCIe x16/x16"
    assert d["load_order"] == "nvidia -> nvidia_uvm" and d["tests"] == "not run" and d["bandwidth"] == ""


def test_a_failed_sanity_is_a_blocker_with_the_test_names(report):
    row = rows(report)["gpu-h200-02"]
    assert row["blockers"][-1] == (
        "gdrcopy_sanity failed 36 of 36 tests: attributes_sanity, basic_child_thread_pins_buffer_cumemalloc, "
        "basic_child_thread_pins_buffer_vmmalloc, basic_cumemalloc, basic_small_buffers_mapping, "
        "basic_unaligned_mapping and 30 more")
    assert row["details"]["tests"] == "sanity 0/36 passed"
    assert row["details"]["gdrcopy"] == "pinned 2.6, library 2.6, driver not loaded"


def test_a_host_without_status_is_red_with_what_verify_recorded(report):
    row = rows(report)["gpu-old-03"]
    assert row["blockers"][0] == R.NO_DATA
    assert row["blockers"][1].startswith("gdrcopy_sanity failed 36 of 36 tests: attributes_sanity, ")
    assert row["details"] == {}


def test_the_amber_host_with_signer_order_and_pending_reload(report):
    row = rows(report)["gpu-h100-07"]
    assert row["blockers"] == []
    assert row["warnings"][-1] == "a reload of gdrdrv is pending: it was in use (gdrcopy_reload_pending)"
    assert "BAR1 of GPU 0 is 93% used" in row["warnings"][0]
    d = row["details"]
    assert d["signer"] == "gdrcopy-ansible module signing key"
    assert d["load_order"] == "nvidia -> ib_core -> nvidia_peermem -> gdrdrv"
    assert d["backend"] == "gdrdrv" and d["secure_boot"] == "on" and d["tests"] == "smoke passed"
    assert d["gdrcopy"] == "pinned 2.6, library 2.6, driver 2.6"


def test_the_green_host_has_its_bandwidth_figures(report):
    d = rows(report)["gpu-h100-08"]["details"]
    assert d["bandwidth"] == ("copybw 131072 B: write 9639 MB/s, read 530 MB/s; copylat 1 B: to GPU 0.09 us, "
                              "from GPU 0.91 us (average)")
    assert d["tests"] == "smoke passed; sanity 28/28 passed"


def test_a_sanity_failure_without_counts_keeps_its_message():
    sanity = P.parse_sanity("Segmentation fault\n", 139)
    assert R.sanity_failure(sanity) == "gdrcopy_sanity failed: gdrcopy_sanity printed no summary line (exit code 139)"
    few = P.parse_sanity("Total: 3, Passed: 2, Failed: 1, Waived: 0\n\nList of failed tests:\n    basic_cumemalloc\n", 1)
    assert R.sanity_failure(few) == "gdrcopy_sanity failed 1 of 3 tests: basic_cumemalloc"


def test_skipped_gpu_tests_say_why():
    verify = {"tests": {"ran": False, "reason": "no NVIDIA GPU on this host: only the GPU-less smoke check applies"}}
    assert R.tests_text(verify, {"ran": True, "passed": True}) == (
        "smoke passed; GPU tests skipped: no NVIDIA GPU on this host: only the GPU-less smoke check applies")


def test_signer_text():
    def info(mod):
        return {"kernel": {"running": "k", "installed": [{"release": "k", "gdrdrv_modules": [mod] if mod else []}]}}
    assert R.signer_text(info({"signer": "key", "ours": True})) == "key (our key)"
    assert R.signer_text(info({"signer": "", "signed": False})) == "unsigned"
    assert R.signer_text(info({"signer": "", "signed": True})) == "signed (signer unknown: no modinfo)"
    assert R.signer_text(info({"signer": "", "signed": None})) == "unknown"
    assert R.signer_text(info(None)) == "no gdrdrv installed"


def test_markdown_reads_as_a_table_then_one_section_per_host(report):
    md = R.render_markdown(report)
    lines = md.splitlines()
    assert lines[0] == "# GPU nodes, rack 12"
    assert lines[2] == "Generated 2026-11-29 20:05:39 UTC: 5 hosts, 1 green, 1 amber, 3 red."
    table = [ln for ln in lines[4:11]]
    assert table[0].startswith("| Host | Health | Kernel | gdrcopy |") and table[1].startswith("|---|---|")
    assert table[2].startswith("| gpu-h200-01 | **RED** | 6.18.44-fc-v657-gpu |")
    assert all(ln.count("|") == table[0].count("|") for ln in table[2:7])  # no cell breaks the table
    assert [ln for ln in lines if ln.startswith("## ")] == [
        "## gpu-h200-01: red", "## gpu-h200-02: red", "## gpu-old-03: red", "## gpu-h100-07: amber",
        "## gpu-h100-08: green"]
    assert "- module loading is disabled on this host (kernel.modules_disabled=1): gdrdrv cannot be loaded until " \
           "reboot" in lines


def test_markdown_escapes_pipes():
    report = R.build_report({"a|b": {}}, "t", "now")
    assert "| a\\|b | **RED** |" in R.render_markdown(report)


def test_html_is_self_contained_escaped_and_has_one_row_per_host(report, fleet):
    fleet["<script>alert(1)</script>"] = {}
    page = R.render_html(R.build_report(fleet, "GPU nodes, rack 12", "now"))
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"https?://|<link|<script|src=|@import|url\(", page)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count('<tr class="red">') == 4 and page.count('<tr class="amber">') == 1
    assert page.count('<tr class="green">') == 1
    assert "CUDA driver 13.0 &lt; 13.3" in page and "copybw 131072 B: write 9639 MB/s" in page


def test_json_is_the_report(report):
    assert json.loads(R.render_json(report)) == report


# --- the module, run for real on the controller --------------------------------------------------------------

def run_module(tmp_path, dest, hosts, check=False):
    playbook = tmp_path / "report.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"gpufleet.gdrcopy.gdrcopy_report": {"dest": str(dest), "hosts": "{{ fleet }}"}, "register": "out"},
        {"ansible.builtin.debug": {"var": "out"}}]}]))
    (tmp_path / "vars.json").write_text(json.dumps({"fleet": hosts, "ansible_python_interpreter": sys.executable}))
    env = dict(os.environ, ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json",
               ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook),
           "-e", "@" + str(tmp_path / "vars.json")] + (["--check"] if check else [])
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(re.search(r'"out": (\{.*?\n    \})', r.stdout, re.S).group(1))


def test_the_module_writes_three_files_and_changes_only_when_the_fleet_does(tmp_path, fleet):
    dest = tmp_path / "reports"
    out = run_module(tmp_path, dest, fleet, check=True)
    assert out["changed"] is True and not dest.exists()  # check mode writes nothing
    out = run_module(tmp_path, dest, fleet)
    assert out["changed"] is True and out["summary"] == {"red": 3, "amber": 1, "green": 1, "hosts": 5}
    assert sorted(os.listdir(dest)) == ["gdrcopy-report.html", "gdrcopy-report.json", "gdrcopy-report.md"]
    assert out["red_hosts"]["gpu-h200-01"].startswith("module loading is disabled")
    assert run_module(tmp_path, dest, fleet)["changed"] is False  # the same fleet: only the time stamp moved
    del fleet["gpu-old-03"]
    assert run_module(tmp_path, dest, fleet)["changed"] is True


def test_ansible_doc_renders_the_module():
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    r = subprocess.run([str(Path(sys.executable).parent / "ansible-doc"), "-t", "module", "gpufleet.gdrcopy.gdrcopy_report"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "RETURN VALUES" in r.stdout and "ERROR" not in r.stderr, r.stderr
