"""``optkg kv --engine sglang --gpu`` sizes SGLang's pool from SGLang's budget, the one ``check --sglang`` derives
for the same default launch (newuser6 #6: it used vLLM 0.34.0's, +30 % tokens)."""
from __future__ import annotations

import json

from conftest import run_cli


def test_kv_engine_sglang_gpu_budget_is_the_one_check_sglang_gives():
    code, out, err = run_cli("kv", "--model", "Qwen/Qwen3-32B", "--tp", "2", "--gpu", "H100-SXM", "--count", "2",
                             "--engine", "sglang", "--format", "json")
    assert code == 0, err
    kv = json.loads(out)
    code, out, err = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 2",
                             "--gpu", "H100-SXM", "--count", "2", "--no-speed", "--format", "json")
    assert code in (0, 1), err
    d = json.loads(out)["derived"]
    # static pool 79.65 GiB x mem_fraction_static 0.828 - weights 30.51 - non-torch 3.58 GiB: 260,969 tokens
    # (was 338,481 from vLLM's requested x 1.0 - activation - graphs - margin)
    assert kv["kv_budget"]["kv_bytes"] == d["kv_budget_bytes_per_gpu"]
    assert [x["name"] for x in kv["kv_budget"]["lines"]] == ["static pool", "weights", "non-torch"]
    assert kv["sglang_pools"]["max_total_num_tokens"] == d["kv_tokens_per_gpu"] == 260_969


def test_kv_engine_sglang_text_prints_no_vllm_block_lines():
    code, out, err = run_cli("kv", "--model", "Qwen/Qwen3-32B", "--tp", "2", "--gpu", "H100-SXM", "--count", "2",
                             "--engine", "sglang")
    assert code == 0, err
    assert "mem_fraction_static 0.828" in out and "SGLang token pool (default)          260,969 tokens" in out
    assert "vLLM" not in out and "gpu_memory_utilization" not in out and "extensible" not in out


def test_kv_engine_vllm_gpu_budget_is_unchanged():
    code, out, err = run_cli("kv", "--model", "Qwen/Qwen3-32B", "--tp", "2", "--gpu", "H100-SXM", "--count", "2",
                             "--format", "json")
    assert code == 0, err
    kv = json.loads(out)
    assert kv["kv_budget"]["lines"][0]["basis"] == "ceil(total 79.65 GiB x gpu_memory_utilization 1)"
    assert kv["capacity"]["gpu_kv_cache_size_tokens"] == 338_432
