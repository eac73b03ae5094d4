"""Tied input and output embeddings: lm_head is not counted when the model class ties it by default.

Gemma-2 / Gemma-3: neither config.json has tie_word_embeddings; transformers 5.24.0 defaults it to True
(models/gemma2/configuration_gemma2.py:82, models/gemma3/configuration_gemma3.py:88 for gemma3_text) and vLLM 0.33.0
builds the model from that config object (Gemma2ForCausalLM computes the logits from embed_tokens always,
model_executor/models/gemma2.py:368; Gemma3 ties when the config does, gemma3.py:398-399). The untied lm_head
would be vocab x hidden x 2 B: gemma-2-9b 256,000 x 3,584 x 2 = 1,835,008,000 B (18.92 -> 17.21 GiB), gemma-3-27b
262,208 x 5,376 x 2 = 2,819,260,416 B (52.93 -> 50.31 GiB)."""
from __future__ import annotations

import json

from conftest import REPO, run_cli
from kg.derive.weights import estimate_weight_bytes
from kg.inputs.modelcfg import parse_config, resolve_model, tie_word_embeddings_defaults

GIB = 2**30
GEMMA3 = str(REPO / "tests/fixtures/model_configs/gemma-3-27b-it.json")


def _weights(args: list[str]) -> int:
    code, out, err = run_cli("check", *args, "--format", "json")
    assert code in (0, 1), err
    found = []

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "weight_bytes_total_estimate":
                    found.append(v)
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(json.loads(out))
    assert found
    return found[0]


def test_gemma2_ties_by_default_as_transformers_and_vllm():
    m = resolve_model("google/gemma-2-9b-it")
    assert m.tie_word_embeddings is True and "gemma2.py:368" in m.tie_word_embeddings_source
    w = _weights(["--vllm", "vllm serve google/gemma-2-9b-it", "--gpu", "L40S"])
    assert w == 18_482_200_576 and round(w / GIB, 2) == 17.21
    assert w + 256_000 * 3_584 * 2 == 20_317_208_576  # the old, untied count (18.92 GiB)


def test_gemma3_text_config_default_tied():
    w = _weights(["--vllm", "vllm serve google/gemma-3-27b-it", "--config", GEMMA3, "--gpu", "H100"])
    assert w == 54_015_983_616 and round(w / GIB, 2) == 50.31
    assert round((w + 262_208 * 5_376 * 2) / GIB, 2) == 52.93


def test_tie_default_table_and_explicit_key():
    d = tie_word_embeddings_defaults()
    assert d["gemma2"] == (True, "transformers 5.24.0 transformers/models/gemma2/configuration_gemma2.py:82")
    assert d["gemma3_text"] == (True, "transformers 5.24.0 transformers/models/gemma3/configuration_gemma3.py:88")
    assert d["llama"][0] is False and d["qwen3"][0] is False
    base = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2,
            "vocab_size": 100, "intermediate_size": 128}
    # a missing key follows the class default; an explicit key wins (except vLLM's always-tied Gemma-2)
    assert parse_config(dict(base, model_type="gemma"), "x").tie_word_embeddings is True
    assert parse_config(dict(base, model_type="gemma", tie_word_embeddings=False), "x").tie_word_embeddings is False
    assert parse_config(dict(base, model_type="llama"), "x").tie_word_embeddings is False
    assert parse_config(dict(base, model_type="nosuch-arch"), "x").tie_word_embeddings is False
    assert parse_config(dict(base, model_type="gemma2", tie_word_embeddings=False), "x").tie_word_embeddings is True
    m = parse_config(dict(base, model_type="gemma"), "x")
    # lm_head is not counted when tied: 2 x vocab x hidden less than the untied weights
    untied = parse_config(dict(base, model_type="gemma", tie_word_embeddings=False), "x")
    assert estimate_weight_bytes(untied) - estimate_weight_bytes(m) == 100 * 64 * 2
