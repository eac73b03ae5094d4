"""Node facts of a serving stack: how its GPUs sit on nodes, and whether a TP or EP group leaves one.

Used by ``kg.analyses.check.stack_facts``; the rules that read them are in rules/nodes.yaml.
"""
from __future__ import annotations

from typing import Any

from kg.inputs.stack import Stack


def node_facts(stack: Stack, ns: dict[str, Any]) -> dict[str, Any]:
    """Nodes: ``gpus_per_node`` (given; else the GPUs one node runs: tp x pp x dp GPUs / nnodes with
    --nnodes > 1), ``tp_spans_nodes`` / ``ep_spans_nodes`` when a TP or EP group is larger than a node,
    ``intranode_bandwidth_gbps`` (the GPU's NVLink/xGMI figure, GB/s)."""
    out: dict[str, Any] = {}
    nnodes = int(ns.get("nnodes") or 1)
    per_node = ns.get("gpus_per_node")
    if per_node is None and nnodes > 1:
        tp, pp, dp = int(ns.get("tp_size") or 1), int(ns.get("pp_size") or 1), int(ns.get("dp_size") or 1)
        world = tp * pp * (1 if (stack.engine == "sglang" and "dp-attention" in stack.techniques) else dp)
        per_node = max(1, (stack.gpu_count or world) // nnodes)
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
    out["nnodes"] = nnodes
    out["gpus_per_node"] = int(per_node)
    out["tp_spans_nodes"] = int(ns.get("tp_size") or 1) > int(per_node)
    ep = int(ns.get("ep_size") or 1)
    if "expert-parallelism" in stack.techniques and ep <= 1:
        ep = int(ns.get("tp_size") or 1) * int(ns.get("dp_size") or 1)
    out["ep_spans_nodes"] = ep > int(per_node)
    if stack.hardware and stack.hardware.get("interconnect_bandwidth_gbps"):
        out["intranode_bandwidth_gbps"] = stack.hardware["interconnect_bandwidth_gbps"]
    return out
