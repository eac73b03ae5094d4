"""Gemma 4's full-attention (global) layers cache another KV shape than its sliding layers: vLLM 0.34.0
model_executor/models/gemma4.py:598-608 builds each decoder layer from ``config.per_layer_config[layer_idx]``
(head_dim / num_key_value_heads: global_head_dim / num_global_key_value_heads on full-attention layers) and
:407-412 keeps max(1, kv_heads // tp) heads per rank, so tp 8 replicates 4 global KV heads twice. optkg sized
every layer as a sliding one; until it sizes layer shapes per layer it says the KV bytes are not evaluable."""
from __future__ import annotations

import pytest

from cli_helpers import check_report, model
from conftest import run_cli

# Gemma-4-31B text_config: 60 layers, layer_types 50 sliding + 10 full; sliding 16 KV heads x head_dim 256,
# full num_global_key_value_heads 4 x global_head_dim 512; bfloat16 (2 B), K and V cached.
# right:  50 x 2 x 16 x 256 x 2 + 10 x 2 x 4 x 512 x 2 = 819,200 + 81,920 = 901,120 B/token
# single shape (what optkg printed): 60 x 2 x 16 x 256 x 2 = 983,040 B/token
GEMMA4_31B_BYTES_PER_TOKEN = 901_120
# 26B-A4B: 25 sliding x 2 x 8 x 256 x 2 + 5 full x 2 x 2 x 512 x 2 = 204,800 + 20,480 = 225,280 (single: 245,760)
GEMMA4_26B_BYTES_PER_TOKEN = 225_280


def _bytes_per_token(m) -> int:
    shape = {"sliding": (m.num_key_value_heads, m.head_dim), "full": (m.num_global_key_value_heads, m.global_head_dim)}
    return sum(2 * shape[k][0] * shape[k][1] * m.dtype_bytes for k in m.layer_kinds)


@pytest.mark.parametrize("name,expected", [("nvidia/Gemma-4-31B-IT-NVFP4", GEMMA4_31B_BYTES_PER_TOKEN),
                                           ("google/gemma-4-26B-A4B", GEMMA4_26B_BYTES_PER_TOKEN)])
def test_gemma4_facts_carry_the_global_layers_own_head_size_and_kv_heads(name, expected):
    m = model(name)
    assert _bytes_per_token(m) == expected
    assert model("google/gemma-2-9b-it").global_head_dim is None  # one shape for every layer: nothing to carry


def test_gemma4_kv_bytes_are_not_evaluable_rather_than_the_single_shape_number():
    code, out, err = run_cli("kv", "--model", "nvidia/Gemma-4-31B-IT-NVFP4", "--tp", "8")
    assert code == 2 and out == ""
    assert err.strip() == ("optkg: error: not evaluable: per-layer head sizes of Gemma 4's global layers (10 "
                           "full-attention layers cache 4 KV heads x 512, the sliding ones 16 x 256; optkg sizes "
                           "one shape for every layer)")


def test_gemma4_check_at_tp8_claims_no_kv_bytes_nor_replication_of_the_sliding_layers_alone():
    # tp 8 over 4 global KV heads replicates them twice (max(1, 4 // 8) = 1 head per rank); the sliding layers'
    # 16 heads are not replicated: one replication factor for the model would be wrong for one kind of layer
    r = check_report(["--vllm", "vllm serve nvidia/Gemma-4-31B-IT-NVFP4 -tp 8", "--gpu", "H100"])
    d = r["derived"]
    for k in ("kv_bytes_per_token_model", "kv_bytes_per_token_per_gpu", "kv_replication_tp", "kv_heads_per_rank"):
        assert k not in d
    assert any(n.startswith("KV cache not evaluable: per-layer head sizes of Gemma 4's global layers")
               for n in r["notes"])
