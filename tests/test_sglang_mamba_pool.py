"""SGLang 0.5.23's Mamba / Gated-DeltaNet state pool beside the full-attention KV pool (kg.engines.sglang.pools),
exact values worked out from mem_cache/kv_cache_configurator.py:3062-3170, 3229-3409 and configs/mamba_utils.py."""
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
from kg.engines.sglang.pools import sglang_mamba_state_bytes, sglang_pools
from kg.inputs.modelcfg import load_config_file, parse_config

GIB = 2**30
QWEN3_NEXT = REPO / "tests/fixtures/field_cases/configs/qwen3-next-80b-a3b-instruct-fp8.json"
# nvidia/Nemotron-H-8B-Base-8K config.json, the fields SGLang's NemotronHConfig reads (as quoted in a public test
# of the NemotronH parser): 24 Mamba2 layers ("M"), 4 attention layers ("*"), 24 MLP layers ("-")
NEMOTRON_H_8B = {
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
    "hidden_size": 4096, "num_hidden_layers": 52, "num_attention_heads": 32, "num_key_value_heads": 8,
    "ssm_state_size": 128, "mamba_num_heads": 128, "mamba_head_dim": 64, "n_groups": 8, "conv_kernel": 4,
    "expand": 2, "vocab_size": 131072, "max_position_embeddings": 8192, "torch_dtype": "bfloat16",
}


def qwen3_next():
    return load_config_file(QWEN3_NEXT)


