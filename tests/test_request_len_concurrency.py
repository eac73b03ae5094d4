"""Max concurrency at the request length served (--request-len, --isl + --osl) beside the max_model_len figure, and
SGLang's default context length applied when --context-length is not given.

Qwen3-235B-A22B, TP 8, H200: full attention in every layer, so one request of L tokens takes ceil(L / 16) blocks of
the vLLM V1 pool (block_size 16) and L slots of SGLang's token pool. 10,240 tokens (ISL 8,000 + OSL 2,240) take 640
blocks against 2,560 at max_model_len 40,960: four times the concurrency.
"""
from __future__ import annotations

import json

# vLLM numbers worked for 0.33.0 (16-token blocks: 10,240 tokens = 640 blocks)
QWEN_VLLM = ("--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8 --max-model-len 40960", "--gpu", "H200", "--count", "8",
             "--engine-version", "0.33.0")
QWEN_SGLANG = ("--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 8", "--gpu", "H200",
               "--count", "8")


def _derived(cli, *argv):
    code, out, err = cli("check", *argv, "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)["derived"]


def test_vllm_concurrency_at_the_request_length_uses_the_block_plan(cli):
    d = _derived(cli, *QWEN_VLLM, "--isl", "8000", "--osl", "2240")
    assert d["max_concurrency_request_len"] == 10_240
    assert d["max_concurrency"] == round(d["kv_num_blocks"] / 2_560, 2)
    assert d["max_concurrency_at_request_len"] == round(d["kv_num_blocks"] / 640, 2) == 149.4
    code, text, _ = cli("check", *QWEN_VLLM, "--request-len", "10240")
    assert "  max concurrency at 10,240 tokens           149.4" in text.splitlines()


def test_sglang_without_context_length_runs_at_the_models_context_length(cli):
    d = _derived(cli, *QWEN_SGLANG, "--request-len", "10240")
    tokens = d["kv_tokens_per_gpu"]
    assert d["max_model_len_effective"] == 40_960  # SGLang get_context_length: max_position_embeddings, no RoPE factor
    assert d["max_concurrency"] == round(tokens / 40_960, 2)
    assert d["max_concurrency_at_request_len"] == round(tokens / 10_240, 2)


def test_a_sliding_window_model_counts_each_layer_group(cli):
    # gpt-oss-120b: a full group and a sliding group (window 128) of 18 layers each. At 4,096 tokens the full group
    # takes 4,096 / 16 = 256 blocks and the sliding group cdiv(min(127 + 16,384 tokens in flight, 4,096), 16) + 1
    # = 257 (vllm 0.33.0 kv_cache_planning.py:1253-1285): 513 blocks, against 8,192 + 1,033 = 9,225 at 131,072
    d = _derived(cli, "--vllm", "vllm serve openai/gpt-oss-120b --max-model-len 131072", "--gpu", "H100",
                 "--request-len", "4096", "--engine-version", "0.33.0")
    assert d["kv_blocks_per_request"] == 9_225
    assert d["max_concurrency_at_request_len"] == round(d["kv_num_blocks"] / 513, 2)


def test_isl_without_osl_is_an_input_error(cli):
    code, _, err = cli("check", *QWEN_VLLM, "--isl", "8000")
    assert code == 2 and "--isl and --osl go together" in err
    code, _, err = cli("check", *QWEN_VLLM, "--request-len", "0")
    assert code == 2 and "request_len" in err
