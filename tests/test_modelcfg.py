"""Model facts from real Hugging Face configs, including fallbacks and effective values."""
import json

import pytest

from kg.core.errors import OptkgError
from kg.inputs.modelcfg import bundled_model_ids, load_config_file, parse_config, resolve_model


def test_every_bundled_config_parses():
    ids = bundled_model_ids()
    assert len(ids) == 89  # 17 + 71 from the aiconfigurator-core 0.12.0 wheel + tiiuae/falcon-40b (legacy names)
    for i in ids:
        m = resolve_model(i)
        assert m.num_hidden_layers > 0 and m.num_key_value_heads >= 1


def test_fields():
    q = resolve_model("Qwen/Qwen3-235B-A22B")
    assert (q.num_attention_heads, q.num_key_value_heads, q.head_dim, q.num_hidden_layers) == (64, 4, 128, 94)
    assert q.attention == "gqa" and q.is_moe and q.num_experts == 128 and q.moe_intermediate_size == 1536
    assert q.sliding_window is None  # use_sliding_window: false
    d = resolve_model("deepseek-ai/DeepSeek-V3")
    assert d.is_mla and d.attention == "mla" and (d.kv_lora_rank, d.qk_rope_head_dim) == (512, 64)
    assert d.quant_method == "fp8" and d.weight_block_size == [128, 128]
    llama = resolve_model("meta-llama/Llama-3.1-70B")  # hub rename Meta-Llama -> Llama resolves
    assert llama.head_dim == 8192 // 64  # hidden_size / num_attention_heads fallback
    scout = resolve_model("meta-llama/Llama-4-Scout-17B-16E-Instruct")  # nested text_config
    assert scout.num_attention_heads == 40 and scout.num_key_value_heads == 8
    oss = resolve_model("openai/gpt-oss-120b")
    assert (oss.num_sliding_layers, oss.num_full_layers, oss.sliding_window) == (18, 18, 128)  # layer_types


def test_mha_fallback_and_multi_query():
    m = parse_config({"num_attention_heads": 16, "num_hidden_layers": 2, "hidden_size": 1024})
    assert m.num_key_value_heads == 16 and m.attention == "mha" and m.head_dim == 64
    m = parse_config({"num_attention_heads": 16, "num_hidden_layers": 2, "hidden_size": 1024, "multi_query": True})
    assert m.num_key_value_heads == 1 and m.attention == "mqa"


def test_missing_fields(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"num_attention_heads": 8}))
    with pytest.raises(OptkgError, match="num_hidden_layers"):
        load_config_file(p)
    p.write_text("{bad json")
    with pytest.raises(OptkgError, match=r"config.json:1:2: invalid JSON"):
        load_config_file(p)
    p.write_text(json.dumps({"num_attention_heads": "x", "num_hidden_layers": 2}))
    with pytest.raises(OptkgError, match="num_attention_heads"):
        load_config_file(p)


def test_unknown_model_says_how():
    with pytest.raises(OptkgError, match="--config"):
        resolve_model("acme/NoSuchModel-7B")


def test_query_heads_that_kv_heads_do_not_divide_are_refused_like_the_engines_do():
    # 32 query heads over 64 (or 3) KV heads: vLLM's Attention asserts num_heads % num_kv_heads == 0 while loading;
    # optkg sized 1,048,576 KV bytes/token for the 64-head config and reported 0 findings
    base = {"model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "hidden_size": 4096}
    for kv in (64, 3):
        with pytest.raises(OptkgError, match=f"num_attention_heads 32 is not a multiple of the {kv} KV heads"):
            parse_config({**base, "num_key_value_heads": kv})
    assert parse_config({**base, "num_key_value_heads": 8}).num_key_value_heads == 8
