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


def test_kv_cache_memory_bytes_is_the_budget():
    # #5: vLLM reserves exactly --kv-cache-memory-bytes (0.33.0 v1/worker/gpu_worker.py:656-675); 10G is binary
    # (human_readable_int): 10,737,418,240 B / (131,072 B/token x 16) = 5,120 blocks = 81,920 tokens; 10g is decimal:
    # 10**10 // 2,097,152 = 4,768 blocks = 76,288 tokens
    d = _check("vllm serve meta-llama/Meta-Llama-3.1-8B --kv-cache-memory-bytes 10G", "--gpu", "H100")
    assert d["kv_budget_bytes_per_gpu"] == 10 * 2**30 and d["kv_budget_source"] == "given (--kv-cache-memory-bytes)"
    assert d["kv_tokens_per_gpu"] == 81_920 and d["kv_num_blocks"] == 5_120
    assert _check("vllm serve meta-llama/Meta-Llama-3.1-8B --kv-cache-memory-bytes 10g",
                  "--gpu", "H100")["kv_tokens_per_gpu"] == 76_288
    code, out, _ = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --kv-cache-memory-bytes 10G",
                           "--gpu", "H100")
    assert "KV budget per GPU (given)                  10.00 GiB  (--kv-cache-memory-bytes)" in out
    assert "ignored" not in out


def test_num_gpu_blocks_override_is_the_block_count():
    # #5: the override replaces the block count (0.33.0 v1/core/kv_cache_planning.py:240-247, 681-682):
    # 5,000 blocks x 16 tokens = 80,000 tokens, 5,000 x 2,097,152 B = 10,485,760,000 B
    d = _check("vllm serve meta-llama/Meta-Llama-3.1-8B --num-gpu-blocks-override 5000", "--gpu", "H100")
    assert d["kv_num_blocks"] == 5_000 and d["kv_tokens_per_gpu"] == 80_000
    assert d["kv_budget_bytes_per_gpu"] == 10_485_760_000


def test_human_readable_integers_per_release():
    # #12: vLLM's human_readable_int (0.33.0 utils/argparse_utils.py:30-94): k decimal, K binary; --max-model-len
    # from 0.8.5, --max-num-batched-tokens from 0.9.1; 'auto' / -1 from 0.14.0 (the engine fits it: noted)
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --max-model-len 32k "
                             "--max-num-batched-tokens 16K", "--gpu", "H100", "--format", "json")
    assert code in (0, 1), err
    st = json.loads(out)["stack"]["settings"]
    assert (st["max_model_len"], st["max_num_batched_tokens"]) == (32_000, 16_384)
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --max-model-len 32k",
                             "--engine-version", "0.8.0", "--gpu", "H100")
    assert code == 2 and "expected an integer, found '32k'" in err
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --max-model-len 1.5K",
                             "--gpu", "H100")
    assert code == 2 and "decimals are not allowed with the binary suffix K" in err
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --max-model-len -1",
                             "--gpu", "H100", "--format", "json")
    assert code in (0, 1), err
    d = json.loads(out)
    assert d["stack"]["settings"]["max_model_len_auto"] is True
    assert any("longest context that fits in the KV memory" in n for n in d["notes"])


def test_fit_takes_the_given_kv_memory_as_check():
    # #5 in fit: the same budgets as check above (10 x 2**30 B; 5,000 blocks x 2,097,152 B)
    code, out, err = run_cli("fit", SMALL, "--model", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "H100",
                             "--kv-cache-memory-bytes", "10G", "--format", "json")
    assert code == 0, err
    g = json.loads(out)["gpu"]
    assert g["kv_budget_bytes_per_gpu"] == 10 * 2**30 and g["budget_source"] == "given (--kv-cache-memory-bytes)"
    code, out, err = run_cli("fit", SMALL, "--model", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "H100",
                             "--num-gpu-blocks-override", "5000", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["gpu"]["kv_budget_bytes_per_gpu"] == 10_485_760_000
