"""Where the KV budget comes from and that check and fit agree on it: the engine's memory fraction and its
source, the visible GPU memory, FP8 weights, the sampler's share, --kv-cache-memory-bytes and
--num-gpu-blocks-override."""
from __future__ import annotations

import json

from cli_helpers import EXAMPLE
from conftest import REPO, run_cli

SMALL = str(REPO / "rules" / "fixtures" / "traces" / "small_prefix.jsonl")
L70 = "meta-llama/Meta-Llama-3.1-70B"


# the numbers below are vLLM 0.33.0's (gpu_memory_utilization 0.92, 16-token blocks); 0.34.0 sizes the KV cache
# after warm-up at 1.0 (tests/test_engine_release_knowledge.py)
V033 = ("--engine-version", "0.33.0")


def _fit_budget(*extra: str) -> dict:
    extra = extra if "--engine-version" in extra else extra + V033
    code, out, err = run_cli("fit", SMALL, "--model", L70, *extra, "--format", "json")
    assert code == 0, err
    return json.loads(out)["gpu"]


def _check(cmd: str, *extra: str) -> dict:
    extra = extra if "--engine-version" in extra else extra + V033
    code, out, err = run_cli("check", "--vllm", cmd, *extra, "--format", "json", "--no-speed")  # reads derived only
    assert code in (0, 1), err
    return json.loads(out)["derived"]


def test_fit_sizes_fp8_weights_as_check():
    # #8: ceil(143,771 MiB x 0.92) = 138,694,434,489 B - fp8 weights 72,653,736,128 - sampler 1,024 x 128,256 x 14 =
    # 1,838,678,016 - CUDA graphs 268,435,456 - non-torch 1.79 GiB 1,921,997,864.96 = 62,011,587,024 B (57.75 GiB);
    # before: BF16 weights 131.41 GiB and a 0.00 GiB budget
    g = _fit_budget("--tp", "1", "--gpu", "H200", "--quantization", "fp8")
    assert g["kv_budget_bytes_per_gpu"] == 62_011_587_024
    assert "weights 67.66 GiB" in g["budget_source"]
    assert _check(f"vllm serve {L70} -tp 1 --quantization fp8", "--gpu", "H200")["kv_budget_bytes_per_gpu"] == 62_011_587_024


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
                           "--gpu", "H100", *V033)
    assert "KV budget per GPU (given)                  10.00 GiB  (--kv-cache-memory-bytes)" in out
    assert "ignored" not in out


def test_num_gpu_blocks_override_is_the_block_count():
    # #5: the override replaces the block count (0.33.0 v1/core/kv_cache_planning.py:240-247, 681-682):
    # 5,000 blocks x 16 tokens = 80,000 tokens, 5,000 x 2,097,152 B = 10,485,760,000 B
    d = _check("vllm serve meta-llama/Meta-Llama-3.1-8B --num-gpu-blocks-override 5000", "--gpu", "H100")
    assert d["kv_num_blocks"] == 5_000 and d["kv_tokens_per_gpu"] == 80_000
    assert d["kv_budget_bytes_per_gpu"] == 10_485_760_000


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


def test_fit_gpt_oss_longest_request_and_cache_size_match_check():
    trace = REPO.parent / "shared/data/traces/azure_llm_inference_2023_code.csv"
    code, out, err = run_cli("fit", str(trace), "--model", "openai/gpt-oss-120b", "--gpu", "H100", "--tp", "1",
                             "--format", "json", *V033)
    assert code in (0, 1), err
    cc = json.loads(out)["cost_curve"]
    code, out, err = run_cli("check", "--vllm", "vllm serve openai/gpt-oss-120b", "--gpu", "H100", "--count", "1",
                             "--format", "json", "--no-speed", *V033)
    assert code in (0, 1), err
    d = json.loads(out)["derived"]
    assert cc["budget_bytes_per_gpu"] == d["kv_budget_bytes_per_gpu"] == 8_437_735_097
    # 18 layers x 16 tokens x 8 heads x (64 + 64) x 2 B = 589,824 B per block: 14,305 blocks, 14,304 without the
    # null block; the sliding group keeps cdiv(127 + 2 x 8,192, 16) + 1 = 1,033, the full group 13,271 x 16 tokens
    assert cc["knee_seq_len"] == d["max_model_len_that_fits"] == 212_336
    # GPU KV cache size at 131,072: int(14,305 / (8,192 + 1,033) x 131,072) = 203,250 (not 114,432 from 73,728 B/token)
    assert cc["kv_tokens_per_gpu"] == d["kv_tokens_per_gpu"] == 203_250
    # one 131,072-token request reserves 9,225 blocks = 5,441,126,400 B (5.07 GiB), not 131,072 x 73,728 B (4.50 GiB)
    assert {p["seq_len"]: p["kv_bytes_per_gpu"] for p in cc["by_seq_len"]}[131072] == 9225 * 589_824


