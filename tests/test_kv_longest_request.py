"""The bytes one request reserves, the longest request that fits and the null block vLLM holds back
(vllm 0.33.0 v1/core/kv_cache_planning.py, v1/core/block_pool.py)."""
from __future__ import annotations

import json

from cli_helpers import model
from conftest import REPO, run_cli


def test_request_bytes_and_longest_sequence():
    from kg.derive.kv import kv_capacity, kv_layout, longest_sequence_that_fits, request_kv_bytes_per_gpu
    lay = kv_layout(model("meta-llama/Llama-3.1-8B"))  # 32 x 8 x 256 x 2 = 131,072 B/token
    assert request_kv_bytes_per_gpu(lay, 16384) == 2_147_483_648
    assert request_kv_bytes_per_gpu(lay, 1) == 16 * 131_072  # a whole block
    assert longest_sequence_that_fits(lay, 2**30) == 8192     # 2^30 / 131,072
    assert kv_capacity(lay, 2**30).max_model_len_that_fits == 8192
    # gemma-2-9b: 21 full + 21 sliding layers (window 4,096), 8 KV heads x (256 + 256) x 2 B = 8,192 B/token/layer;
    # 8,192 tokens: 21 x 8,192 x 8,192 + 21 x 8,192 x 4,096 = 1,409,286,144 + 704,643,072
    g = kv_layout(model("google/gemma-2-9b-it"))
    assert request_kv_bytes_per_gpu(g, 8192) == 2_113_929_216


def test_longest_request_leaves_out_the_null_block():
    # tester finding 5 ("3,012 blocks where 3,011 fit"): vLLM >= 0.29.0 checks one request and estimates the longest
    # against the budget less the null block BlockPool holds back (vllm 0.33.0 v1/core/kv_cache_planning.py:170-176,
    # 1533-1541); the allocation and "GPU KV cache size" still use every block
    from kg.derive.kv import kv_capacity, kv_layout
    from kg.engines import get
    from kg.inputs.modelcfg import resolve_model
    lay = kv_layout(resolve_model("meta-llama/Llama-3.1-8B"))  # 131,072 B/token, 2 MiB per 16-token block
    assert kv_capacity(lay, 2**30).max_model_len_that_fits == 8192
    assert kv_capacity(lay, 2**30, null_block_bytes=2 * 2**20).max_model_len_that_fits == 8176  # 511 blocks
    vllm, sglang = get("vllm"), get("sglang")
    assert vllm.null_block_bytes(None, 2 * 2**20) == vllm.null_block_bytes("0.29.0", 2 * 2**20) == 2 * 2**20
    assert vllm.null_block_bytes("0.28.0", 2 * 2**20) == 0 == sglang.null_block_bytes(None, 2 * 2**20)
    # optkg kv, Qwen3-32B TP 8 (32,768 B/token), vLLM 0.33.0's 16-token blocks: 30 GiB = 61,440 blocks, 61,439
    # usable -> 983,024 tokens (0.34.0: 15,360 64-token blocks, 15,359 usable -> 982,976)
    code, out, err = run_cli("kv", "--config", str(REPO / "catalog/models/Qwen__Qwen3-32B.json"), "--tp", "8",
                             "--kv-budget-gib", "30", "--max-model-len", "40960", "--format", "json",
                             "--engine-version", "0.33.0")
    cap = json.loads(out)["capacity"]
    assert (cap["num_blocks"], cap["max_model_len_that_fits"]) == (61_440, 983_024)


def test_fit_prefix_cache_leaves_out_the_null_block():
    # the block pool never caches its null block (vllm 0.33.0 v1/core/block_pool.py:191): 0.125 GiB of Llama-3.1-8B KV
    # is 64 blocks of 16 tokens, 63 usable = 1,008 tokens = 1 whole 512-token trace block (it printed 2)
    from kg.analyses.fit import capacity_bytes
    from kg.analyses.fitmeasure import measure_trace
    from kg.derive.kv import cacheable_tokens, kv_layout
    from kg.inputs.modelcfg import resolve_model
    lay = kv_layout(resolve_model("meta-llama/Llama-3.1-8B"))
    assert cacheable_tokens(lay, 2**27) == 63 * 16 and cacheable_tokens(lay, 2 * 2**20) == 0
    m = measure_trace(REPO / "rules/fixtures/traces/small_prefix.jsonl")
    assert capacity_bytes(m, lay, 2**27)["gpu_capacity"]["blocks"] == 1
    assert capacity_bytes(m, lay, 2**27 + 2 * 2**20)["gpu_capacity"]["blocks"] == 2
    # Qwen3-235B TP 8 on an H200 (fit's budget 74,221,994,640 B): 96,386 blocks - 1 = 1,542,160 tokens = 3,012.03 trace
    # blocks -> 3,012 (what fit prints for the Mooncake trace); at exactly 96,384 blocks it is 3,011, not 3,012
    lay8 = kv_layout(resolve_model("Qwen/Qwen3-235B-A22B"), 8)
    assert cacheable_tokens(lay8, 74_221_994_640) // 512 == 3_012
    assert cacheable_tokens(lay8, 96_384 * 770_048) // 512 == 3_011
