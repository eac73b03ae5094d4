"""vLLM V1 KV planning (kg.engines.vllm.kv_plan; issue 13 priority 2). Every number is worked from the
vLLM 0.33.0 source lines cited in kg/derive/kv_specs.py."""
from __future__ import annotations

import json

import pytest

from conftest import REPO, run_cli as _run_cli

from report_text import unwrap


def run_cli(*argv):
    """The in-process CLI with the text's 100-column wrapping undone, for substring assertions."""
    code, out, err = _run_cli(*argv)
    return code, unwrap(out), err

from kg.core.errors import OptkgError
from kg.derive.kv import kv_layout
from kg.engines.vllm.kv_plan import batches_in_flight, default_max_num_batched_tokens, plan_kv_cache
from kg.inputs.modelcfg import load_config_file, parse_config, resolve_model, vllm_default_max_model_len

MISTRAL = REPO / "tests/fixtures/field_cases/configs/mistral-7b-v0.1.json"
CFG = REPO / "tests/fixtures/model_configs"
GIB = 2**30


def test_mistral_sliding_window_reserves_window_plus_two_batches():
    m = load_config_file(MISTRAL)
    p = plan_kv_cache(m, max_model_len=32768)
    # 2 batches in flight x 8,192 = 16,384; cdiv(min(4096 - 1 + 16384, 32768), 16) + 1 = 1280 + 1
    assert p.max_in_flight_tokens == 16384
    assert p.blocks_per_request == 1281
    # one group of all 32 sliding layers, 16 x 8 x 256 x 2 = 65,536 B per layer per block
    assert (p.group_size, p.bytes_per_block) == (32, 2_097_152)
    c = p.capacity(30 * GIB)
    # 30 GiB // 2 MiB = 15,360 blocks; 15,360 / 1,281 = 11.9906; int(11.9906... x 32,768) = 392,909
    assert c["num_blocks"] == 15360 and c["max_concurrency"] == 11.99 and c["kv_cache_size_tokens"] == 392_909


def test_mistral_numbers_in_kv_and_check():
    # vLLM 0.33.0 (16-token blocks); kv and check agree at every release (64-token blocks from 0.34.0)
    code, out, err = run_cli("kv", "--config", str(MISTRAL), "--kv-budget-gib", "30", "--max-model-len", "32768",
                             "--format", "json", "--engine-version", "0.33.0")
    assert code == 0, err
    c = json.loads(out)["capacity"]
    assert (c["blocks_per_request"], c["max_concurrency"], c["gpu_kv_cache_size_tokens"]) == (1281, 11.99, 392_909)
    code, out, err = run_cli("check", "--vllm", "vllm serve mistralai/Mistral-7B-v0.1 --max-model-len 32768",
                             "--config", str(MISTRAL), "--kv-budget-gib", "30", "--gpu", "H100-SXM", "--format", "json",
                             "--engine-version", "0.33.0")
    assert code in (0, 1), err
    d = json.loads(out)["derived"]
    assert (d["kv_blocks_per_request"], d["max_concurrency"], d["kv_tokens_per_gpu"]) == (1281, 11.99, 392_909)


def test_gpt_oss_alternating_groups():
    m = resolve_model("openai/gpt-oss-120b")
    p = plan_kv_cache(m, max_model_len=131072)
    # 18 sliding (128) + 18 full: group size 18, one group each; 16 x 8 x 128 x 2 = 32,768 B per layer-block
    assert [(s.kind, s.layers, s.groups) for s in p.specs] == [("sliding", 18, 1), ("full", 18, 1)]
    assert p.bytes_per_block == 18 * 32768
    # sliding cdiv(min(127 + 16384, 131072), 16) + 1 = 1033; full 131,072 / 16 = 8,192
    assert p.blocks_per_request == 1033 + 8192
    c = p.capacity(30 * GIB)
    # 32,212,254,720 // 589,824 = 54,613 blocks; 54,613 / 9,225 = 5.92
    assert c["num_blocks"] == 54613 and c["max_concurrency"] == 5.92 and c["kv_cache_size_tokens"] == 775_960


def test_gemma3_without_layer_types_uses_the_5_to_1_pattern():
    m = load_config_file(CFG / "gemma-3-27b-it.json")
    # layer i is full when (i + 1) % 6 == 0: 10 of 62 layers
    assert m.num_sliding_layers == 52 and m.layer_kinds[5] == "full" and m.layer_kinds[4] == "sliding"
    assert m.derived_max_model_len == 131072  # gemma3 is never RoPE-scaled
    p = plan_kv_cache(m, max_model_len=32768)
    # group size 10: sliding 6 groups, full 1; 16 x 16 x 256 x 2 = 131,072 B per layer-block
    assert [(s.kind, s.groups, s.blocks_per_request) for s in p.specs] == [("sliding", 6, 1089), ("full", 1, 2048)]
    assert p.bytes_per_block == 1_310_720 and p.blocks_per_request == 6 * 1089 + 2048
    c = p.capacity(30 * GIB)
    # 24,576 blocks / 8,582 = 2.8637; x 32,768 = 93,836.68
    assert (c["num_blocks"], c["max_concurrency"], c["kv_cache_size_tokens"]) == (24576, 2.86, 93_836)


