"""sweep's columns: which max_model_len the concurrency column uses, the hint when it is empty, and CSV integers."""
from __future__ import annotations

import csv
import io
import json

from conftest import run_cli
from kg.cli import main

QWEN = "Qwen/Qwen3-235B-A22B"


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_sweep_says_which_max_model_len_its_concurrency_column_uses():
    code, out, err = run_cli("sweep", "--vllm", f"vllm serve {QWEN}", "--tp", "8", "--gpu", "H200", "--count", "8",
                             "--format", "json", "--engine-version", "0.33.0")
    assert code == 0, err
    d = json.loads(out)
    assert d["combinations"][0]["max_concurrency"] == 37.35  # the column is filled (vLLM 0.33.0: utilisation 0.92) ...
    # ... at Qwen3-235B-A22B's max_position_embeddings 40,960 (no RoPE scaling), the length vLLM runs with
    assert d["notes"] == ["max concurrency at the engine's default max_model_len 40,960 tokens (the model's context "
                          "limit); pass --max-model-len for another length"]


def test_sweep_fills_the_concurrency_column_at_sglangs_default_context_length():
    # SGLang without --context-length runs at the model's context length (40,960 for Qwen3-235B), so the max
    # concurrency column has a number, not '-' and the old "pass --max-model-len" hint
    code, out, err = run_cli("sweep", "--sglang", f"python -m sglang.launch_server --model-path {QWEN}", "--tp", "8",
                             "--gpu", "H200", "--count", "8")
    assert code == 0, err
    assert "note: pass --max-model-len for max concurrency" not in out


def test_sweep_csv_writes_whole_numbers_as_integers(capsys):
    code, out, _ = run(["sweep", "--vllm", f"vllm serve {QWEN}", "--tp", "4", "--kv-budget-gib", "40",
                        "--format", "csv", "--engine-version", "0.33.0"], capsys)  # 16-token blocks
    row = next(csv.DictReader(io.StringIO(out)))
    # 94 layers x 2 (K,V) x 128 x 2 bytes x (4 KV heads / tp 4 = 1 per rank) = 48,128 bytes/token/GPU
    assert row["kv_bytes_per_token_per_gpu"] == "48128"
    # 40 GiB = 42,949,672,960 B; // (48,128 x 16) = 55,775 blocks -> 892,400 tokens
    assert row["kv_budget_bytes_per_gpu"] == "42949672960" and row["kv_tokens_per_gpu"] == "892400"
