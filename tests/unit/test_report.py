"""The fleet report (library/gdrcopy_report.py): rows, Markdown, self-contained HTML and JSON, rendered from real
gdrcopy_info results (the H200 device run) and from gdrcopy_info run on the synthetic roots of
test_gdrcopy_info, plus the module run for real by ansible-playbook (files, check mode, changed)."""

import copy
import importlib.util
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
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_verdict as V
from conftest import REPO, need
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
    green = dict(copy.deepcopy(amber), concerns=[], findings=[], health="green")
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
    return R.build_report(fleet, "GPU nodes, rack 12", "2026-11-29T20:05:39Z")


def rows(report):
    return {r["host"]: r for r in report["hosts"]}


def codes(row):
    return [f["code"] for f in row["findings"]]


def texts(row, severity):
    return [f["text"] for f in row["findings"] if f["severity"] == severity]


def test_rows_are_sorted_red_amber_green_and_counted(report):
    assert [r["host"] for r in report["hosts"]] == ["gpu-h200-01", "gpu-h200-02", "gpu-old-03", "gpu-h100-07",
                                                     "gpu-h100-08"]
    assert [r["health"] for r in report["hosts"]] == ["red", "red", "red", "amber", "green"]
    assert report["summary"] == {"red": 3, "amber": 1, "green": 1, "hosts": 5}
    assert report["schema_version"] == R.SCHEMA_VERSION == 1


def test_the_h200_as_it_is(report):
    """A saved gdrcopy_info result from before the codes (the device run of 2026-11-29): its sentences are kept,
    unclassified."""
    row = rows(report)["gpu-h200-01"]
    assert texts(row, "blocker") == [
        "module loading is disabled on this host (kernel.modules_disabled=1): gdrdrv cannot be loaded until reboot",
        "the 2.6 DMA-BUF path cannot replace gdrdrv here: CUDA driver 13.0 < 13.3",
        "libgdrapi is not installed (ldconfig knows no libgdrapi.so.2)"]
    assert set(codes(row)) == {"other_blocker"}
    d = row["details"]
    assert (d["kernel"], d["nvidia"], d["cuda_driver"], d["backend"]["active"]) == (
        "6.18.44-fc-v657-gpu", {"version": "580.159.04", "flavor": "open", "loaded": True}, "13.0", "none")
    assert d["gdrcopy"] == {"pinned": "2.6", "installed": "", "library": "", "driver": "", "driver_loaded": False,
                            "kernels": []}
    shown = dict(R.display(d))
    assert shown["gdrcopy"] == "pinned 2.6, library none, driver not loaded"
    assert shown["Signing"] == "enforcement unknown; no gdrdrv installed; Secure Boot off"
    assert shown["GPUs"] == "1 x NVIDIA H200; BAR1 up to 0% used; PCIe x16/x16"
    assert d["load_order"] == ["nvidia", "nvidia_uvm"] and shown["Tests"] == "not run"


def test_a_failed_sanity_is_a_blocker_with_the_test_names(report):
    row = rows(report)["gpu-h200-02"]
    assert codes(row)[-1] == "sanity_failed"
    assert row["findings"][-1]["text"] == (
        "gdrcopy_sanity failed 36 of 36 tests: attributes_sanity, basic_child_thread_pins_buffer_cumemalloc, "
        "basic_child_thread_pins_buffer_vmmalloc, basic_cumemalloc, basic_small_buffers_mapping, "
        "basic_unaligned_mapping and 30 more")
    assert row["details"]["tests"]["sanity"] == {"passed": 0, "total": 36, "waived": 0}
    assert dict(R.display(row["details"]))["gdrcopy"] == "pinned 2.6, library 2.6, driver not loaded"


def test_a_host_without_status_is_red_with_what_verify_recorded(report):
    row = rows(report)["gpu-old-03"]
    assert codes(row) == ["no_status", "sanity_failed"]
    assert row["findings"][0]["text"] == R.NO_DATA
    assert row["details"] is None  # null for tools: nothing came back, not an empty host


