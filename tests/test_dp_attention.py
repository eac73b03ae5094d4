"""SGLang DP attention: concurrency per attention group x groups, replicated attention weights (issue 13 priority 6)."""
from __future__ import annotations

import json

from conftest import run_cli

CMD = "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention --context-length 32768"


def derived(cmd: str) -> dict:
    code, out, err = run_cli("check", "--sglang", cmd, "--gpu", "H200", "--count", "8", "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)["derived"]


def test_dp_attention_replicates_attention_weights_and_multiplies_concurrency():
    d = derived(CMD)
    # DeepSeek-V3 MLA attention per layer: q 7168 x 1536 + 1536 x 128 x 192 = 48,758,784; kv 7168 x 576 +
    # 512 x 128 x 256 = 20,905,984; o 128 x 128 x 7168 = 117,440,512 -> 187,105,280 x 61 = 11,413,422,080
    # params x (1 + 4/16384) FP8 block = 11,416,208,560 B. Attention TP 8 / 8 = 1: each rank holds all of it,
    # 7/8 more than a TP-8 shard: 9,989,182,490 B
    assert d["weight_bytes_attention_replicated_per_gpu"] == 9_989_182_490
    # eight schedulers, each with its own pool: the deployment's concurrency is 8 x one pool's
    assert d["max_concurrency"] == round(d["max_concurrency_per_attention_group"] * 8, 2)
    assert d["kv_tokens_total"] == d["kv_tokens_per_gpu"] * 8


def test_without_dp_attention_nothing_is_replicated():
    d = derived("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --context-length 32768")
    assert "weight_bytes_attention_replicated_per_gpu" not in d and "max_concurrency_per_attention_group" not in d


def test_vllm_data_parallel_shows_the_deployment_total():
    # tester-4 #15: vLLM -dp 16 runs 16 engine cores, each with its own KV cache and scheduler; the report showed one
    # engine's numbers only. 236,112 tokens x 16 = 3,777,792; 1.44 x 16 = 23.04
    import json
    from conftest import run_cli
    code, out, err = run_cli("check", "--vllm", "vllm serve deepseek-ai/DeepSeek-V3 -tp 1 -dp 16 --enable-expert-parallel "
                             "--nnodes 2", "--gpu", "H100", "--count", "16", "--engine-version", "0.33.0",
                             "--format", "json")  # the numbers are 0.33.0's (16-token blocks, utilisation 0.92)
    d = json.loads(out)["derived"]
    assert d["kv_tokens_all_dp_engines"] == d["kv_tokens_total"] * 16 == 3_777_792
    assert d["max_concurrency_all_dp_engines"] == round(d["max_concurrency"] * 16, 2) == 23.04
