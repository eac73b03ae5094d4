"""A rule's fix names the flags of the engine the stack runs (data in the rule: fix_by_engine)."""
from __future__ import annotations

from cli_helpers import check_json, fired
from conftest import run_cli
from kg.engine.rules import load_ruleset


def test_kv_head_replication_fix_follows_the_engine():
    _, d = check_json("--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 8")
    f = fired(d)["kv-head-replication"]
    # attention TP 8 / dp 2 = 4 = num_key_value_heads: one KV head per rank
    # SGLang >= 0.5.22 spells DP attention --attn-dp-size; since 0.5.15 it has --dcp-size (not vLLM's -dcp)
    assert "--attn-dp-size 2" in f["fix"] and "--enable-dp-attention --dp 2" in f["fix"]
    assert "vLLM -dcp" not in f["fix"] and "--dcp-size" in f["fix"]
    # SGLang 0.5.23's own DCP sizes (changed on purpose, tester finding: the numbers said {1} while the fix named
    # --dcp-size): 4 KV heads over tp 8 -> dcp 1 or 2 (kg.derive.kv.valid_dcp_sizes_sglang)
    assert f["numbers"]["suggested_dcp_sizes"] == [1, 2]
    assert d["derived"]["valid_dcp_sizes"] == [1, 2] and d["derived"]["dcp_possible"] is True
    code, out, _ = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 8")
    assert "valid DCP sizes                            {1, 2}" in out
    # before SGLang had --dcp-size (0.5.15) no DCP size is offered
    _, d = check_json("--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 8", "--engine-version", "0.5.14")
    assert fired(d)["kv-head-replication"]["numbers"]["suggested_dcp_sizes"] == [1] and "valid_dcp_sizes" not in d["derived"]
    _, d = check_json("--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8")
    assert "(vLLM -dcp 2)" in fired(d)["kv-head-replication"]["fix"]
    assert fired(d)["kv-head-replication"]["numbers"]["suggested_dcp_sizes"] == [1, 2]
    _, d = check_json("--sglang", "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8")
    assert "--enable-dp-attention --dp 8" in fired(d)["mla-kv-duplication"]["fix"]


def test_engine_specific_fix_is_data():
    from kg.engine.rules import load_ruleset
    r = load_ruleset("check").by_id("kv-head-replication")
    # trtllm since 780a751 (attention DP in the LLM-API YAML)
    assert set(r.fix_by_engine) == {"vllm", "sglang", "trtllm"} and "{max_useful_dcp_size}" in r.fix_by_engine["vllm"]
    assert isinstance(r.fix, str) and "SGLang --attn-dp-size" in r.fix  # the default names both


def test_fp8_kv_default_scales_skips_fp8_ds_mla():
    rs = load_ruleset("check")
    rule = next(r for r in rs.rules if r.id == "fp8-kv-default-scales")
    assert "kv_cache_dtype != 'fp8_ds_mla'" in rule.condition
    # vLLM: fp8_ds_mla is FlashMLASparseBackend's layout (is_sparse, DeepSeek-V3.2 DSA), dense FLASHMLA takes
    # auto/fp8/fp8_e4m3 only: the fix text must not offer it for every MLA model
    nv = next(r for r in rs.rules if r.id == "nvfp4-kv-cache-with-mla")
    assert "not DeepSeek-V3)" in nv.fix