def test_the_amber_host_with_signing_order_and_pending_reload(report):
    row = rows(report)["gpu-h100-07"]
    assert texts(row, "blocker") == []
    assert codes(row) == ["bar1_full", "pcie_link_narrow", "numa_no_rdma", "reload_pending"]
    assert row["findings"][-1]["text"] == "a reload of gdrdrv is pending: it was in use (gdrcopy_reload_pending)"
    d = row["details"]
    # no mok_cert given to that read: whether the kernel accepts the signer is not known from there
    assert d["signing"]["signer"] == "gdrcopy-ansible module signing key" and d["signing"]["accepted"] is None
    assert dict(R.display(d))["Signing"] == (
        "enforced (module.sig_enforce=Y, lockdown=integrity), sha256; signed by gdrcopy-ansible module signing key; "
        "Secure Boot on")
    assert d["load_order"] == ["nvidia", "ib_core", "nvidia_peermem", "gdrdrv"]
    assert d["backend"]["active"] == "gdrdrv" and d["tests"]["smoke"] == "passed"
    assert d["gdrcopy"]["kernels"] == ["6.1.0-50-amd64"]
    assert [g["bus_id"] for g in d["gpus"]] == ["0000:17:00.0", "0000:98:00.0"]


def test_the_green_host_has_its_bandwidth_figures(report):
    d = rows(report)["gpu-h100-08"]["details"]
    assert d["tests"]["copybw"] == {"size": 131072, "write_MBps": 9639.0, "read_MBps": 530.0} or \
        d["tests"]["copybw"]["size"] == 131072
    assert dict(R.display(d))["Tests"] == (
        "smoke passed; sanity 28/28 passed; copybw 131072 B: write 9639 MB/s, read 530 MB/s; copylat 1 B: to GPU "
        "0.09 us, from GPU 0.91 us (average)")


def test_a_sanity_failure_without_counts_keeps_its_message():
    sanity = P.parse_sanity("Segmentation fault\n", 139)
    assert R.sanity_failure(sanity) == "gdrcopy_sanity failed: gdrcopy_sanity printed no summary line (exit code 139)"
    few = P.parse_sanity("Total: 3, Passed: 2, Failed: 1, Waived: 0\n\nList of failed tests:\n    basic_cumemalloc\n", 1)
    assert R.sanity_failure(few) == "gdrcopy_sanity failed 1 of 3 tests: basic_cumemalloc"


def test_skipped_gpu_tests_say_why():
    verify = {"tests": {"ran": False, "reason": "no NVIDIA GPU on this host: only the GPU-less smoke check applies"}}
    assert R.tests_text(R.tests_details(verify, {"ran": True, "passed": True})) == (
        "smoke passed; GPU tests skipped: no NVIDIA GPU on this host: only the GPU-less smoke check applies")


def test_signing_text():
    base = {"enforced": True, "enforced_by": ["module.sig_enforce=Y"], "hash": "sha512", "secure_boot": False,
            "gdrdrv_installed": True, "signed": True, "signer": "key", "ours": True, "accepted": False}
    assert R.signing_text(base) == ("enforced (module.sig_enforce=Y), sha512; signed by key (our key) - REFUSED; "
                                    "Secure Boot off")
    assert R.signing_text(dict(base, signer="", signed=False, enforced=False, enforced_by=[], hash="",
                               accepted=True)) == "not enforced; unsigned - accepted; Secure Boot off"
    assert R.signing_text(dict(base, gdrdrv_installed=False)).endswith("no gdrdrv installed; Secure Boot off")


def test_causes_group_the_hosts_by_code_blockers_first(report):
    assert [(c["code"], c["count"]) for c in report["causes"]] == [
        ("other_blocker", 2), ("sanity_failed", 2), ("no_status", 1), ("bar1_full", 1), ("pcie_link_narrow", 1),
        ("numa_no_rdma", 1), ("reload_pending", 1)]
    sanity = report["causes"][1]
    assert sanity["hosts"] == ["gpu-h200-02", "gpu-old-03"] and sanity["title"] == "gdrcopy_sanity failed"


