"""trtllm-serve's KV budget: TensorRT-LLM applies --kv_cache_free_gpu_memory_fraction to the memory free after
loading and profiling, not to the device total (kg.derive.budget module doc; NVIDIA/TensorRT-LLM
tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator._cal_max_memory: (total - peak + allocated) x fraction)."""
from __future__ import annotations

import json
import math

from conftest import run_cli

GIB = 2**30
CMD = "trtllm-serve Qwen/Qwen3-235B-A22B --tp_size 8"


def _check(cmd: str) -> dict:
    code, out, err = run_cli("check", "--cmd", cmd, "--gpu", "H200", "--count", "8", "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)


def _free_after_profiling(dv: dict) -> float:
    # H200 141 GiB; Qwen3-235B-A22B at TP 8 (all 94 layers MoE): forward of 8,192 tokens x (8 experts x (4,096 +
    # 4,096) + 3 x 4,096) x 2 B = 1,275,068,416 B; CUDA graphs 0.25 GiB; non-torch 3.58 GiB (TP > 1, >= 70 GiB GPU)
    return 141 * GIB - dv["weight_bytes_per_gpu_estimate"] - 1_275_068_416 - 0.25 * GIB - 3.58 * GIB


def test_issue_command_uses_the_fraction_of_free_memory():
    dv = _check(CMD + " --kv_cache_free_gpu_memory_fraction 0.5")["derived"]
    lines = {x["name"]: x for x in dv["kv_budget_breakdown"]}
    assert list(lines) == ["device memory", "weights", "activation peak", "CUDA graphs", "non-torch", "held back"]
    assert lines["device memory"]["bytes"] == 141 * GIB
    assert lines["activation peak"]["bytes"] == 1_275_068_416
    free = _free_after_profiling(dv)
    assert dv["kv_budget_bytes_per_gpu"] == math.floor(0.5 * free)  # 40.62 GiB; vLLM's meaning gave 9.9 GiB
    assert lines["held back"]["bytes"] == 0.5 * free
    assert "(1 - free_gpu_memory_fraction 0.5)" in lines["held back"]["basis"]
    assert "_cal_max_memory" in lines["held back"]["source"] and "release not pinned" in lines["held back"]["source"]
    assert dv["kv_budget_utilization_source"].startswith("given (--kv_cache_free_gpu_memory_fraction")
    assert dv["kv_tokens_per_gpu"] == math.floor(0.5 * free) // (16 * 48_128) * 16


def test_default_fraction_is_0_9_of_free_memory():
    dv = _check(CMD)["derived"]
    # 151,397,597,184 - 58,773,209,088 weights - 1,275,068,416 - 268,435,456 - 3,843,995,729.92 = 87,236,888,494 B
    assert dv["kv_budget_bytes_per_gpu"] == math.floor(0.9 * _free_after_profiling(dv)) == 78_513_199_644
    assert "default=0.9" in dv["kv_budget_utilization_source"]


def test_weights_need_the_device_not_the_fraction():
    # 0.3 x 141 GiB = 42.3 GiB is below the 54.74 GiB of weights per GPU, but TensorRT-LLM loads the weights first
    # and takes 0.3 of what is left: the weights fit the 141 GiB device (main fired weights-do-not-fit here)
    d = _check(CMD + " --kv_cache_free_gpu_memory_fraction 0.3")
    dv = d["derived"]
    assert dv["kv_budget_bytes_per_gpu"] == math.floor(0.3 * _free_after_profiling(dv))
    assert "weights-do-not-fit" not in {f["rule_id"] for f in d["findings"]}
