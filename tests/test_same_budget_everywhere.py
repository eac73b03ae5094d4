"""One stack, one set of numbers (issue 13: "check, fit and sweep print the same budget for the same stack").

The numbers are worked for vLLM 0.33.0 (16-token blocks, gpu_memory_utilization 0.92), so every command names it;
test_given_budget_whole_blocks_by_hand also holds the latest release (64-token blocks) in check and fit.

check, fit and sweep derive the budget (kg.derive.budget.serving_budget), the GPU KV cache size and the longest
single request (kg.derive.kv.kv_capacity: whole 16-token blocks, vLLM's null block held back from the one-request
estimate from 0.29.0) through the same functions, and print the budget's error bar with the same text
(kg.core.numfmt.fmt_error_gib)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli

REPO = Path(__file__).resolve().parents[1]
SMALL = str(REPO / "rules" / "fixtures" / "traces" / "small_prefix.jsonl")
LLAMA70 = "vllm serve meta-llama/Meta-Llama-3.1-70B -tp 4"


@pytest.fixture(scope="module")
def llama70():
    # no test here reads the Speed section (~1 CPU-s a point): --no-speed
    code, out, err = run_cli("check", "--engine-version", "0.33.0", "--vllm", LLAMA70, "--gpu", "H100-SXM", "--count", "4", "--format", "json",
                             "--no-speed")
    assert code in (0, 1), err
    check = json.loads(out)["derived"]
    code, out, err = run_cli("fit", "--engine-version", "0.33.0", SMALL, "--model", "meta-llama/Meta-Llama-3.1-70B", "--tp", "4", "--gpu", "H100-SXM",
                             "--format", "json")
    assert code in (0, 1), err
    fit = json.loads(out)
    code, out, err = run_cli("sweep", "--engine-version", "0.33.0", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-70B", "--tp", "4",
                             "--gpu", "H100-SXM", "--count", "4", "--format", "json", "--no-speed")
    assert code in (0, 1), err
    return check, fit, json.loads(out)


def test_kv_tokens_and_longest_request_agree(llama70):
    check, fit, sweep = llama70
    # 28,573 blocks of 16 tokens (81,920 B/token/GPU x 16 = 1,310,720 B per block): GPU KV cache size 457,168 tokens;
    # one request gets all but the null block: 28,572 x 16 = 457,152 (fit printed 457,175 before: no whole blocks)
    assert check["kv_num_blocks"] == 28_573
    assert (check["kv_tokens_per_gpu"], check["max_model_len_that_fits"]) == (457_168, 457_152)
    cc = fit["cost_curve"]
    assert (cc["kv_tokens_per_gpu"], cc["knee_seq_len"]) == (457_168, 457_152)
    row = sweep["combinations"][0]
    assert row["kv_tokens_per_gpu"] == 457_168
    # the budget itself: the same bytes in all three
    assert check["kv_budget_bytes_per_gpu"] == round(cc["budget_bytes_per_gpu"]) == row["kv_budget_bytes_per_gpu"]


def test_error_bar_is_one_text(llama70):
    check, fit, sweep = llama70
    # Llama-3.1-70B TP 4 on an H100: activation 0.15 x peak + 0.25 GiB, graphs 0.25, non-torch 1.0 (TP > 1) -> 1.76 GiB
    assert check["kv_budget_source"].endswith("(kg.derive.budget; +-1.76 GiB)")
    assert sweep["kv_budget_source"] == check["kv_budget_source"]  # one row: no 'rank 1' prefix
    code, out, _ = run_cli("check", "--engine-version", "0.33.0", "--vllm", LLAMA70, "--gpu", "H100-SXM", "--count", "4",
                           "--no-speed")
    assert "KV budget per GPU (estimate)               ~34.9 GiB (+-1.76 GiB)" in out
    code, out, _ = run_cli("fit", "--engine-version", "0.33.0", SMALL, "--model", "meta-llama/Meta-Llama-3.1-70B", "--tp", "4", "--gpu", "H100-SXM")
    assert "(kg.derive.budget; +-1.76 GiB))" in out


def test_sweep_header_is_the_best_rows_budget():
    # TP 1 on an H100 has non-torch +-0.6 GiB, TP 2 and 4 +-1.0 GiB: the header shows rank 1's (TP 4), as check does
    code, out, err = run_cli("sweep", "--engine-version", "0.33.0", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-70B", "--tp", "1,2,4",
                             "--gpu", "H100-SXM", "--count", "4", "--format", "json")
    d = json.loads(out)
    assert d["combinations"][0]["tp_size"] == 4
    assert d["kv_budget_source"] == ("rank 1: estimated: requested - weights - activation peak - CUDA graphs - "
                                     "non-torch (kg.derive.budget; +-1.76 GiB); other rows differ (kv_budget_source "
                                     "in --format json)")
    # TP 1: activation 0.15 x peak + 0.25 GiB + graphs 0.25 + non-torch 0.6 (TP 1 on a 70 GiB+ GPU) = 1.36 GiB
    assert {c["tp_size"]: c["kv_budget_source"].rsplit(";", 1)[1] for c in d["combinations"]} == {
        4: " +-1.76 GiB)", 2: " +-1.76 GiB)", 1: " +-1.36 GiB)"}


def test_given_budget_whole_blocks_by_hand():
    # Llama-3.1-8B, 131,072 B/token, a given 16 GiB: 16 GiB / (131,072 x 16) = 8,192 blocks = 131,072 tokens;
    # the longest request: 8,191 blocks (the null block held back) = 131,056 tokens, in check and in fit
    code, out, err = run_cli("check", "--engine-version", "0.33.0", "--vllm", "vllm serve meta-llama/Llama-3.1-8B", "--kv-budget-gib", "16",
                             "--format", "json")
    d = json.loads(out)["derived"]
    assert (d["kv_tokens_per_gpu"], d["max_model_len_that_fits"]) == (131_072, 131_056)
    code, out, err = run_cli("fit", "--engine-version", "0.33.0", SMALL, "--model", "meta-llama/Llama-3.1-8B", "--kv-budget-gib", "16",
                             "--format", "json")
    cc = json.loads(out)["cost_curve"]
    assert (cc["kv_tokens_per_gpu"], cc["knee_seq_len"]) == (131_072, 131_056)
    # the latest release (0.34.0: 64-token blocks): 16 GiB / (131,072 x 64) = 2,048 blocks = 131,072 tokens; the
    # longest request 2,047 x 64 = 131,008, in check and in fit alike
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Llama-3.1-8B", "--kv-budget-gib", "16",
                             "--format", "json")
    d = json.loads(out)["derived"]
    code, out, err = run_cli("fit", SMALL, "--model", "meta-llama/Llama-3.1-8B", "--kv-budget-gib", "16",
                             "--format", "json")
    cc = json.loads(out)["cost_curve"]
    assert (d["kv_tokens_per_gpu"], d["max_model_len_that_fits"]) == (cc["kv_tokens_per_gpu"], cc["knee_seq_len"]) == (
        131_072, 131_008)


def test_kv_gpu_agrees_with_check(llama70):
    # optkg kv --gpu: the budget check estimates for `vllm serve MODEL -tp 4` on the GPU (kg.derive.budget.gpu_default_budget)
    check, _, _ = llama70
    code, out, err = run_cli("kv", "--engine-version", "0.33.0", "--model", "meta-llama/Meta-Llama-3.1-70B", "--tp", "4", "--gpu", "H100", "--count", "4",
                             "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["gpu"] == {"id": "H100-SXM", "count": 4}
    assert d["kv_budget"]["kv_bytes"] == check["kv_budget_bytes_per_gpu"]
    assert d["kv_budget"]["source"] == check["kv_budget_source"]
    c = d["capacity"]
    assert (c["num_blocks"], c["kv_tokens_per_gpu"], c["max_model_len_that_fits"]) == (28_573, 457_168, 457_152)
    code, out, err = run_cli("kv", "--engine-version", "0.33.0", "--model", "meta-llama/Meta-Llama-3.1-70B", "--tp", "4", "--gpu", "H100")
    assert "KV budget per GPU (estimate)         ~34.9 GiB (+-1.76 GiB) on H100-SXM" in out
    assert "GPU KV cache size (vLLM)             457,168 tokens" in out


def test_kv_gpu_input_errors():
    # a bare number is not a GPU name (it used to be read as --gpu-compute-capability)
    code, out, err = run_cli("kv", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "8.0")
    assert code == 2 and err.count("\n") == 1
    assert "--gpu: '8.0' is a number; give a GPU name from catalog/hardware" in err
    code, out, err = run_cli("kv", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H1000")
    assert code == 2 and "unknown GPU 'H1000'" in err
    code, out, err = run_cli("kv", "--model", "meta-llama/Meta-Llama-3.1-70B", "--tp", "4", "--gpu", "H100", "--count", "2")
    assert code == 2 and "--count: 2 GPU(s) cannot hold tp 4 x pp 1 = 4" in err


def test_visible_memory_per_gpu():
    # the memory the engine sees (catalog memory_visible_mib, sources in each entry), else the vendor figure
    from kg.derive.kv import gpu_memory_bytes
    from kg.knowledge.catalog import load_catalog
    cat, _ = load_catalog()
    mib = {h: hw.get("memory_visible_mib") for h, hw in cat.hardware.items()}
    assert {h: v for h, v in mib.items() if v} == {
        "H100-SXM": 81_559, "L40S": 46_068,                     # nvidia-smi captures (nvidia_gpu_exporter)
        "RTX-3090": 24_146,                                      # vLLM issue 10517: total_gpu_memory=23.58GiB
        "RTX-4090": 24_564,                                      # nvidia-smi, RLinf#255
        "A100-80GB": 81_920, "A100-40GB": 40_960, "A10": 23_028, "L4": 23_034, "T4": 15_360,  # modal-client#2797
        "H200": 143_771,                                         # nvidia-smi capture (nvidia_gpu_exporter)
        "B200": 183_359}                                         # nvidia-smi, Modal GPU glossary
    assert round(gpu_memory_bytes(cat.resolve_hardware("RTX-3090")) / 2**30, 2) == 23.58
    # the rest use the vendor figure read as GiB (no public capture sourced yet)
    assert sorted(h for h, v in mib.items() if not v) == [
        "A10G", "A800-40GB", "Arc-A770-16GB", "Arc-A770-8GB", "GB10", "GB200", "GH200", "H100-PCIe", "H20", "H800",
        "L20", "MI250X", "MI300X", "MI325X", "MI355X", "Max-1550", "Quadro-RTX-8000", "RTX-4060", "RTX-5090",
        "RTX-PRO-6000", "V100"]
    assert gpu_memory_bytes(cat.resolve_hardware("H800")) == 80 * 2**30