def test_deepseek_v3_fp8_dense_mla_stays_576():
    m = resolve_model("deepseek-ai/DeepSeek-V3")
    assert kv_layout(m, 8, 1, 1, "fp8").bytes_per_token_layer_per_rank == 576
    p = plan_kv_cache(m, 8, kv_cache_dtype="fp8")
    assert p.specs[0].kind == "mla" and p.specs[0].page_bytes == 576 * 16 and p.kv_cache_dtype_effective == "fp8"


def test_deepseek_v32_indexer_and_fp8_ds_mla():
    m = load_config_file(CFG / "deepseek-v3.2-exp.json")
    assert m.index_head_dim == 128
    # bf16 latent 576 x 2 + indexer 128 + 128 / 128 x 4 = 1,284 B/token/layer
    assert kv_layout(m, 8, 1, 1, "auto").bytes_per_token_layer_per_rank == 1284
    # fp8 on sparse MLA is fp8_ds_mla: 656 + 132 = 788
    assert kv_layout(m, 8, 1, 1, "fp8").bytes_per_token_layer_per_rank == 788
    p = plan_kv_cache(m, 8, kv_cache_dtype="fp8", max_model_len=32768)
    assert p.block_size == 64 and p.kv_cache_dtype_effective == "fp8_ds_mla"
    # one UniformType group of MLA + indexer pages: 61 x 64 x 788 B per block; cdiv(32768, 64) = 512 blocks/request
    assert p.specs[0].kind == "mla+indexer" and p.bytes_per_block == 61 * 64 * 788 and p.blocks_per_request == 512


def test_qwen3_next_gdn_state_and_block_coupling():
    m = load_config_file(REPO / "tests/fixtures/field_cases/configs/qwen3-next-80b-a3b-instruct-fp8.json")
    assert m.layer_kinds.count("linear") == 36 and m.layer_kinds.count("full") == 12
    # only the 12 full-attention layers hold KV: 12 x 2 x 512 x 2 B = 24,576 B/token at TP 1
    assert kv_layout(m).bytes_per_token_per_gpu == 24576
    p = plan_kv_cache(m, max_model_len=32768, gpu_compute_capability=8.0)
    # A100 (Triton GDN kernel): GDN state conv (2 x 16 x 128 + 32 x 128) x 3 x 2 B = 49,152 + temporal
    # 32 x 128 x 128 x 2 B = 1,048,576; attention page per token 2 x 512 x 2 = 2,048 B ->
    # block 16 x cdiv(1,097,728, 16 x 2,048) = 544 tokens
    assert p.block_size == 544
    assert [(s.kind, s.layers, s.groups, s.blocks_per_request) for s in p.specs] == [
        ("gdn", 36, 3, 2), ("full", 12, 1, 61)]  # cdiv(32768, 544) = 61; GDN 2 pages with prefix caching
    assert p.bytes_per_block == 12 * 544 * 2048
    assert p.blocks_per_request == 3 * 2 + 61
    # Hopper (default): FlashInfer GDN aligns blocks to lcm(16, 64) = 64: 64 x cdiv(1,097,728, 64 x 2,048) = 576,
    # and keeps one prefill-checkpoint page: 3 pages per request; full cdiv(32768, 576) = 57
    h = plan_kv_cache(m, max_model_len=32768)
    assert h.block_size == 576
    assert [(s.kind, s.groups, s.blocks_per_request) for s in h.specs] == [("gdn", 3, 3), ("full", 1, 57)]
    # without prefix caching: 1 page per request and no checkpoint alignment
    n = plan_kv_cache(m, max_model_len=32768, enable_prefix_caching=False)
    assert n.block_size == 544 and n.specs[0].blocks_per_request == 1


