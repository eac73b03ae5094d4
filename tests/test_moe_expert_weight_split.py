"""The routed experts of a MoE model are split over the GPUs the way each engine splits them, so the weights per GPU
(and rule weights-do-not-fit) follow the engine (kg.engines.<engine>.expert_shards).

- vLLM: every fused-MoE layer spreads its experts over all dp x pcp x tp ranks, with or without
  --enable-expert-parallel (vllm 0.34.0 model_executor/layers/fused_moe/config.py:1143-1152, 1235-1268). optkg
  used to put all the experts of a TP group on each GPU under -dp without --enable-expert-parallel, and called
  13 measured NVIDIA runs (aiconfigurator-core 0.12.0 systems/silicon_sample.csv, dp 2 and dp 4) infeasible.
- TensorRT-LLM: moe_tp_size x moe_ep_size == tp_size; --ep_size alone leaves moe_tp_size = tp_size // ep_size
  (NVIDIA/TensorRT-LLM tensorrt_llm/mapping.py:138-146, 175-181 at 05ebebb2), so the experts are split tp ways.
- SGLang: moe_tp_size = tp_size // ep_size // moe_dp_size (sglang 0.5.23 srt/runtime_context.py:154): tp ways too.

Qwen/Qwen3-235B-A22B (bf16, 2 B per parameter; config.json: hidden 4,096, 94 layers, all MoE, 64 query / 4 KV heads
of 128, 128 experts of intermediate 1,536, vocab 151,936, untied lm_head), worked by hand with the parameter counts
of kg.derive.weights.group_params:
- attention 94 x (64 x 128 x 4,096 x 2 + 4 x 128 x 4,096 x 2) = 94 x 71,303,168 = 6,702,497,792
- router 94 x 4,096 x 128 = 49,283,072; embeddings + lm_head 2 x 4,096 x 151,936 = 1,244,659,712
- everything but the experts: 7,996,440,576 parameters = 15,992,881,152 B
- routed experts 94 x 3 x 4,096 x 1,536 x 128 = 227,096,395,776 parameters = 454,192,791,552 B
"""
from __future__ import annotations

import json

from conftest import run_cli

QWEN = "Qwen/Qwen3-235B-A22B"
NON_EXPERT_B, EXPERT_B = 15_992_881_152, 454_192_791_552


def _check(cmd: str, gpus: int) -> tuple[int, dict, list[str]]:
    code, out, err = run_cli("check", "--cmd", cmd, "--gpu", "H100-SXM", "--count", str(gpus), "--format", "json",
                             "--no-speed")  # weights and findings only: the Speed section (~1 CPU-s a point) is not read
    assert code in (0, 1), err
    report = json.loads(out)
    return code, report["derived"], [f["rule_id"] for f in report["findings"]]


def test_vllm_data_parallel_spreads_the_experts_over_every_rank_without_expert_parallel():
    # -tp 4 -dp 2: 15,992,881,152 / 4 + 454,192,791,552 / 8 = 3,998,220,288 + 56,774,098,944 = 60,772,319,232 B,
    # which fits an H100 (85.52 GB visible)
    code, d, rules = _check(f"vllm serve {QWEN} -tp 4 -dp 2", 8)
    assert NON_EXPERT_B // 4 + EXPERT_B // 8 == 60_772_319_232
    assert (d["weight_bytes_per_gpu_estimate"], d["weight_expert_shards"]) == (60_772_319_232, 8)
    assert "weights-do-not-fit" not in rules and code == 0
    # --enable-expert-parallel: whole experts per rank, the same share (EP size = tp x dp = 8)
    _, d, _ = _check(f"vllm serve {QWEN} -tp 4 -dp 2 --enable-expert-parallel", 8)
    assert (d["weight_bytes_per_gpu_estimate"], d["weight_expert_shards"]) == (60_772_319_232, 8)


def test_vllm_tp_alone_still_holds_a_quarter_of_the_experts_and_does_not_fit():
    # -tp 4: 3,998,220,288 + 454,192,791,552 / 4 = 117,546,418,176 B > an H100
    _, d, rules = _check(f"vllm serve {QWEN} -tp 4", 4)
    assert (d["weight_bytes_per_gpu_estimate"], d["weight_expert_shards"]) == (117_546_418_176, 4)
    assert "weights-do-not-fit" in rules


def test_trtllm_ep_size_splits_the_experts_inside_the_tp_group():
    # --tp_size 8 --ep_size 2: moe_tp_size 4 x moe_ep_size 2 = 8 shards:
    # 15,992,881,152 / 8 + 454,192,791,552 / 8 = 1,999,110,144 + 56,774,098,944 = 58,773,209,088 B
    # (optkg used to split them by the EP size alone: 227 GB per GPU)
    code, d, rules = _check(f"trtllm-serve {QWEN} --tp_size 8 --ep_size 2", 8)
    assert (d["weight_bytes_per_gpu_estimate"], d["weight_expert_shards"]) == (58_773_209_088, 8)
    assert "weights-do-not-fit" not in rules


def test_sglang_ep_size_splits_the_experts_inside_the_tp_group():
    # --tp 8 --ep 4: moe_tp_size 2 x ep 4 = 8 shards: 1,999,110,144 + 56,774,098,944 = 58,773,209,088 B
    # (optkg used to split them by the EP size alone: 1,999,110,144 + 113,548,197,888 = 115,547,308,032 B)
    _, d, rules = _check(f"python -m sglang.launch_server --model-path {QWEN} --tp 8 --ep 4", 8)
    assert (d["weight_bytes_per_gpu_estimate"], d["weight_expert_shards"]) == (58_773_209_088, 8)
    assert "weights-do-not-fit" not in rules
    # --moe-dp-size 2: moe_tp_size 8 // 4 // 2 = 1, experts split ep 4 ways: 1,999,110,144 + 113,548,197,888
    _, d, rules = _check(f"python -m sglang.launch_server --model-path {QWEN} --tp 8 --ep 4 --moe-dp-size 2", 8)
    assert (d["weight_bytes_per_gpu_estimate"], d["weight_expert_shards"]) == (115_547_308_032, 4)
    assert "weights-do-not-fit" in rules
