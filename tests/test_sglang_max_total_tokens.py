"""SGLang ``--max-total-tokens N`` caps the KV pool at ``min(profiled, N)`` tokens, floored to whole pages; a larger N
is ignored with a warning (sglang 0.5.23 mem_cache/kv_cache_configurator.py:3090-3106 ``_apply_token_constraints``;
0.5.5 model_executor/model_runner.py:1598-1611).

Model facts (catalog/models/Qwen__Qwen3-235B-A22B.json): 94 layers, 4 KV heads, head_dim 128, bfloat16: at TP 8 the
4 KV heads are replicated to 8, 94 x 2 x 1 x 128 x 2 B = 48,128 B/token per GPU; a 10 GiB budget holds
10,737,418,240 // 48,128 = 223,101 tokens. SGLang's default context length for it is 40,960 tokens."""
from __future__ import annotations

import json

from kg.cli import main

BASE = "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 8"


def _check(extra: str, capsys, fmt: str = "json"):
    code = main(["check", "--sglang", BASE + extra, "--kv-budget-gib", "10", "--format", fmt])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return json.loads(out) if fmt == "json" else out


def test_max_total_tokens_below_the_pool_caps_tokens_and_concurrency(capsys):
    d = _check(" --max-total-tokens 100000", capsys)["derived"]
    assert d["kv_tokens_per_gpu"] == 100000 and d["kv_tokens_total"] == 100000
    assert d["max_concurrency"] == 2.44  # 100,000 / 40,960 = 2.441
    assert d["kv_max_total_tokens"].startswith("100,000: caps the pool at 100,000 of the profiled 223,101 tokens")


def test_max_total_tokens_is_floored_to_whole_pages(capsys):
    d = _check(" --max-total-tokens 100000 --page-size 64", capsys)["derived"]
    assert d["kv_tokens_per_gpu"] == 99968  # 100,000 // 64 x 64; the profiled pool is 223,101 // 64 x 64 = 223,040
    assert "of the profiled 223,040 tokens" in d["kv_max_total_tokens"]


def test_max_total_tokens_above_the_pool_keeps_the_profiled_pool_and_says_so(capsys):
    d = _check(" --max-total-tokens 300000", capsys)["derived"]
    assert d["kv_tokens_per_gpu"] == 223101 and d["max_concurrency"] == 5.45  # 223,101 / 40,960
    assert d["kv_max_total_tokens"].startswith("300,000, above the profiled 223,101 tokens: SGLang warns")
    d = _check("", capsys)["derived"]
    assert d["kv_tokens_per_gpu"] == 223101 and "kv_max_total_tokens" not in d


def test_max_total_tokens_is_read_not_ignored(capsys):
    out = _check(" --max-total-tokens 100000", capsys, fmt="text")
    assert "--max-total-tokens (SGLang)" in out
    assert "ignored (not modelled)" not in out or "--max-total-tokens" not in out.split("ignored (not modelled)")[1]
