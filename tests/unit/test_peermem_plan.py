"""peermem_plan: what the nvidia_peermem role does for each nvidia_peermem_state on each kind of host.

The host facts are gdrcopy_info's shape; the ib_core evidence strings are the ones ib_core_facts writes for a
MOFED stack (a registered peer client), an inbox stack (kallsyms without the symbol) and no RDMA stack at all."""

from __future__ import annotations

import copy

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_parsers as P
import pytest

IB = {
    "mofed": {"loaded": True, "peer_memory_api": True, "evidence": "/sys/kernel/mm/memory_peers lists nv_mem"},
    "inbox": {"loaded": True, "peer_memory_api": False, "evidence": "/proc/kallsyms has no ib_register_peer_memory_client"},
    "none": {"loaded": False, "peer_memory_api": None, "evidence": "ib_core is not loaded"},
}


def facts(ib="mofed", available=True, loaded=False, flavor="open", running="6.8.0-45-generic", version="580.95.05"):
    return {
        "kernel": {"running": running, "installed": [{"release": running}]},
        "nvidia": {"version": version, "flavor": flavor},
        "peermem": {
            "nvidia_peermem": {"available": available, "loaded": loaded},
            "nv_peer_mem": {"available": False, "loaded": False},
            "ib_core": copy.deepcopy(IB[ib]),
        },
    }


@pytest.mark.parametrize("state", ["auto", "present", "required"])
def test_a_mofed_host_loads_it_now_and_at_boot(state):
    plan = P.peermem_plan(state, facts("mofed"))
    assert (plan["action"], plan["boot"], plan["fail"]) == ("load", True, False)
    assert "loads at every boot, before gdrdrv" in plan["reason"]


def test_auto_leaves_it_on_an_inbox_stack_and_says_why_and_what_else_works():
    plan = P.peermem_plan("auto", facts("inbox"))
    assert (plan["action"], plan["boot"], plan["fail"]) == ("none", False, False)
    assert "no peer-memory API (/proc/kallsyms has no ib_register_peer_memory_client)" in plan["reason"]
    assert "MLNX_OFED or DOCA-OFED" in plan["reason"] and "nvidia_peermem_state: present" in plan["reason"]
    assert plan["dmabuf"].startswith("DMA-BUF is the alternative here")


def test_auto_leaves_it_without_any_rdma_stack():
    plan = P.peermem_plan("auto", facts("none"))
    assert plan["action"] == "none" and "ib_core is not loaded" in plan["reason"]


def test_present_loads_it_on_an_inbox_stack_but_warns():
    plan = P.peermem_plan("present", facts("inbox"))
    assert (plan["action"], plan["boot"]) == ("load", True)
    assert "may refuse to load" in plan["reason"]


def test_an_already_loaded_module_is_kept_and_persisted():
    plan = P.peermem_plan("auto", facts("none", loaded=True))
    assert (plan["action"], plan["boot"]) == ("none", True)
    assert "is loaded" in plan["reason"]


@pytest.mark.parametrize("state, fail", [("auto", False), ("present", False), ("required", True)])
def test_a_driver_without_the_module_is_a_report_or_a_failure(state, fail):
    plan = P.peermem_plan(state, facts("mofed", available=False, flavor="proprietary", running="5.4.0-1-amd64"))
    assert (plan["action"], plan["boot"], plan["fail"]) == ("none", False, fail)
    assert "the NVIDIA driver 580.95.05 ships no nvidia-peermem for kernel 5.4.0-1-amd64" in plan["reason"]
    assert plan["dmabuf"] == ("DMA-BUF is no alternative here: the proprietary NVIDIA driver is not the open kernel "
                              "module flavor; kernel 5.4.0-1-amd64 is older than 5.12")
    assert plan["dmabuf"] in plan["reason"]


@pytest.mark.parametrize("loaded, action", [(True, "unload"), (False, "none")])
def test_absent_unloads_and_never_persists(loaded, action):
    plan = P.peermem_plan("absent", facts("mofed", loaded=loaded))
    assert (plan["action"], plan["boot"], plan["fail"]) == (action, False, False)
    assert "does not load at boot" in plan["reason"]


def test_the_h200_capture_has_no_rdma_stack_and_a_new_open_driver():
    """The shared GPU host capture: open 580 driver on a 6.18 kernel, no ib_core."""
    plan = P.peermem_plan("auto", facts("none", available=False, flavor="open", running="6.18.44-fc-v657-gpu"))
    assert plan["action"] == "none"
    assert plan["dmabuf"].startswith("DMA-BUF is the alternative here: the NVIDIA open kernel modules and kernel "
                                     "6.18.44-fc-v657-gpu")
