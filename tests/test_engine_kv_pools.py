"""TensorRT-LLM and LMDeploy count their KV pools in their own blocks, not by vLLM's per-layer plan (kg.engines.trtllm.kv,
kg.engines.lmdeploy.kv), and say what they lack where a number would be vLLM's or a guess.

Worked by hand for meta-llama/Meta-Llama-3.1-8B (32 layers, 8 KV heads x 128, bf16: 131,072 B per token) with the
budget given, --kv-budget-gib 50 = 53,687,091,200 B per GPU, and a request length of 1,000 tokens:
- TensorRT-LLM (tokens_per_block 32, llm_args.py:4288 at 00043967): 4,194,304 B per block, 53,687,091,200 //
  4,194,304 = 12,800 blocks = 409,600 tokens; ceil(1,000 / 32) = 32 blocks a request: 12,800 / 32 = 400.0. vLLM's
  plan (the inherited default before) counted 16-token blocks and "GPU KV cache size" = int(25,600 / 63 x 1,000) =
  406,349 tokens at 406.35 requests.
- LMDeploy (--cache-block-seq-len 64): 32 layers x 2 x 131,072 B (each K / V block a multiple of 256 B) = 8,388,608 B
  a block: 6,400 blocks = 409,600 tokens; 16 blocks a request. TurboMind: 6,400 / 16 = 400.0; the PyTorch engine
  reserves one block (config_builder.py:92): 6,399 / 16 = 399.94, longest session 6,399 x 64 - 64 = 409,472
  (engine.py:328-341). vLLM's plan said 400,000 tokens.
- LMDeploy PyTorch --quant-policy 8: K and V int8 (65,536 B each a layer) plus a scale and a zero per head and token
  for K and for V in bf16 (64 x 8 x 2 x 2 = 2,048 B each, schema.py:138-155): 32 x 135,168 = 4,325,376 B a block,
  12,412 blocks = 794,368 tokens, (12,412 - 1) / 16 = 775.69. vLLM's plan ignored the scales: 800,000 tokens, 800.0.
"""
from __future__ import annotations

import json

import pytest

from conftest import run_cli
from report_text import unwrap

L8 = "meta-llama/Meta-Llama-3.1-8B"
TRT = f"trtllm-serve {L8} --max_seq_len 1000"
LMD = f"lmdeploy serve api_server {L8} --session-len 1000"
KEYS = ("kv_block_size", "kv_num_blocks", "kv_bytes_per_block", "kv_tokens_per_gpu", "max_concurrency",
        "max_model_len_that_fits", "max_concurrency_at_request_len")


def _check(cmd: str, *extra: str, fmt: str = "json"):
    code, out, err = run_cli("check", "--cmd", cmd, "--gpu", "H100-SXM", "--no-speed", "--format", fmt, *extra)
    assert code in (0, 1), err
    return json.loads(out)["derived"] if fmt == "json" else out


def _given(cmd: str) -> tuple:
    d = _check(cmd, "--kv-budget-gib", "50", "--request-len", "2048")
    assert d["kv_budget_bytes_per_gpu"] == 53_687_091_200
    return tuple(d.get(k) for k in KEYS)


def test_trtllm_pool_is_whole_tokens_per_block_blocks_not_vllms_plan():
    d = _check(TRT, "--kv-budget-gib", "50", "--request-len", "2048")
    # 2,048-token requests: 64 blocks each, 12,800 / 64 = 200.0
    assert tuple(d.get(k) for k in KEYS) == (32, 12_800, 4_194_304, 409_600, 400.0, 409_600, 200.0)
    assert d["kv_tokens_per_gpu"] != 406_349  # the vLLM-plan figure it inherited
    assert "kv_layer_groups" not in d and "kv_max_in_flight_tokens" not in d  # no vLLM plan facts
    assert "tokens_for_budget" in d["kv_capacity_source"] and "llm_args.py:4288" in d["kv_capacity_source"]


def test_trtllm_keeps_every_token_of_llama4_chunked_layers():
    # Llama-4-Scout at TP 4: 48 layers x 2 KV heads x 128 x 2 x 2 B = 49,152 B a token, 1,572,864 B a 32-token block;
    # 53,687,091,200 // 1,572,864 = 34,133 blocks = 1,092,256 tokens, 65,536 / 32 = 2,048 blocks a request: 16.67.
    # vLLM's plan capped the 36 chunked layers at the 8,192-token chunk: 2,056,026 tokens, 31.37 requests
    d = _check("trtllm-serve meta-llama/Llama-4-Scout-17B-16E-Instruct --tp_size 4 --max_seq_len 65536",
               "--kv-budget-gib", "50", "--count", "4")
    assert (d["kv_num_blocks"], d["kv_tokens_per_gpu"], d["max_concurrency"]) == (34_133, 1_092_256, 16.67)


@pytest.mark.parametrize("backend, expected", [
    ("", (64, 6_400, 8_388_608, 409_600, 400.0, 409_600, 200.0)),                 # TurboMind runs Llama
    (" --backend pytorch", (64, 6_400, 8_388_608, 409_600, 399.94, 409_472, 199.97)),  # one block reserved
    (" --backend pytorch --quant-policy 8", (64, 12_412, 4_325_376, 794_368, 775.69, 794_240, 387.84)),
])
def test_lmdeploy_pool_is_its_blocks_of_the_budget(backend, expected):
    assert _given(LMD + backend) == expected


def test_a_pool_that_needs_a_fact_optkg_lacks_is_not_evaluable_not_vllms_number():
    # Gemma-2 alternates sliding and full layers: TensorRT-LLM splits its memory between per-window pools (VSWA)
    d = _check("trtllm-serve google/gemma-2-9b-it")
    assert "kv_tokens_per_gpu" not in d and "max_concurrency" not in d
    assert "per-window pools (VSWA)" in d["kv_capacity_not_evaluable"]
    assert d["kv_budget_bytes_per_gpu"] > 0  # the budget is still TensorRT-LLM's, and reported
    text = unwrap(_check("trtllm-serve google/gemma-2-9b-it", fmt="text"))
    assert "KV tokens per GPU not evaluable: how TensorRT-LLM splits the memory" in " ".join(text.split())
    # TurboMind's int8 scales live in C++ the wheel does not ship
    d = _check(f"lmdeploy serve api_server {L8} --quant-policy 8")
    assert d["kv_capacity_not_evaluable"].startswith("TurboMind's int8 KV block layout")
    # TP 8 over Qwen3-235B's 4 KV heads: TensorRT-LLM's estimate counts half heads, its pools whole ones
    d = _check("trtllm-serve Qwen/Qwen3-235B-A22B --tp_size 8", "--count", "8")
    assert "over 4 KV heads" in d["kv_capacity_not_evaluable"] and "kv_tokens_total" not in d


def test_a_trtllm_pool_cap_optkg_does_not_read_makes_the_pool_not_evaluable(tmp_path):
    cfg = tmp_path / "extra.yaml"
    cfg.write_text("kv_cache_config:\n  max_tokens: 10000\n")
    d = _check(f"{TRT} --config {cfg}")
    assert d["kv_capacity_not_evaluable"] == ("TensorRT-LLM's pool under kv_cache_config.max_tokens: 10000 "
                                              "(a cap optkg does not read)")