def test_gdn_state_per_request():
    m = qwen3_next()  # 36 GDN layers: 16 key heads x 128, 32 value heads x 128, conv kernel 4
    # conv: (32 x 128 + 2 x 16 x 128) = 8,192 channels x 3 x 2 B (bf16) = 49,152 B; SSM: 32 x 128 x 128 x 4 B (float32)
    # = 2,097,152 B; 2,146,304 B per layer x 36 = 77,266,944 B
    assert sglang_mamba_state_bytes(m, 1) == (77_266_944, "float32")
    assert sglang_mamba_state_bytes(m, 4) == (77_266_944 // 4, "float32") == (19_316_736, "float32")
    # --mamba-ssm-dtype bfloat16 at TP 4: (2,048 x 3 x 2 + 8 x 128 x 128 x 2) x 36 = 9,879,552 B
    assert sglang_mamba_state_bytes(m, 4, "bfloat16") == (9_879_552, "bfloat16")
    with pytest.raises(OptkgError, match="does not divide"):
        sglang_mamba_state_bytes(m, 3)


def test_gdn_pools_from_the_memory_ratio():
    m = qwen3_next()
    p = sglang_pools(m, 4, 20 * GIB, context_len=m.sglang_context_length)
    mp = p.mamba
    # K = int((20 GiB x 0.9 / 1.9 - 19,316,736) // 19,316,736) = int(525.6) = 525; the pool holds K + 1 slots
    assert (mp.max_mamba_cache_size, mp.memory_bytes) == (525, 526 * 19_316_736) == (525, 10_160_603_136)
    # tokens: (21,474,836,480 - 10,160,603,136) // (12 full layers x 1 KV head x 512 x 2 B = 12,288 B) = 920,754
    assert (p.kind, p.cell_bytes, p.max_total_num_tokens) == ("hybrid-mamba", 12_288, 920_754)
    # requests: min(clamp(int(920,754 / 262,144 x 512) = 1,798, 2,048, 4,096), 920,754 // 2) = 2,048, capped by the
    # Mamba pool at 525 // 5 (3 + 2 extra_buffer tracking slots with the overlap scheduler) = 105
    assert (mp.strategy, mp.slots_per_request, mp.requests_before_mamba_cap, mp.max_running_requests) == \
        ("extra_buffer", 5, 2048, 105)
    assert mp.capped_by_mamba and mp.mamba_full_memory_ratio == 0.9


def test_explicit_slots_and_no_radix_cache():
    m = qwen3_next()
    p = sglang_pools(m, 4, 20 * GIB, max_mamba_cache_size=200, radix_cache=False, context_len=262_144)
    # 201 x 19,316,736 = 3,882,663,936 B; one slot per request without the radix cache
    assert (p.mamba.memory_bytes, p.mamba.slots_per_request, p.mamba.max_running_requests) == (3_882_663_936, 1, 200)
    assert p.max_total_num_tokens == (20 * GIB - 3_882_663_936) // 12_288 == 1_431_654
    # --max-running-requests 64 without the radix cache sizes the pool at 64 slots (kv_cache_configurator.py:3310-3317)
    q = sglang_pools(m, 4, 20 * GIB, radix_cache=False, max_running_requests=64, context_len=262_144)
    assert (q.mamba.max_mamba_cache_size, q.mamba.memory_bytes, q.mamba.max_running_requests) == (64, 65 * 19_316_736, 64)
    # under DP attention (2 groups) an explicit size is split per group
    assert sglang_pools(m, 2, 20 * GIB, max_mamba_cache_size=200, attn_dp_size=2).mamba.max_mamba_cache_size == 100
    with pytest.raises(OptkgError, match="refuses to start"):
        sglang_pools(m, 4, 0.01 * GIB)


def test_mamba2_nemotron_h_pool():
    m = parse_config(NEMOTRON_H_8B, "Nemotron-H-8B-Base-8K")
    assert (m.layer_kinds.count("mamba"), m.layer_kinds.count("full")) == (24, 4)
    # conv: (128 x 64 + 2 x 8 x 128) = 10,240 x 3 x 2 B = 61,440 B; SSM 128 x 64 x 128 x 4 B = 4,194,304 B; x 24 layers
    assert sglang_mamba_state_bytes(m, 1) == (102_137_856, "float32")
    p = sglang_pools(m, 1, 40 * GIB, context_len=8192)
    # K = int((40 GiB x 0.9 / 1.9 - 102,137,856) // 102,137,856) = 198; tokens (40 GiB - 199 x 102,137,856) //
    # (4 layers x 8 heads x 256 x 2 B = 16,384) = 1,380,874; requests min(4,096, 198 // 5 = 39)
    assert (p.mamba.max_mamba_cache_size, p.max_total_num_tokens, p.mamba.max_running_requests) == (198, 1_380_874, 39)


def test_check_shows_the_mamba_pool_for_sglang_hybrids():
    code, out, err = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path "
                             "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8 --tp 4 --context-length 131072", "--config",
                             str(QWEN3_NEXT), "--gpu", "H100", "--count", "4", "--format", "json")
    assert code in (0, 1), err
    dv = json.loads(out)["derived"]
    b, s = dv["kv_budget_bytes_per_gpu"], 19_316_736
    k = int((b * 0.9 / 1.9 - s) // s)
    assert dv["kv_sglang_pool"] == "hybrid-mamba" and dv["kv_sglang_max_mamba_cache_size"] == k
    assert dv["kv_sglang_mamba_pool_bytes"] == (k + 1) * s
    assert dv["kv_tokens_per_gpu"] == (b - (k + 1) * s) // 12_288
    assert dv["max_running_requests"] == min(4096, k // 5) and dv["max_running_requests_capped_by_mamba"]
    assert dv["max_concurrency"] == round(min(dv["kv_tokens_per_gpu"] / 131_072, k // 5), 2)
    code, text, err = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path "
                              "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8 --tp 4 --mamba-ssm-dtype bfloat16", "--config",
                              str(QWEN3_NEXT), "--gpu", "H100", "--count", "4")
    assert "SGLang Mamba state per request (bytes)     9,879,552" in text
    assert "max running requests (Mamba-capped)" in text


def test_kv_engine_sglang_shows_the_pools():
    # the same 20 GiB at TP 4 as test_gdn_pools_from_the_memory_ratio, through optkg kv
    code, out, err = run_cli("kv", "--config", str(QWEN3_NEXT), "--tp", "4", "--kv-budget-gib", "20",
                             "--engine", "sglang", "--format", "json")
    assert code == 0, err
    sp = json.loads(out)["sglang_pools"]
    assert (sp["kind"], sp["max_total_num_tokens"]) == ("hybrid-mamba", 920_754)
    assert (sp["mamba"]["max_mamba_cache_size"], sp["mamba"]["max_running_requests"]) == (525, 105)
    code, text, err = run_cli("kv", "--config", str(QWEN3_NEXT), "--tp", "4", "--kv-budget-gib", "20", "--engine", "sglang")
    assert "SGLang max running requests          105  (capped by the Mamba pool: 5 slots per request, extra_buffer)" in text
    # a dense model: SGLang's default pool, 20 GiB / (64 layers x 1 head x 256 x 2 B) = 655,360 tokens
    code, out, err = run_cli("kv", "--model", "Qwen/Qwen3-32B", "--tp", "8", "--kv-budget-gib", "20", "--engine", "sglang",
                             "--format", "json")
    sp = json.loads(out)["sglang_pools"]
    assert (sp["kind"], sp["max_total_num_tokens"], sp["mamba"]) == ("default", 655_360, None)


@pytest.mark.parametrize("logged_slots, strategy, requested, logged_cap, source", [
    # "max_running_requests is capped to 12 by the mamba state cache (max_mamba_cache_size=64, 5 state slots per
    # request)": Qwen3.8-27B, --mamba-radix-cache-strategy extra_buffer, 16 requests asked for
    (64, "extra_buffer", 16, 12, "https://github.com/MiaAI-Lab/Qwen3.8-27B-SGLang-DGX-Spark/issues/7"),
    # "... capped to 9 by the mamba state cache (max_mamba_cache_size=47, 5 state slots per request)": Qwen3.5-27B
    # hybrid FP8, SGLang 0.5.19, --max-running-requests 32, default radix cache (auto -> extra_buffer)
    (47, None, 32, 9, "https://github.com/sgl-project/sglang/issues/38846"),
])
def test_logged_mamba_caps(logged_slots, strategy, requested, logged_cap, source):
    # the cap depends on the slots and the strategy only: K // (3 + 2 tracking slots with the overlap scheduler)
    p = sglang_pools(qwen3_next(), 4, 20 * GIB, max_mamba_cache_size=logged_slots, mamba_radix_cache_strategy=strategy,
                     max_running_requests=requested, context_len=32_768)
    assert (p.mamba.slots_per_request, p.mamba.max_running_requests, p.mamba.capped_by_mamba) == (5, logged_cap, True)
