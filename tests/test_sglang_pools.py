"""SGLang 0.5.23's KV token pools (kg.engines.sglang.pools), exact values from pool_configurator.py."""
from __future__ import annotations

import json

from conftest import run_cli
from kg.engines.sglang.pools import is_sglang_hybrid_swa, sglang_pools
from kg.inputs.modelcfg import resolve_model

GIB = 2**30
OSS = "python -m sglang.launch_server --model-path openai/gpt-oss-120b --tp 4"


def test_gpt_oss_hybrid_swa_pool():
    m = resolve_model("openai/gpt-oss-120b")  # GptOssForCausalLM: 18 sliding + 18 full layers, 8 KV heads, head_dim 64
    assert is_sglang_hybrid_swa(m)
    # TP 4: 2 KV heads x (64 + 64) x 2 B = 512 B per token per layer; one full-pool token costs
    # 512 x 18 + 0.8 x 512 x 18 = 16,588.8 B (pool_configurator.py:797-805)
    p = sglang_pools(m, 4, 20 * GIB)
    assert (p.kind, p.cell_bytes) == ("hybrid-swa", 16_588.8)
    # full = int(21,474,836,480 // 16,588.8) = 1,294,538; swa = int(1,294,538 x 0.8) = 1,035,630
    assert (p.max_total_num_tokens, p.full_tokens, p.swa_tokens) == (1_294_538, 1_294_538, 1_035_630)
    # --page-size 64 floors both to pages: 1,294,528 and int(1,294,528 x 0.8) // 64 x 64 = 1,035,584
    p64 = sglang_pools(m, 4, 20 * GIB, page_size=64)
    assert (p64.full_tokens, p64.swa_tokens) == (1_294_528, 1_035_584)
    # --swa-full-tokens-ratio 0.5: cell 9,216 + 4,608 = 13,824 B -> 1,553,445 full, 776,722 SWA
    p5 = sglang_pools(m, 4, 20 * GIB, swa_full_tokens_ratio=0.5)
    assert (p5.cell_bytes, p5.full_tokens, p5.swa_tokens) == (13_824.0, 1_553_445, 776_722)
    # --disable-hybrid-swa-memory: one pool over 36 layers, 18,432 B per token -> 1,165,084
    d = sglang_pools(m, 4, 20 * GIB, disable_hybrid_swa_memory=True)
    assert (d.kind, d.max_total_num_tokens) == ("default", 20 * GIB // 18_432) == ("default", 1_165_084)


def test_dense_and_non_listed_sliding_models_use_the_default_pool():
    llama = resolve_model("meta-llama/Meta-Llama-3.1-8B")
    assert sglang_pools(llama, 1, 20 * GIB).max_total_num_tokens == 20 * GIB // 131_072 == 163_840
    # Gemma-2 has sliding layers but is not in SGLang 0.5.23's hybrid-SWA list (model_config.py:2651-2690)
    assert not is_sglang_hybrid_swa(resolve_model("google/gemma-2-9b-it"))


def test_check_prints_sglang_pools():
    def derived(*extra):
        code, out, err = run_cli("check", "--sglang", OSS + "".join(" " + x for x in extra), "--kv-budget-gib", "20",
                                 "--format", "json")
        assert code in (0, 1), err
        return json.loads(out)["derived"]
    d = derived()
    assert d["kv_sglang_pool"] == "hybrid-swa"
    assert d["kv_tokens_per_gpu"] == d["kv_sglang_full_pool_tokens"] == 1_294_538
    assert d["kv_sglang_swa_pool_tokens"] == 1_035_630
    assert derived("--swa-full-tokens-ratio 0.5")["kv_tokens_per_gpu"] == 1_553_445
    off = derived("--disable-hybrid-swa-memory")
    assert off["kv_sglang_pool"] == "default" and off["kv_tokens_per_gpu"] == 1_165_084
    code, out, err = run_cli("check", "--sglang", OSS, "--kv-budget-gib", "20")
    assert "  SGLang SWA-pool tokens per GPU             1,035,630" in out
    assert "  KV tokens per GPU                          1,294,538" in out
