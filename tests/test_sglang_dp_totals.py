"""SGLang with DP attention runs one KV pool per attention-DP rank: totals multiply by dp, labelled so.

Model facts (catalog/models/Qwen__Qwen3-235B-A22B.json, the Hugging Face config.json): 94 layers,
64 query heads, 4 KV heads, head_dim 128, bfloat16."""
from __future__ import annotations

import json

from conftest import REPO, run_cli
from kg.cli import main

LOGS = REPO / "tests/fixtures/logs"
QWEN = "Qwen/Qwen3-235B-A22B"


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _derived(argv, capsys):
    code, out, _ = run(argv + ["--format", "json"], capsys)
    return json.loads(out)["derived"]


def test_kv_tokens_total_counts_every_sglang_dp_pool(capsys):
    base = f"python -m sglang.launch_server --model-path {QWEN} --tp 8"
    # 10 GiB = 10,737,418,240 B / 48,128 B/token = 223,101 tokens per GPU (SGLang pages of 1 token)
    one = _derived(["check", "--sglang", base, "--kv-budget-gib", "10"], capsys)
    assert one["kv_tokens_per_gpu"] == 223101 and one["kv_tokens_total"] == 223101
    # --dp 2 with DP attention: 2 attention groups, each its own pool -> 2 x 223,101 = 446,202
    two = _derived(["check", "--sglang", base + " --dp 2 --enable-dp-attention", "--kv-budget-gib", "10"], capsys)
    assert two["kv_tokens_per_gpu"] == 223101 and two["kv_tokens_total"] == 446202


def test_sglang_dp_attention_total_is_labelled_by_dp_and_reconcile_header_names_the_engine_once():
    # tester item 17: the total multiplies one pool by dp_size (8 schedulers), not by dcp
    code, out, err = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 "
                             "--tp 8 --dp 8 --enable-dp-attention", "--gpu", "H200", "--count", "8")
    assert code in (0, 1), err
    # 231,890 per pool x 8; the static pool is 140.40 GiB (H200 nvidia-smi 143,771 MiB) x SGLang's computed 0.758
    # (reserve 34,816 MiB under DP attention, kg.engines.sglang.memfrac; was the flat 0.88 -> 501,666 per pool, and
    # 240,978 on the vendor's 141 GiB): changed on purpose
    assert "KV tokens, all pools (x dp 8)              1,855,120" in out
    assert "scheduler-wide (x dcp)" not in out
    code, out, err = run_cli("reconcile", str(LOGS / "sglang-21348-qwen3-235b-fp8-tp4.log"))
    assert code == 0, err
    # the header names the log by its full path, so it wraps where the checkout's path is long: read it unwrapped
    flat = " ".join(out.split())
    assert flat.startswith(f"optkg reconcile: {LOGS / 'sglang-21348-qwen3-235b-fp8-tp4.log'} (sglang) ")
    assert flat.count("(sglang)") == 1
