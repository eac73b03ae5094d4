"""KV-cache derivations: exact values worked out by hand from the real configs (shared/data/model_configs)."""
import pytest

from kg.core.errors import OptkgError
from kg.derive.kv import GIB, kv_capacity, kv_layout, replication_factor, sequence_bytes_per_gpu, valid_dcp_sizes
from kg.inputs.modelcfg import resolve_model


@pytest.fixture(scope="module")
def qwen():
    return resolve_model("Qwen/Qwen3-235B-A22B")


def test_qwen3_235b_tp8(qwen):
    # 64 Q heads, 4 KV heads, head_dim 128, 94 layers, bf16.
    lay = kv_layout(qwen, tp_size=8)
    assert lay.kv_heads_per_rank == 1            # max(1, 4 // 8)
    assert lay.replication_factor == 2           # 8 / 4
    assert lay.bytes_per_token_per_gpu == 48_128  # 94 * 1 * (128 + 128) * 2
    assert lay.bytes_per_token_per_gpu_unreplicated == 24_064  # 94 * 4 * 256 * 2 / 8
    assert lay.bytes_per_token_model == 192_512   # 94 * 4 * 256 * 2
    assert lay.valid_dcp_sizes == [1, 2]          # dcp <= 8 // 4 and (64 // 4) % dcp == 0


def test_qwen3_235b_tp4_no_dcp(qwen):
    lay = kv_layout(qwen, tp_size=4)
    assert lay.replication_factor == 1
    assert lay.valid_dcp_sizes == [1] and not lay.dcp_possible  # TP must exceed the KV heads (D5)


def test_qwen3_dcp2_removes_replication(qwen):
    assert replication_factor(qwen, 8, 2) == 1
    assert kv_layout(qwen, 8, dcp_size=2).bytes_per_token_per_gpu_effective == 24_064  # 48,128 / 2


def test_llama_70b():
    m = resolve_model("meta-llama/Llama-3.1-70B")
    assert kv_layout(m).bytes_per_token_model == 327_680     # 80 * 8 * (128 + 128) * 2
    lay = kv_layout(m, tp_size=16)
    assert lay.replication_factor == 2 and lay.bytes_per_token_per_gpu == 40_960  # 80 * 1 * 256 * 2
    assert lay.valid_dcp_sizes == [1, 2]
    assert kv_layout(m, tp_size=8).replication_factor == 1


@pytest.mark.parametrize("name", ["deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K2-Instruct"])
@pytest.mark.parametrize("tp", [1, 2, 8, 16])
def test_mla_per_gpu_constant(name, tp):
    m = resolve_model(name)
    lay = kv_layout(m, tp_size=tp)
    assert lay.bytes_per_token_per_gpu == 70_272  # 61 * (512 + 64) * 2, independent of TP
    assert lay.replication_factor == tp


def test_kimi_recipe_capacity():
    # vLLM recipe (Kimi-K2-Think.md): 8 x H200, 46.80 GiB KV per GPU, TP8 -> 715,072 tokens; TP8+DCP8 -> 5,721,088.
    k = resolve_model("moonshotai/Kimi-K2-Instruct")
    cap = kv_capacity(kv_layout(k, 8), 46.80 * GIB)
    assert abs(cap.kv_tokens_per_gpu - 715_072) / 715_072 < 0.001
    assert cap.kv_tokens_per_gpu == 715_088  # floor(46.80 GiB / 70,272 / 16) * 16
    cap8 = kv_capacity(kv_layout(k, 8, dcp_size=8), 46.80 * GIB)
    assert cap8.kv_tokens_total == 8 * cap.kv_tokens_per_gpu
    assert abs(cap8.kv_tokens_total - 5_721_088) / 5_721_088 < 0.001
    assert kv_layout(k, 8).valid_dcp_sizes == [1, 2, 4, 8]


def test_concurrency_and_sliding_window():
    g = resolve_model("google/gemma-2-9b-it")
    # gemma-2: 42 layers, 21 slide (window 4096), 8 KV heads, head_dim 256, bf16
    assert (g.num_sliding_layers, g.num_full_layers, g.sliding_window) == (21, 21, 4096)
    lay = kv_layout(g)
    assert lay.bytes_per_token_layer_per_rank == 8 * 512 * 2  # 8,192
    # 8,192 tokens: full layers 21 * 8,192 * 8,192 B + sliding 21 * 8,192 * 4,096 B
    assert sequence_bytes_per_gpu(lay, 8192) == 21 * 8192 * 8192 + 21 * 8192 * 4096
    assert valid_dcp_sizes(g, 2) == [1]  # sliding-window KV asserts DCP == 1 (D13)
    cap = kv_capacity(lay, 21 * 8192 * 8192 * 2 + 21 * 8192 * 4096 * 2, max_model_len=8192)
    assert cap.max_concurrency == 2.0


def test_fp8_halves(qwen):
    assert kv_layout(qwen, 8, kv_cache_dtype="fp8").bytes_per_token_per_gpu == 24_064


@pytest.mark.parametrize("kw", [{"tp_size": 0}, {"tp_size": -2}, {"dcp_size": 0}, {"kv_cache_dtype": "int3"}])
def test_bad_values(qwen, kw):
    with pytest.raises(OptkgError):
        kv_layout(qwen, **kw)
