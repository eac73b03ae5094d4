"""The KV-cache dtype the engine stores: vLLM's 'auto' from the checkpoint (ModelOpt kv_cache_quant_algo,
compressed-tensors kv_cache_scheme) per release, FP8 that a backend ignores, fp8_ds_mla's packed layout.

ModelOpt kv_cache_quant_algo FP8: vLLM resolves --kv-cache-dtype auto to fp8_e4m3 (kg.engines.vllm.kv_dtype; 0.33.0
engine/arg_utils.py:2297, utils/torch_utils.py:443-516, :78-81; first in 0.14.0, nvfp4 mapped from 0.20.0).
Llama-3.1-8B: 32 layers x 8 KV heads x 128 x 2 (K, V) x 1 B = 65,536 B/token (131,072 at BF16)."""
from __future__ import annotations

import json

import pytest

from cli_helpers import check_report, model
from conftest import REPO, run_cli
from kg.core.errors import OptkgError
from kg.inputs.modelcfg import parse_config, resolve_model

MODELOPT_FP8 = str(REPO / "tests/fixtures/quant_configs/llama31-8b-modelopt-fp8")
MODELOPT_NVFP4 = str(REPO / "tests/fixtures/quant_configs/llama31-8b-modelopt-nvfp4")


@pytest.mark.parametrize("path", [MODELOPT_FP8, MODELOPT_NVFP4])
def test_modelopt_fp8_kv_auto_is_fp8_on_vllm_033(path):
    d = check_report(["--vllm", f"vllm serve {path}", "--gpu", "H100", "--count", "1"])["derived"]
    assert d["kv_bytes_per_token_model"] == 65_536 and d["kv_cache_dtype"] == "fp8_e4m3"
    assert d["kv_cache_dtype_checkpoint"] == "kv_cache_quant_algo FP8" and ">=0.14.0" in d["kv_cache_dtype_source"]
    code, out, _ = run_cli("check", "--vllm", f"vllm serve {MODELOPT_FP8} --kv-cache-dtype auto", "--gpu", "H100",
                           "--count", "1", "--no-speed")
    assert "KV-cache dtype                             fp8_e4m3 (auto: checkpoint kv_cache_quant_algo FP8;" in out


def test_modelopt_fp8_kv_auto_by_release_and_explicit_dtype():
    base = ["--vllm", f"vllm serve {MODELOPT_FP8}", "--gpu", "H100", "--count", "1"]
    assert check_report(base + ["--engine-version", "0.13.0"])["derived"]["kv_bytes_per_token_model"] == 131_072
    assert check_report(base + ["--engine-version", "0.14.0"])["derived"]["kv_bytes_per_token_model"] == 65_536
    # a dtype the user names is kept (vLLM resolves only 'auto')
    d = check_report(["--vllm", f"vllm serve {MODELOPT_FP8} --kv-cache-dtype bfloat16", "--gpu", "H100", "--count", "1"])
    assert d["derived"]["kv_bytes_per_token_model"] == 131_072 and "kv_cache_dtype_checkpoint" not in d["derived"]


def test_modelopt_kv_resolution_table():
    from kg.engines import get
    m = resolve_model(MODELOPT_FP8)
    assert get("vllm").auto_kv_cache_dtype(m, "0.33.0", "auto")["dtype"] == "fp8_e4m3"
    assert get("sglang").auto_kv_cache_dtype(m, "0.5.23", "auto") is None
    assert get("vllm").auto_kv_cache_dtype(m, "0.13.0", None) is None
    nv = parse_config({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
                       "quantization_config": {"quant_method": "modelopt_fp4", "kv_cache_quant_algo": "NVFP4"}}, "x")
    assert get("vllm").auto_kv_cache_dtype(nv, "0.19.0", "auto") is None  # nvfp4 joins the map in 0.20.0
    assert get("vllm").auto_kv_cache_dtype(nv, "0.20.0", "auto")["dtype"] == "nvfp4"
    # compressed-tensors kv_cache_scheme: fp8 from 0.22.0, at attention-layer build (attention.py:287-291 at 0.33.0)
    ct = parse_config({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
                       "quantization_config": {"quant_method": "compressed-tensors",
                                               "kv_cache_scheme": {"num_bits": 8, "type": "float", "dynamic": False}}}, "x")
    assert get("vllm").auto_kv_cache_dtype(ct, "0.33.0", "auto")["dtype"] == "fp8"
    assert get("vllm").auto_kv_cache_dtype(ct, "0.21.0", "auto") is None
    assert get("vllm").auto_kv_cache_dtype(ct, "0.33.0", "fp8_e5m2") is None


