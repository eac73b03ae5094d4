"""Node facts of a serving stack: how its GPUs sit on nodes, and whether a TP or EP group leaves one.

Used by ``kg.analyses.check.stack_facts``; the rules that read them are in rules/nodes.yaml.
"""
from __future__ import annotations

from typing import Any

from kg.engines import of
from kg.inputs.stack import Stack


def node_facts(stack: Stack, ns: dict[str, Any]) -> dict[str, Any]:
    """Nodes: ``gpus_per_node`` (given; else the GPUs one node runs: tp x pp x dp GPUs / nnodes with
    --nnodes > 1; else, without a node count, the hardware entry's ``gpus_per_node``, the DGX node, with
    ``gpus_per_node_source``), ``tp_spans_nodes`` / ``ep_spans_nodes`` when a TP or EP group is larger than a node,
    ``intranode_bandwidth_gbps`` (the GPU's NVLink/xGMI figure, GB/s), ``internode_bandwidth_gbps_per_gpu`` (the
    node's network per GPU, GB/s) and ``link_bandwidths`` (both in one sentence for the findings)."""
    out: dict[str, Any] = {}
    nnodes = int(ns.get("nnodes") or 1)
    per_node = ns.get("gpus_per_node")
    if per_node is None and nnodes > 1:
        tp, pp, dp = int(ns.get("tp_size") or 1), int(ns.get("pp_size") or 1), int(ns.get("dp_size") or 1)
        world = of(stack).world_size(tp, pp, 1, dp, stack.techniques)
        per_node = max(1, (stack.gpu_count or world) // nnodes)
    hw = stack.hardware or {}
    if per_node is None and nnodes == 1 and hw.get("gpus_per_node"):
        # no node count given: the GPUs of one node of this platform (the hardware entry's DGX node). A TP or EP
        # group larger than that cannot fit one node whatever the launch says; one within it is taken to fit
        per_node = int(hw["gpus_per_node"])
        out["gpus_per_node_source"] = f"{hw.get('id', 'GPU')} node (catalog/hardware)"
    if per_node is None:
        ep = int(ns.get("ep_size") or 1)
        if "expert-parallelism" in stack.techniques and ep <= 1:
            ep = int(ns.get("tp_size") or 1) * int(ns.get("dp_size") or 1)
        if int(ns.get("tp_size") or 1) == 1:
            out["tp_spans_nodes"] = False  # one GPU per TP group: nothing to span
        if ep == 1:
            out["ep_spans_nodes"] = False
        if nnodes == 1 and "nnodes" in ns:
            # one node (the engines' default --nnodes 1): no TP or EP group can leave it. What a node holds is
            # not known, so gpus_per_node stays unset (a TP larger than the node's GPUs fails at start-up).
            out["nnodes"] = 1
            out["tp_spans_nodes"] = out["ep_spans_nodes"] = False
        return out
    if "nnodes" in ns or nnodes > 1:
        out["nnodes"] = nnodes
    else:  # at least the nodes the launch's GPUs need
        tp, pp, dp = int(ns.get("tp_size") or 1), int(ns.get("pp_size") or 1), int(ns.get("dp_size") or 1)
        world = of(stack).world_size(tp, pp, 1, dp, stack.techniques)
        out["nnodes"] = -(-int(stack.gpu_count or world) // int(per_node))
    out["gpus_per_node"] = int(per_node)
    out["tp_spans_nodes"] = int(ns.get("tp_size") or 1) > int(per_node)
    ep = int(ns.get("ep_size") or 1)
    if "expert-parallelism" in stack.techniques and ep <= 1:
        ep = int(ns.get("tp_size") or 1) * int(ns.get("dp_size") or 1)
    out["ep_spans_nodes"] = ep > int(per_node)
    intra, inter = hw.get("interconnect_bandwidth_gbps"), hw.get("network_bandwidth_gbps_per_gpu")
    if intra:
        out["intranode_bandwidth_gbps"] = intra
    if inter:
        out["internode_bandwidth_gbps_per_gpu"] = inter
    link = str(hw.get("interconnect") or "the GPU interconnect")
    if intra and inter:
        out["link_bandwidths"] = (f"{intra:,} GB/s per GPU over {link} inside a node vs {inter:,} GB/s per GPU between "
                                  f"nodes ({intra / inter:.0f}x less)")
    elif intra:
        out["link_bandwidths"] = (f"{intra:,} GB/s per GPU over {link} inside a node; the node-to-node bandwidth is not in "
                                  "the hardware entry")
    else:
        out["link_bandwidths"] = "the GPU's link bandwidths are not in the hardware entry"
    return out
