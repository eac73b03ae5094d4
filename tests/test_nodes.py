"""TP/EP groups that span nodes (rules/nodes.yaml; issue 13 priority 6)."""
from __future__ import annotations

import json

from conftest import run_cli


def check(*argv: str) -> dict:
    code, out, err = run_cli("check", *argv, "--format", "json")
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
