"""TP/EP groups that span nodes (rules/nodes.yaml; issue 13 priority 6)."""
from __future__ import annotations

import json

from conftest import run_cli


def check(*argv: str) -> dict:
    code, out, err = run_cli("check", *argv, "--format", "json", "--no-speed")  # no test here reads the Speed section
    assert code in (0, 1), err
    return json.loads(out)


def test_tp16_over_two_nodes_is_a_network_finding():
    for d in (check("--vllm", "vllm serve deepseek-ai/DeepSeek-V3 -tp 16 --nnodes 2", "--gpu", "H200", "--count", "16"),
              check("--sglang", "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 16 --nnodes 2",
                    "--gpu", "H200", "--count", "16")):
        f = {x["rule_id"]: x for x in d["findings"]}["tp-spans-nodes"]
        assert f["cost_dimension"] == "network"
        assert f["numbers"] == {"tp_size": 16, "gpus_per_node": 8, "nnodes": 2}
        assert "--nnodes" not in " ".join(d["ignored_flags"])


def test_single_node_has_no_node_facts():
    d = check("--vllm", "vllm serve deepseek-ai/DeepSeek-V3 -tp 8", "--gpu", "H200", "--count", "8")
    assert "tp-spans-nodes" not in {x["rule_id"] for x in d["findings"]}


def test_node_size_from_the_hardware_decides_single_node_stacks():
    """Tester-4 #10: TP 8 on 8 H100s was 'not evaluable' (no --nnodes); the DGX H100 node holds 8 GPUs
    (catalog/hardware/H100-SXM.yaml gpus_per_node, NVIDIA DGX BasePOD reference architecture), so TP 8 stays in
    one node (held) and TP 16 cannot (fires without --nnodes), with both link bandwidths in the message."""
    d = check("--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8", "--gpu", "H100", "--count", "8")
    assert not {n["rule_id"] for n in d["not_evaluable"]} & {"tp-spans-nodes", "ep-spans-nodes"}
    assert "tp-spans-nodes" not in {x["rule_id"] for x in d["findings"]}
    d = check("--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 16", "--gpu", "H100", "--count", "16")
    f = {x["rule_id"]: x for x in d["findings"]}["tp-spans-nodes"]
    assert f["numbers"] == {"tp_size": 16, "gpus_per_node": 8, "nnodes": 2}
    # 900 GB/s NVLink 4 vs one 400 Gb/s ConnectX-7 per GPU = 50 GB/s: 18x
    assert "900 GB/s per GPU over NVLink 4 inside a node vs 50 GB/s per GPU between nodes (18x less)" in f["message"]
    # a GPU without a node size in its entry (L40S) stays undecided without --nnodes, not silently held
    d = check("--vllm", "vllm serve Qwen/Qwen3-32B -tp 4", "--gpu", "L40S", "--count", "4")
    assert "tp-spans-nodes" in {n["rule_id"] for n in d["not_evaluable"]}
