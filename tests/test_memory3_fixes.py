"""Issue 13 tester findings on main, each with the value worked out by hand (session 3, lane memory3).

1. sweep's max-concurrency note when the column is filled at the engine's default max_model_len;
2. ``optkg kv`` refuses a max_model_len the way ``check`` does (one shared check, same message, exit 2);
3. one percentage rounding for one quantity (training memory: report line and rule message);
4. reconcile's explanations state the formula with the numbers it prints.
"""
from __future__ import annotations

import json

import pytest

from conftest import REPO, run_cli
from kg.core.numfmt import fmt_pct

LOGS = REPO / "tests/fixtures/logs"
QWEN = "Qwen/Qwen3-235B-A22B"


def test_sweep_says_which_max_model_len_its_concurrency_column_uses():
    code, out, err = run_cli("sweep", "--vllm", f"vllm serve {QWEN}", "--tp", "8", "--gpu", "H200", "--count", "8",
                             "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["combinations"][0]["max_concurrency"] == 37.65  # the column is filled ...
    # ... at Qwen3-235B-A22B's max_position_embeddings 40,960 (no RoPE scaling), the length vLLM runs with
    assert d["notes"] == ["max concurrency at the engine's default max_model_len 40,960 tokens (the model's context "
                          "limit); pass --max-model-len for another length"]


def test_sweep_keeps_the_hint_when_the_column_is_empty():
    # SGLang: check computes no concurrency without a given max_model_len, so the column is '-'
    code, out, err = run_cli("sweep", "--sglang", f"python -m sglang.launch_server --model-path {QWEN}", "--tp", "8",
                             "--gpu", "H200", "--count", "8")
    assert code == 0, err
    assert "note: pass --max-model-len for max concurrency" in out


@pytest.mark.parametrize("value, message", [
    ("100000000000000000000000", "--max-model-len: max_model_len: expected a value <= 1e+15, found 100000000000000000000000"),
    ("0", "--max-model-len: max_model_len: expected a value >= 1, found 0"),
])
def test_kv_refuses_max_model_len_as_check_does(value, message):
    cfg = str(REPO / "catalog/models/Qwen__Qwen3-32B.json")
    code, out, err = run_cli("kv", "--config", cfg, "--tp", "8", "--max-model-len", value, "--kv-budget-gib", "30")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"optkg: error: {message}"]
    code2, out2, err2 = run_cli("check", "--vllm", "vllm serve Qwen/Qwen3-32B", "--max-model-len", value, "--gpu", "H100")
    assert code2 == 2 and err2.strip().splitlines() == [f"optkg: error: {message}"]


def test_fmt_pct_rounds_once():
    # 1.13496 is 113 %; rounding to 3 decimals first (1.135) printed 114 % beside it
    assert fmt_pct(1.13496) == "113%" and fmt_pct(1.20549760540) == "121%"
    assert fmt_pct(0.5, 1) == "50.0%" and fmt_pct(None) == "-" and fmt_pct(float("inf")) == "inf"


def test_training_memory_percentage_is_one_number():
    # Llama-3.1-70B, TP 8, seq 4,096, micro-batch 1 on an H100-SXM (85.52 GB): 103.10 GB per GPU = 1.20550 of the
    # GPU -> 121 %. The rule rounded the fraction to 1.205 first and its message said 120 % under a 121 % total line.
    cmd = ("torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py --tensor-model-parallel-size 8 "
           "--pipeline-model-parallel-size 1 --bf16 --micro-batch-size 1 --global-batch-size 1024 --seq-length 4096 "
           "--use-distributed-optimizer")
    code, out, err = run_cli("check", "--train", cmd, "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100")
    assert "of 85.52 GB (121%)" in out
    assert "against 85.52 GB on the H100-SXM (121%)" in out and "(120%)" not in out