def test_markdown_fits_120_columns_and_says_what_the_page_says(report):
    md = R.render_markdown(report)
    lines = md.splitlines()
    assert lines[0] == "# GPU nodes, rack 12"
    assert lines[2] == "Generated 2026-11-29T20:05:39Z: 5 hosts, 3 red, 1 amber, 1 green."
    assert max(len(line) for line in lines) <= 120
    assert [ln for ln in lines if ln.startswith("## ")] == ["## Causes", "## Red and amber hosts", "## Green hosts (1)"]
    assert [ln for ln in lines if ln.startswith("### ")] == [
        "### gpu-h200-01: RED", "### gpu-h200-02: RED", "### gpu-old-03: RED", "### gpu-h100-07: AMBER"]
    flat = " ".join(line.strip() for line in lines)
    page = R.render_html(report)
    for row in report["hosts"]:  # every finding, remedy and column of the page is in the Markdown
        for f in row["findings"]:
            assert f["text"] in flat and f["remedy"] in flat
            assert page.count(R.e(f["remedy"])) >= 1
        for dummy, value in R.display(row["details"]):
            assert value in flat
    assert "Tests: smoke passed; sanity 28/28 passed" not in flat  # green hosts are one condensed line
    assert "- gpu-h100-08: 6.1.0-50-amd64; pinned 2.6" in md


def test_html_is_self_contained_escaped_and_has_one_row_per_host(report, fleet):
    fleet["<script>alert(1)</script>"] = {}
    page = R.render_html(R.build_report(fleet, "GPU nodes, rack 12", "now"))
    assert page.startswith("<!DOCTYPE html>")
    # one inline script (the filter) and nothing fetched: no URL, no external script, style or image
    assert page.count("<script>") == 1 and not re.search(r"https?://|<link|<script src|src=|@import|url\(", page)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count('<tr class="red"') == 4 and page.count('<tr class="amber"') == 1
    assert page.count('<tr class="green"') == 1
    assert "CUDA driver 13.0 &lt; 13.3" in page and "copybw 131072 B: write 9639 MB/s" in page
    assert page.index('id="causes"') < page.index('id="hosts"')


def test_json_is_the_report_and_valid_against_the_published_schema(report):
    assert json.loads(R.render_json(report)) == report
    validate(json.loads(R.render_json(report)))


def validate(document):
    """document against docs/report.schema.json. jsonschema comes with requirements-test.txt (make test fails
    without it); ansible-test's and the ansible-core matrix's own environments lack it: skipped there."""
    need(importlib.util.find_spec("jsonschema"), "jsonschema is not installed (requirements-test.txt)")
    import jsonschema
    schema = json.loads((REPO / "docs" / "report.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(document)


def test_the_schema_refuses_what_tools_must_not_get(report):
    need(importlib.util.find_spec("jsonschema"), "jsonschema is not installed (requirements-test.txt)")
    import jsonschema
    bad = copy.deepcopy(report)
    bad["generated"] = "2026-11-29 20:05:39 UTC"
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)
    bad = copy.deepcopy(report)
    bad["hosts"][3]["details"]["gpus"][0]["index"] = "0"  # a GPU index as text: the drift the schema stops
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)


def test_the_codes_table_in_the_docs_is_the_code_table():
    text = (REPO / "docs" / "STATUS-REPORT.md").read_text()
    documented = set(re.findall(r"^\| `([a-z0-9_]+)` \|", text, re.M))
    assert documented == set(V.CODES)


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


# --- a fleet of 500 ------------------------------------------------------------------------------------------------

