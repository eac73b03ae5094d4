"""A vLLM KV size given by flag (--kv-cache-memory-bytes, --num-gpu-blocks-override) is checked against the GPU
(newuser6 #9): vLLM allocates it as is (0.34.0 v1/worker/gpu_worker.py:688-712, v1/worker/utils.py:645)."""
from __future__ import annotations

import json

from conftest import run_cli


def _check(flags: str) -> tuple[int, dict]:
    code, out, err = run_cli("check", "--vllm", f"vllm serve Qwen/Qwen3-32B -tp 2 {flags}", "--gpu", "H100-SXM",
                             "--count", "2", "--format", "json")
    assert code in (0, 1), err
    return code, json.loads(out)


def test_vllm_kv_size_larger_than_the_gpu_is_an_error_and_gets_no_speed():
    # 200 GiB per GPU on an 80 GB H100: was "0 finding(s)", 1,638,400 tokens and a Speed section
    code, rep = _check("--kv-cache-memory-bytes 200G")
    assert code == 1
    assert [f["rule_id"] for f in rep["findings"]] == ["vllm-given-kv-cache-size-exceeds-free-memory"]
    d = rep["derived"]
    # 85,520,809,984 B - weights 32,761,446,400 - non-torch 3,843,995,729.92 (TP 2)
    assert d["kv_given_allocatable_bytes_per_gpu"] == 48_915_367_854
    assert rep["speed"]["status"] == "infeasible"


def test_vllm_kv_size_within_the_gpu_is_not_a_finding():
    code, rep = _check("--kv-cache-memory-bytes 43G")  # below 46,311,491,502 B, vLLM's "fully utilize" value
    assert code == 0 and rep["findings"] == []
    assert rep["derived"]["kv_given_gpu_limit_bytes_per_gpu"] == 46_311_491_502
