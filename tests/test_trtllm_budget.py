"""trtllm-serve's KV budget: TensorRT-LLM applies --kv_cache_free_gpu_memory_fraction to the memory free after
loading and profiling, not to the device total (kg.derive.budget module doc; NVIDIA/TensorRT-LLM
tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator._cal_max_memory: (total - peak + allocated) x fraction)."""
from __future__ import annotations

import json
import math

from conftest import run_cli

GIB = 2**30
H200 = 143_771 * 2**20  # catalog/hardware/H200.yaml memory_visible_mib
CMD = "trtllm-serve Qwen/Qwen3-235B-A22B --tp_size 8"


def _check(cmd: str) -> dict:
    code, out, err = run_cli("check", "--cmd", cmd, "--gpu", "H200", "--count", "8", "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)


def _free_after_profiling(dv: dict) -> float:
    # H200 143,771 MiB (nvidia-smi); Qwen3-235B-A22B at TP 8 (all 94 layers MoE): forward of 8,192 tokens x (8 experts x (4,096 +
    # 4,096) + 3 x 4,096) x 2 B = 1,275,068,416 B; CUDA graphs 0.25 GiB; non-torch 3.58 GiB (TP > 1, >= 70 GiB GPU)
    return H200 - dv["weight_bytes_per_gpu_estimate"] - 1_275_068_416 - 0.25 * GIB - 3.58 * GIB


def test_issue_command_uses_the_fraction_of_free_memory():
    dv = _check(CMD + " --kv_cache_free_gpu_memory_fraction 0.5")["derived"]
    lines = {x["name"]: x for x in dv["kv_budget_breakdown"]}
    assert list(lines) == ["device memory", "weights", "activation peak", "CUDA graphs", "non-torch", "held back"]
    assert lines["device memory"]["bytes"] == H200
    assert lines["activation peak"]["bytes"] == 1_275_068_416
    free = _free_after_profiling(dv)
    assert dv["kv_budget_bytes_per_gpu"] == math.floor(0.5 * free)  # 40.62 GiB; vLLM's meaning gave 9.9 GiB
    assert lines["held back"]["bytes"] == 0.5 * free
    assert "(1 - free_gpu_memory_fraction 0.5)" in lines["held back"]["basis"]
    assert "_cal_max_memory" in lines["held back"]["source"] and "release not pinned" in lines["held back"]["source"]
    assert dv["kv_budget_utilization_source"].startswith("given (--kv_cache_free_gpu_memory_fraction")
    # TP 8 over 4 KV heads: TensorRT-LLM's token estimate counts half heads, its pools whole ones, so its pool is not
    # evaluable (kg.engines.trtllm.kv); before, vLLM's plan gave floor(0.5 x free) // (16 x 48,128) x 16 tokens
    assert "kv_tokens_per_gpu" not in dv and "over 4 KV heads" in dv["kv_capacity_not_evaluable"]


def test_default_fraction_is_0_9_of_free_memory():
    dv = _check(CMD)["derived"]
    # 150,754,820,096 - 58,773,209,088 weights - 1,275,068,416 - 268,435,456 - 3,843,995,729.92 = 86,594,111,406 B
    assert dv["kv_budget_bytes_per_gpu"] == math.floor(0.9 * _free_after_profiling(dv)) == 77_934_700_265
    assert "default=0.9" in dv["kv_budget_utilization_source"]


def test_weights_need_the_device_not_the_fraction():
    # 0.3 x 140.40 GiB = 42.1 GiB is below the 54.74 GiB of weights per GPU, but TensorRT-LLM loads the weights first
    # and takes 0.3 of what is left: the weights fit the 140.40 GiB device (main fired weights-do-not-fit here)
    d = _check(CMD + " --kv_cache_free_gpu_memory_fraction 0.3")
    dv = d["derived"]
    assert dv["kv_budget_bytes_per_gpu"] == math.floor(0.3 * _free_after_profiling(dv))
    assert "weights-do-not-fit" not in {f["rule_id"] for f in d["findings"]}


R1_ADP = {"cuda_graph_config": {"enable_padding": True, "max_batch_size": 512}, "enable_attention_dp": True,
          "kv_cache_config": {"dtype": "fp8", "free_gpu_memory_fraction": 0.8}, "stream_interval": 10,
          "moe_config": {"backend": "DEEPGEMM"}}
R1_CMD = ("trtllm-serve deepseek-ai/DeepSeek-R1 --trust_remote_code --max_batch_size 1024 --max_num_tokens 8192 "
          "--tp_size 8 --ep_size 8 --pp_size 1 --config {cfg}")


def _r1_adp(tmp_path, **over) -> dict:
    import yaml
    cfg = tmp_path / "config.yml"
    cfg.write_text(yaml.safe_dump({**R1_ADP, **over}))
    code, out, err = run_cli("check", "--cmd", R1_CMD.format(cfg=cfg), "--gpu", "B200", "--count", "8",
                             "--no-speed", "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)


def test_trtllm_attention_dp_caches_each_ranks_own_requests(tmp_path):
    # NVIDIA's examples/serve/deepseek_r1_reasoning_parser.sh config: enable_attention_dp runs attention at TP 1 on
    # every rank (KVCacheManager: tp_size = 1 if mapping.enable_attention_dp; Mapping.dp_size = tp_size), so each
    # of the 8 ranks caches the whole 61 x 576 B fp8 latent of its own requests and the server holds 8 pools
    d = _r1_adp(tmp_path)
    dv = d["derived"]
    assert dv["kv_replication"] == 1 and dv["kv_bytes_per_token_per_gpu"] == 61 * 576 == 35_136
    # an fp8 MLA cache with block reuse on and chunked prefill not on: whether the release reserves the context-MLA
    # workspace out of the pool decides it (kg.engines.trtllm.kv): no token count; with chunked prefill there is none
    assert "context-MLA attention workspace" in dv["kv_capacity_not_evaluable"]
    dv = _r1_adp(tmp_path, enable_chunked_prefill=True)["derived"]
    assert dv["kv_tokens_total"] == 8 * dv["kv_tokens_per_gpu"]
    assert dv["kv_tokens_total_basis"] == "x dp 8: one pool per attention-DP rank"
    assert dv["max_concurrency"] == round(8 * dv["max_concurrency_per_attention_group"], 2)
    # the attention weights are replicated on every rank (attention built at TP 1): 61 x 187,105,280 MLA params at
    # 1.000244 B (FP8 with 128 x 128 block scales) x (1 - 1/8) more per GPU
    assert dv["weight_bytes_attention_replicated_per_gpu"] == round(61 * 187_105_280 * 1.000244140625 * 7 / 8)
    # the MLA duplication warning, whose fix is the very setting given, no longer fires
    assert "mla-kv-duplication" not in {f["rule_id"] for f in d["findings"]}


def test_trtllm_without_attention_dp_still_duplicates_the_mla_latent(tmp_path):
    d = _r1_adp(tmp_path, enable_attention_dp=False, enable_chunked_prefill=True)
    dv = d["derived"]
    assert dv["kv_replication"] == 8 and dv["kv_tokens_total"] == dv["kv_tokens_per_gpu"]
    assert "weight_bytes_attention_replicated_per_gpu" not in dv
    assert "mla-kv-duplication" in {f["rule_id"] for f in d["findings"]}