@pytest.fixture
def fleet500(tmp_path, fleet):
    import fleet500 as F500
    from test_gpu_schema import h100
    from test_gdrcopy_info import H200, SMI, SMI_Q, SMI_QUERY, FakeModule, captured, copy_capture
    root = copy_capture(H200 / "fs", tmp_path / "h200")
    m = FakeModule(tools={"nvidia-smi": SMI}, outputs={SMI_QUERY: captured(H200 / "cmd" / "nvidia_smi_query_csv.txt"),
                                                       SMI_Q: captured(H200 / "cmd" / "nvidia_smi_q.txt")})
    h200 = gdrcopy_facts.gather(m, params(root, release="2.6"), gdrcopy_facts.Host(m, root, live=True))
    return F500.fleet(h200, h100(tmp_path)[1], fleet["gpu-h100-07"]["info"], fleet["gpu-h100-08"]["info"],
                      fleet["gpu-h200-02"]["verify"]["tests"])


def test_a_500_host_report_groups_its_36_red_hosts_by_cause(fleet500):
    report = R.build_report(fleet500, "500 nodes", "2026-12-07T16:00:00Z")
    assert report["summary"]["hosts"] == 500 and report["summary"]["red"] == 36
    assert 30 <= report["summary"]["amber"] <= 40
    causes = dict((c["code"], c["count"]) for c in report["causes"])
    assert causes["modules_disabled"] + causes["no_status"] + causes["sanity_failed"] >= 36
    assert len(report["causes"]) <= 15  # a handful of lines on the page, not 36 rows of sentences
    validate(json.loads(R.render_json(report)))
    md = R.render_markdown(report)
    assert max(len(line) for line in md.splitlines()) <= 120
    assert md.count("\n### ") == report["summary"]["red"] + report["summary"]["amber"]
    if os.environ.get("GDRCOPY_REPORT_OUT"):  # benchmarks/report.py times the page made of this report
        R.write_report(os.environ["GDRCOPY_REPORT_OUT"], report)


def test_status_alone_says_what_site_yml_said_about_a_verified_host(fleet):
    """site.yml's status has this run's verify and smoke; status.yml alone has the record's (gdrcopy_info's
    last_verify, written by that verify). One host, both ways: the same row, so neither run changes the report."""
    green = fleet["gpu-h100-08"]
    in_site = R.host_row("h", green)
    alone = R.host_row("h", {"info": dict(green["info"], last_verify=green["verify"]), "mode": "host"})
    assert alone == in_site
    assert alone["details"]["tests"]["sanity"] == {"passed": 28, "total": 28, "waived": 0}
    assert alone["details"]["tests"]["smoke"] == "passed"


def test_an_old_gdrdrv_without_its_params_file_says_its_module_version(fleet):
    amber = copy.deepcopy(fleet["gpu-h100-07"]["info"])
    amber["gdrcopy"]["driver_version"] = ""  # gdrdrv 2.4: no /proc/driver/gdrdrv/params
    amber["kernel"]["installed"][0]["gdrdrv_modules"][0]["version"] = "2.4"
    assert R.host_row("h", {"info": amber})["details"]["gdrcopy"]["driver"] == "2.4"


def test_the_report_written_on_the_h100_device_machine_is_valid_and_coded():
    """status.yml run for real on the H100 device machine (tests/fixtures/hosts/h100-device-2026-12-07/status):
    the JSON it wrote validates against the schema, with every blocker of that class of host coded."""
    path = REPO / "tests" / "fixtures" / "hosts" / "h100-device-2026-12-07" / "status" / "gdrcopy-report.json"
    written = json.loads(path.read_text())
    validate(written)
    assert [c["code"] for c in written["causes"]] == ["dmabuf_unavailable", "modules_disabled", "no_kmod_tools",
                                                      "no_library", "no_module_tree", "sig_enforced_no_efi"]
    signing = written["hosts"][0]["details"]["signing"]
    assert (signing["hash"], signing["enforced_by"][1:]) == ("sha512", ["CONFIG_MODULE_SIG_FORCE",
                                                                         "CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY"])
