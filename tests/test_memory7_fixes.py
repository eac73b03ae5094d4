"""tester-4 defects fixed by lane memory7 (issue 13), each with the exact value worked by hand from the cited source.

#6 Gemma-2 / Gemma-3 lm_head: neither config.json has tie_word_embeddings; transformers 5.24.0 defaults it to True
(models/gemma2/configuration_gemma2.py:82, models/gemma3/configuration_gemma3.py:88 for gemma3_text) and vLLM 0.33.0
builds the model from that config object (Gemma2ForCausalLM computes the logits from embed_tokens always,
model_executor/models/gemma2.py:368; Gemma3 ties when the config does, gemma3.py:398-399). The untied lm_head that
was counted is vocab x hidden x 2 B: gemma-2-9b 256,000 x 3,584 x 2 = 1,835,008,000 B (18.92 -> 17.21 GiB), gemma-3-27b
262,208 x 5,376 x 2 = 2,819,260,416 B (52.93 -> 50.31 GiB)."""
from __future__ import annotations

import json

import pytest

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


# #1 ModelOpt kv_cache_quant_algo FP8: vLLM resolves --kv-cache-dtype auto to fp8_e4m3 (kg.derive.kv_dtype; 0.33.0
# engine/arg_utils.py:2297, utils/torch_utils.py:443-516, :78-81; first in 0.14.0, nvfp4 mapped from 0.20.0).
# Llama-3.1-8B: 32 layers x 8 KV heads x 128 x 2 (K, V) x 1 B = 65,536 B/token (131,072 at BF16).
MODELOPT_FP8 = str(REPO / "tests/fixtures/quant_configs/llama31-8b-modelopt-fp8")
MODELOPT_NVFP4 = str(REPO / "tests/fixtures/quant_configs/llama31-8b-modelopt-nvfp4")


def _check_json(args: list[str]) -> dict:
    code, out, err = run_cli("check", *args, "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)


@pytest.mark.parametrize("path", [MODELOPT_FP8, MODELOPT_NVFP4])
def test_modelopt_fp8_kv_auto_is_fp8_on_vllm_033(path):
    d = _check_json(["--vllm", f"vllm serve {path}", "--gpu", "H100", "--count", "1"])["derived"]
    assert d["kv_bytes_per_token_model"] == 65_536 and d["kv_cache_dtype"] == "fp8_e4m3"
    assert d["kv_cache_dtype_checkpoint"] == "kv_cache_quant_algo FP8" and ">=0.14.0" in d["kv_cache_dtype_source"]
    code, out, _ = run_cli("check", "--vllm", f"vllm serve {MODELOPT_FP8} --kv-cache-dtype auto", "--gpu", "H100",
                           "--count", "1")
    assert "KV-cache dtype                             fp8_e4m3 (auto: checkpoint kv_cache_quant_algo FP8;" in out


def test_modelopt_fp8_kv_auto_by_release_and_explicit_dtype():
    base = ["--vllm", f"vllm serve {MODELOPT_FP8}", "--gpu", "H100", "--count", "1"]
    assert _check_json(base + ["--engine-version", "0.13.0"])["derived"]["kv_bytes_per_token_model"] == 131_072
    assert _check_json(base + ["--engine-version", "0.14.0"])["derived"]["kv_bytes_per_token_model"] == 65_536
    # a dtype the user names is kept (vLLM resolves only 'auto')
    d = _check_json(["--vllm", f"vllm serve {MODELOPT_FP8} --kv-cache-dtype bfloat16", "--gpu", "H100", "--count", "1"])
    assert d["derived"]["kv_bytes_per_token_model"] == 131_072 and "kv_cache_dtype_checkpoint" not in d["derived"]


def test_modelopt_kv_resolution_table():
    from kg.derive.kv_dtype import vllm_auto_kv_cache_dtype
    m = resolve_model(MODELOPT_FP8)
    assert vllm_auto_kv_cache_dtype(m, "vllm", "0.33.0", "auto")["dtype"] == "fp8_e4m3"
    assert vllm_auto_kv_cache_dtype(m, "sglang", "0.5.23", "auto") is None
    assert vllm_auto_kv_cache_dtype(m, "vllm", "0.13.0", None) is None
    nv = parse_config({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
                       "quantization_config": {"quant_method": "modelopt_fp4", "kv_cache_quant_algo": "NVFP4"}}, "x")
    assert vllm_auto_kv_cache_dtype(nv, "vllm", "0.19.0", "auto") is None  # nvfp4 joins the map in 0.20.0
    assert vllm_auto_kv_cache_dtype(nv, "vllm", "0.20.0", "auto")["dtype"] == "nvfp4"
    # compressed-tensors kv_cache_scheme: fp8 from 0.22.0, at attention-layer build (attention.py:287-291 at 0.33.0)
    ct = parse_config({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
                       "quantization_config": {"quant_method": "compressed-tensors",
                                               "kv_cache_scheme": {"num_bits": 8, "type": "float", "dynamic": False}}}, "x")
    assert vllm_auto_kv_cache_dtype(ct, "vllm", "0.33.0", "auto")["dtype"] == "fp8"
    assert vllm_auto_kv_cache_dtype(ct, "vllm", "0.21.0", "auto") is None
    assert vllm_auto_kv_cache_dtype(ct, "vllm", "0.33.0", "fp8_e5m2") is None


def test_kv_command_follows_the_checkpoint():
    code, out, err = run_cli("kv", "--config", MODELOPT_FP8 + "/config.json", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["layout"]["bytes_per_token_model"] == 65_536 and d["kv_cache_dtype_from_checkpoint"]["dtype"] == "fp8_e4m3"
    code, out, err = run_cli("kv", "--config", MODELOPT_FP8 + "/config.json", "--engine-version", "0.13.0", "--format", "json")
    assert json.loads(out)["layout"]["bytes_per_token_model"] == 131_072


# #11 --revision in the launch command picks the HF-cache snapshot (vLLM --revision, engine/arg_utils.py:986 at 0.33.0);
# a revision the cache does not hold is a one-line input error (exit 2), not main.
def test_launch_revision_reads_that_snapshot(tmp_path, monkeypatch):
    from test_hf_cache import MISTRAL, make_cache
    cfg = json.loads(MISTRAL.read_text())
    make_cache(tmp_path, "org/model", cfg)
    make_cache(tmp_path, "org/model", dict(cfg, num_hidden_layers=16), rev="def456",
               commit="fedcba9876543210fedcba9876543210fedcba98")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    for rev, layers in (("", 32), (" --revision def456", 16)):
        d = _check_json(["--vllm", f"vllm serve org/model{rev}", "--gpu", "H100", "--count", "1"])
        # Mistral-7B: 8 KV heads x 128 x 2 x 2 B = 4,096 B per token per layer
        assert d["derived"]["kv_bytes_per_token_model"] == 4_096 * layers
        assert not any("--revision" in x for x in d["ignored_flags"])
    code, out, err = run_cli("check", "--vllm", "vllm serve org/model --revision nosuch", "--gpu", "H100")
    assert code == 2 and "--revision nosuch" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