def _reconcile(*argv):
    code, out, err = run_cli("reconcile", *argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_reconcile_v1_explanation_matches_its_numbers():
    d = _reconcile(str(LOGS / "vllm-21348-qwen3-235b-fp8-tp4.log"), "--vllm",
                   "vllm serve Qwen/Qwen3-235B-A22B-FP8 --tensor-parallel-size 4", "--config",
                   str(REPO / "tests/fixtures/field_cases/configs/qwen3-235b-a22b-fp8.json"), "--gpu", "H100-SXM",
                   "--engine-version", "0.10.0")
    r = {x["quantity"]: x for x in d["logs"][0]["rows"]}
    # floor(8.11 GiB / 770,048 B) = 11,308 blocks; int(11,308 / 2,560 x 40,960) = 180,928 (the unrounded 4.4172,
    # not the 4.42 shown: 4.42 x 40,960 would be 181,043)
    size = r["GPU KV cache size"]
    assert size["reproduced"] == 180_928 == 11_308 * 16
    assert "int(num_blocks / blocks per request x max_model_len) = int(11,308 / 2,560 x 40,960) = 180,928" in size["explanation"]
    conc = r["max concurrency at 40,960 tokens"]
    assert conc["reproduced"] == 4.42 and "(11,308 / 2,560 = 4.4172)" in conc["explanation"]


def test_reconcile_v0_and_sglang_explanations_match_their_numbers():
    d = _reconcile(str(LOGS / "vllm-10517-llama31-8b-rtx3090-29k.log"), "--vllm",
                   "vllm serve meta-llama/Llama-3.1-8B --max-model-len 29000")
    r = {x["quantity"]: x for x in d["logs"][0]["rows"]}
    assert "= 23.58 x 0.9 - 17.98 - 0.35 GiB = 2.892 GiB" in r["KV cache memory"]["explanation"]
    assert r["GPU blocks"]["reproduced"] == 1_479  # floor(2.89 x 2^30 / 2,097,152) = floor(1,479.68)
    assert "reproduced from the logged 2.89 GiB = 1,479" in r["GPU blocks"]["explanation"]
    assert "= 1,478 x 16 / 29,000 = 0.8154" in r["max concurrency at 29,000 tokens"]["explanation"]
    d = _reconcile(str(LOGS / "sglang-21348-qwen3-235b-fp8-tp4.log"), "--sglang",
                   "python3 -m sglang.launch_server --model Qwen/Qwen3-235B-A22B-FP8 --tp 4 --mem-fraction-static 0.93",
                   "--config", str(REPO / "tests/fixtures/field_cases/configs/qwen3-235b-a22b-fp8.json"), "--gpu", "H100-SXM")
    r = {x["quantity"]: x for x in d["logs"][0]["rows"]}
    # 8.23 x 2^30 / (94 layers x 1 head x 128 x 2 B) = 367,224.9 -> 367,224 - page 1
    assert r["#tokens"]["reproduced"] == 367_223
    assert "floor(8.23 GiB / (94 x 1 x 128 x 2 B)) - 1 = 367,223" in r["#tokens"]["explanation"]


def test_longest_request_leaves_out_the_null_block():
    # tester finding 5 ("3,012 blocks where 3,011 fit"): vLLM >= 0.29.0 checks one request and estimates the longest
    # against the budget less the null block BlockPool holds back (vllm 0.33.0 v1/core/kv_cache_planning.py:170-176,
    # 1533-1541); the allocation and "GPU KV cache size" still use every block
    from kg.derive.kv import kv_capacity, kv_layout
    from kg.derive.kv_specs import null_block_bytes
    from kg.inputs.modelcfg import resolve_model
    lay = kv_layout(resolve_model("meta-llama/Llama-3.1-8B"))  # 131,072 B/token, 2 MiB per 16-token block
    assert kv_capacity(lay, 2**30).max_model_len_that_fits == 8192
    assert kv_capacity(lay, 2**30, null_block_bytes=2 * 2**20).max_model_len_that_fits == 8176  # 511 blocks
    assert null_block_bytes("vllm", None, 2 * 2**20) == null_block_bytes("vllm", "0.29.0", 2 * 2**20) == 2 * 2**20
    assert null_block_bytes("vllm", "0.28.0", 2 * 2**20) == 0 == null_block_bytes("sglang", None, 2 * 2**20)
    # optkg kv, Qwen3-32B TP 8 (32,768 B/token): 30 GiB = 61,440 blocks, 61,439 usable -> 983,024 tokens
    code, out, err = run_cli("kv", "--config", str(REPO / "catalog/models/Qwen__Qwen3-32B.json"), "--tp", "8",
                             "--kv-budget-gib", "30", "--max-model-len", "40960", "--format", "json")
    cap = json.loads(out)["capacity"]
    assert (cap["num_blocks"], cap["max_model_len_that_fits"]) == (61_440, 983_024)


def test_fit_prefix_cache_leaves_out_the_null_block():
    # the block pool never caches its null block (vllm 0.33.0 v1/core/block_pool.py:191): 0.125 GiB of Llama-3.1-8B KV
    # is 64 blocks of 16 tokens, 63 usable = 1,008 tokens = 1 whole 512-token trace block (it printed 2)
    from kg.analyses.fit import capacity_bytes
    from kg.analyses.fitmeasure import measure_trace
    from kg.derive.kv import cacheable_tokens, kv_layout
    from kg.inputs.modelcfg import resolve_model
    lay = kv_layout(resolve_model("meta-llama/Llama-3.1-8B"))
    assert cacheable_tokens(lay, 2**27) == 63 * 16 and cacheable_tokens(lay, 2 * 2**20) == 0
    m = measure_trace(REPO / "rules/fixtures/traces/small_prefix.jsonl")
    assert capacity_bytes(m, lay, 2**27)["gpu_capacity"]["blocks"] == 1
    assert capacity_bytes(m, lay, 2**27 + 2 * 2**20)["gpu_capacity"]["blocks"] == 2
    # Qwen3-235B TP 8 on an H200 (fit's budget 74,221,994,640 B): 96,386 blocks - 1 = 1,542,160 tokens = 3,012.03 trace
    # blocks -> 3,012 (what fit prints for the Mooncake trace); at exactly 96,384 blocks it is 3,011, not 3,012
    lay8 = kv_layout(resolve_model("Qwen/Qwen3-235B-A22B"), 8)
    assert cacheable_tokens(lay8, 74_221_994_640) // 512 == 3_012
    assert cacheable_tokens(lay8, 96_384 * 770_048) // 512 == 3_011