def test_stack_file_without_utilization_labels_the_engine_default(tmp_path):
    # tester item 16: the budget said "given (...)" while the effective configuration said 0.92 engine default
    stack = tmp_path / "stack.yaml"
    stack.write_text("model: Qwen/Qwen3-235B-A22B\nengine: {name: vllm, version: '0.33.0'}\nhardware: {gpu: H200, count: 8}\n"
                     "techniques:\n  - tensor-parallelism: {tp_size: 8}\n  - paged-kv-cache\nsettings:\n  max_model_len: 32768\n")
    code, out, err = run_cli("check", str(stack), "--format", "json", "--no-speed")
    assert code in (0, 1), err
    d = json.loads(out)
    want = "vllm 0.33.0 default: vllm >=0.20.0,<0.34.0 default (vllm/config/cache.py:66 at vllm 0.20.0)"
    assert d["derived"]["kv_budget_gpu_memory_utilization"] == 0.92
    assert d["derived"]["kv_budget_utilization_source"] == want
    assert d["derived"]["kv_budget_breakdown"][0]["source"].endswith(want)
    eff = {e["setting"]: e for e in d["effective_config"]}["gpu_memory_utilization"]
    assert eff["source"] == "engine default" and eff["value"] == 0.92
    # given in the file: still 'given'
    stack.write_text(stack.read_text() + "  gpu_memory_utilization: 0.9\n")
    code, out, err = run_cli("check", str(stack), "--format", "json", "--no-speed")
    d = json.loads(out)
    assert d["derived"]["kv_budget_utilization_source"].startswith("given (")
    assert d["derived"]["kv_budget_gpu_memory_utilization"] == 0.9


def test_gpu_memory_uses_the_visible_capture(catalog):
    from kg.derive.kv import gpu_memory_bytes
    assert gpu_memory_bytes(catalog.resolve_hardware("H100-SXM")) == 81_559 * 2**20  # 85,520,809,984
    assert gpu_memory_bytes(catalog.resolve_hardware("L40S")) == 46_068 * 2**20      # 48,305,405,952
    assert gpu_memory_bytes(catalog.resolve_hardware("H200")) == 143_771 * 2**20     # 150,754,820,096 (140.40 GiB)
    assert gpu_memory_bytes(catalog.resolve_hardware("H800")) == 80 * 2**30          # no capture: vendor figure


def test_check_labels_the_kv_budget():
    # issue 13: the breakdown of kg.derive.budget. H200 (nvidia-smi 143,771 MiB) ceil(150,754,820,096 x 0.9) =
    # 135,679,338,087 B - 470,185,672,704 / 8 = 58,773,209,088 B weights - activation: the sampler's 1,024 requests
    # x 151,936 x 14 B = 2,178,154,496 B (above the forward's 8,192 x (8 x (4,096 + 4,096) + 3 x 4,096) x 2 =
    # 1,275,068,416 B) - CUDA graphs 0.25 GiB - non-torch 3.58 GiB (TP > 1 on a 70 GiB+ GPU), and vLLM 0.34.0's
    # extensible cache keeps the 0.25 GiB graph estimate free again in its transient peak (gpu_worker.py:771-773,
    # extensible_kv_cache.py:617): 70,347,107,861 B = 65.52 GiB (at 0.9 no margin binds).
    # Error bar (kg.derive.budget, the text sweep and fit print too): activation 0.15 x 2.03 + 0.25 = 0.554 GiB
    # + graphs 0.25 + the graph estimate again 0.25 + non-torch 1.0 = 2.05 GiB
    code, out, _ = run_cli("check", EXAMPLE, "--no-speed")  # the budget lines only: no Speed section
    assert "KV budget per GPU (estimate)               ~65.5 GiB (+-2.05 GiB)" in out
    assert "- activation peak                        2.03 GiB" in out
    code, out, _ = run_cli("check", EXAMPLE, "--kv-budget-gib", "40", "--no-speed")
    assert "KV budget per GPU (given)                  40.00 GiB" in out