def test_llama4_chunked_layers_sized_full_with_hybrid_manager_off():
    # changed on purpose (memory5): the manager is off by default only in vLLM 0.10.1-0.13.0
    # (VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 0 there, to 1 from 0.14.0)
    m = resolve_model("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert m.layer_kinds.count("chunked") == 36 and m.layer_kinds.count("full") == 12
    p = plan_kv_cache(m, max_model_len=32768, engine_version="0.13.0")
    assert not p.hybrid_allocator and [s.kind for s in p.specs] == ["full"]
    p2 = plan_kv_cache(m, max_model_len=32768)
    # chunked: cdiv(min(8192 + 16384, 32768), 16) = 1536; group size 12 -> 3 chunked groups + 1 full
    assert [(s.kind, s.groups, s.blocks_per_request) for s in p2.specs] == [("chunked", 3, 1536), ("full", 1, 2048)]


def test_defaults_and_errors():
    assert default_max_num_batched_tokens(80, "H100-SXM") == 8192
    assert default_max_num_batched_tokens(80, "A100-80GB") == 2048
    assert default_max_num_batched_tokens(180, "B200") == 16384
    assert batches_in_flight(1) == 2 and batches_in_flight(4) == 4 and batches_in_flight(1, False) == 1
    with pytest.raises(OptkgError, match="dcp"):
        plan_kv_cache(load_config_file(MISTRAL), dcp_size=2)
    longrope = {"num_attention_heads": 32, "num_hidden_layers": 2, "hidden_size": 3072,
                "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
                "rope_scaling": {"type": "longrope", "short_factor": [1.0], "long_factor": [1.0]}}
    assert vllm_default_max_model_len(longrope) == 4096
    assert parse_config(longrope, "phi").derived_max_model_len == 131072


def test_kv_flags_max_model_len_beyond_the_context():
    # Llama-3.1-8B: max_position_embeddings 131,072 with llama3 RoPE scaling (not multiplied: config/model.py:2610-2621)
    code, out, err = run_cli("kv", "--model", "meta-llama/Meta-Llama-3.1-8B", "--max-model-len", "1000000",
                             "--kv-budget-gib", "30")
    assert code == 0, err
    assert out.startswith("WARNING max-model-len-exceeds-max-position-embeddings: max_model_len 1,000,000 is above "
                          "the 131,072 tokens")
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in out.splitlines()[0]
    code, out, err = run_cli("kv", "--model", "meta-llama/Meta-Llama-3.1-8B", "--max-model-len", "131073", "--format", "json")
    d = json.loads(out)
    assert d["max_model_len_limit"] == 131_072 and d["warnings"][0]["rule_id"] == "max-model-len-exceeds-max-position-embeddings"
    # at the limit: no warning
    code, out, err = run_cli("kv", "--model", "meta-llama/Meta-Llama-3.1-8B", "--max-model-len", "131072", "--format", "json")
    assert "warnings" not in json.loads(out) and "WARNING" not in out


def test_qwen3_next_block_with_a_float32_ssm_state():
    # vllm 0.33.0 platforms/interface.py:1084-1104: block = align x cdiv(mamba_page, align x attention page per
    # token). --mamba-ssm-cache-dtype float32 keeps the temporal state in fp32 (mamba_utils.py:98-110):
    # conv (2 x 16 x 128 + 32 x 128) x 3 x 2 B = 49,152 + temporal 32 x 128 x 128 x 4 B = 2,097,152 -> 2,146,304 B
    m = load_config_file(REPO / "tests/fixtures/field_cases/configs/qwen3-next-80b-a3b-instruct-fp8.json")
    a100 = plan_kv_cache(m, max_model_len=32768, gpu_compute_capability=8.0, mamba_ssm_cache_dtype="float32")
    # Triton GDN kernel (16-token alignment): 16 x cdiv(2,146,304, 16 x 2,048) = 16 x 66 = 1,056 tokens
    assert a100.block_size == 1056
    # the state page is padded to 1,056 x 2,048 = 2,162,688 B: +0.76 % (the percentage vLLM logs)
    assert any("padded by 0.76% to the attention page (2,162,688 B)" in n for n in a100.notes)
    # Hopper (FlashInfer GDN, align lcm(16, 64) = 64): 64 x cdiv(2,146,304, 131,072) = 64 x 17 = 1,088
    assert plan_kv_cache(m, max_model_len=32768, mamba_ssm_cache_dtype="float32").block_size == 1088
    # TP 4: 1 KV head (1,024 B/token), state 12,288 + 8 x 128 x 128 x 4 = 536,576 B -> 16 x 33 = 528 on Triton
    assert plan_kv_cache(m, 4, max_model_len=32768, gpu_compute_capability=8.0,
                         mamba_ssm_cache_dtype="float32").block_size == 528
    # default (auto: the model's bfloat16) stays 576 on Hopper
    assert plan_kv_cache(m, max_model_len=32768).block_size == 576
    with pytest.raises(OptkgError, match="mamba cache dtype 'int3'"):
        plan_kv_cache(m, max_model_len=32768, mamba_ssm_cache_dtype="int3")
    # the flag reaches the plan from a vllm serve command and from optkg kv
    code, out, err = run_cli("kv", "--config", str(REPO / "tests/fixtures/field_cases/configs/qwen3-next-80b-a3b-instruct-fp8.json"),
                             "--max-model-len", "32768", "--mamba-ssm-cache-dtype", "float32",
                             "--gpu-compute-capability", "8.0", "--format", "json", "--engine-version", "0.33.0")
    assert code == 0, err
    assert json.loads(out)["vllm_plan"]["block_size"] == 1056
    from kg.engines.launch import parse_command
    from kg.knowledge.catalog import load_catalog
    cat, _ = load_catalog()
    qn = str(REPO / "tests/fixtures/field_cases/configs/qwen3-next-80b-a3b-instruct-fp8.json")
    st = parse_command("vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct-FP8 --mamba-ssm-cache-dtype float32", cat, "vllm",
                       model_override=qn)
    assert st.settings["mamba_ssm_cache_dtype"] == "float32"