def test_kv_command_follows_the_checkpoint():
    code, out, err = run_cli("kv", "--config", MODELOPT_FP8 + "/config.json", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["layout"]["bytes_per_token_model"] == 65_536 and d["kv_cache_dtype_from_checkpoint"]["dtype"] == "fp8_e4m3"
    code, out, err = run_cli("kv", "--config", MODELOPT_FP8 + "/config.json", "--engine-version", "0.13.0", "--format", "json")
    assert json.loads(out)["layout"]["bytes_per_token_model"] == 131_072


def test_capacity_uses_the_kv_dtype_the_engine_stores_when_fp8_is_ignored():
    # tester item 6: vLLM 0.7.3 V1 FLASH_ATTN keeps a 16-bit cache for --kv-cache-dtype fp8
    # (rule fp8-kv-ignored-by-flash-attn); Llama-3.1-8B BF16 KV = 32 layers x 8 heads x 128 x 2 x 2 B = 131,072 B/token
    cmd = ("VLLM_USE_V1=1 VLLM_ATTENTION_BACKEND=FLASH_ATTN vllm serve meta-llama/Meta-Llama-3.1-8B "
           "--kv-cache-dtype fp8")
    code, out, err = run_cli("check", "--vllm", cmd, "--gpu", "H100", "--count", "1", "--engine-version", "0.7.3",
                             "--format", "json")
    assert code == 1, err
    d = json.loads(out)
    f = {x["rule_id"]: x for x in d["findings"]}["fp8-kv-ignored-by-flash-attn"]
    assert f["numbers"]["kv_bytes_per_token_per_gpu_actual"] == 131072
    assert f["numbers"]["kv_bytes_per_token_per_gpu_expected"] == 65536
    dv = d["derived"]
    # the table follows the actual 131,072 B/token: 16 x 131,072 = 2 MiB blocks, half the FP8 count
    # (55,376 FP8 blocks -> 27,688; 27,688 x 16 = 443,008 tokens; 27,688 / 8,192 blocks per 131,072-token request = 3.38).
    # V1 on 0.7.x runs chunked prefill with max_num_batched_tokens 8192 on an H100 (0.7.2 arg_utils.py:1303, :1313), so
    # the profile's peak is the sampler's, not a 131,072-token forward (which gave 21,215 blocks before)
    assert dv["kv_bytes_per_token_per_gpu"] == 131072 and dv["kv_bytes_per_token_per_gpu_requested"] == 65536
    assert dv["kv_num_blocks"] == 27688 and dv["kv_tokens_per_gpu"] == 443008 and dv["max_concurrency"] == 3.38
    assert any("KV capacity at the dtype the engine stores (auto: bfloat16)" in n for n in d["notes"])


def test_fp8_ds_mla_is_656_bytes_per_token_per_layer():
    from kg.derive.kv import kv_layout
    # 512 fp8 latent + 4 fp32 scales (16 B) + 64 bf16 RoPE values (128 B) = 656 B; 61 layers -> 40,016 B/token
    lay = kv_layout(model("deepseek-ai/DeepSeek-V3"), 8, 1, 1, "fp8_ds_mla")
    assert lay.bytes_per_token_layer_per_rank == 656 and lay.bytes_per_token_per_gpu == 40_016
    with pytest.raises(OptkgError, match="packed MLA cache layout"):
        kv_layout(model("meta-llama/Llama-3.1-8B"), 1, 1, 1, "fp8_ds_mla")
