"""tester-4 defects taken by lane consist6 (/work/coord/tester-4.md #8, #5, #3, #15, #13, #12): exact values."""
from __future__ import annotations

import json

from conftest import REPO, run_cli

SMALL = str(REPO / "rules" / "fixtures" / "traces" / "small_prefix.jsonl")
L70 = "meta-llama/Meta-Llama-3.1-70B"


def _fit_budget(*extra: str) -> dict:
    code, out, err = run_cli("fit", SMALL, "--model", L70, *extra, "--format", "json")
    assert code == 0, err
    return json.loads(out)["gpu"]


def _check(cmd: str, *extra: str) -> dict:
    code, out, err = run_cli("check", "--vllm", cmd, *extra, "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)["derived"]


def test_fit_sizes_fp8_weights_as_check():
    # #8: ceil(141 GiB x 0.92) = 139,285,789,410 B - fp8 weights 72,653,736,128 - sampler 1,024 x 128,256 x 14 =
    # 1,838,678,016 - CUDA graphs 268,435,456 - non-torch 1.79 GiB 1,921,997,864.96 = 62,602,941,945 B (58.30 GiB);
    # before: BF16 weights 131.41 GiB and a 0.00 GiB budget
    g = _fit_budget("--tp", "1", "--gpu", "H200", "--quantization", "fp8")
    assert g["kv_budget_bytes_per_gpu"] == 62_602_941_945
    assert "weights 67.66 GiB" in g["budget_source"]
    assert _check(f"vllm serve {L70} -tp 1 --quantization fp8", "--gpu", "H200")["kv_budget_bytes_per_gpu"] == 62_602_941_945


def test_fit_max_num_seqs_reaches_the_sampler():
    # #8: with --max-num-seqs 64 the sampler holds 64 x 128,256 x 14 B = 0.11 GiB, under the 8,192-token forward at
    # TP 4 (754,974,720 B): 78,679,145,186 - weights 35,276,193,792 - 754,974,720 - 268,435,456 - non-torch
    # 3,843,995,729.92 = 38,535,545,488 B, check's number (fit kept the 1,024-request sampler: 37,451,842,192)
    g = _fit_budget("--tp", "4", "--gpu", "H100", "--max-num-seqs", "64")
    assert g["kv_budget_bytes_per_gpu"] == 38_535_545_488
    assert "activation peak 0.70 GiB" in g["budget_source"]
    d = _check(f"vllm serve {L70} -tp 4 --max-num-seqs 64", "--gpu", "H100", "--count", "4")
    assert d["kv_budget_bytes_per_gpu"] == 38_535_545_488


def test_fit_engine_version_and_bad_quantization():
    # vLLM 0.10.0: gpu_memory_utilization 0.9 and no CUDA-graph line (subtracted from 0.20.0), as check
    g = _fit_budget("--tp", "4", "--gpu", "H100", "--engine-version", "0.10.0")
    d = _check(f"vllm serve {L70} -tp 4", "--gpu", "H100", "--count", "4", "--engine-version", "0.10.0")
    assert g["kv_budget_bytes_per_gpu"] == d["kv_budget_bytes_per_gpu"]
    assert "gpu_memory_utilization 0.9 " in g["budget_source"] and "CUDA graphs 0.00 GiB" in g["budget_source"]
