"""Cross-attention and encoder caches as vLLM 0.33.0 builds them (kg.derive.encoder_cache; issue 13).
Every number is worked by hand from the vLLM 0.33.0 lines cited in kg/derive/encoder_cache.py and the
bundled openai/whisper-large-v3 config (catalog/models/SOURCES.md)."""
from __future__ import annotations

import json

import pytest

from conftest import run_cli
from kg.core.errors import OptkgError
from kg.derive.encoder_cache import (cross_attention_blocks_per_request, encoder_budget,
                                     encoder_decoder_batched_tokens, model_mm_tokens_per_item)
from kg.engines.vllm.kv_plan import plan_kv_cache
from kg.derive.weights import estimate_weight_bytes, group_params
from kg.inputs.modelcfg import resolve_model

GIB = 2**30


@pytest.fixture(scope="module")
def whisper():
    return resolve_model("openai/whisper-large-v3")


def test_whisper_config_reads_the_decoder(whisper):
    m = whisper
    # WhisperConfig maps num_attention_heads / num_hidden_layers to the encoder; vLLM caches the decoder:
    # 20 decoder heads (num_kv_heads = heads / tp, models/whisper.py:181), head_dim 1280 / 20 = 64
    assert (m.num_attention_heads, m.num_key_value_heads, m.head_dim, m.num_hidden_layers) == (20, 20, 64, 32)
    assert (m.is_encoder_decoder, m.num_cross_attention_layers, m.num_encoder_layers) == (True, 32, 32)
    # max_target_positions is one of vLLM's length keys (model_arch_config_convertor.py:374-392): 448
    assert (m.derived_max_model_len, m.vllm_default_max_model_len, m.max_source_positions) == (448, 448, 1500)
    assert m.layer_kinds == ["full"] * 32 and m.dtype == "float16" and m.tie_word_embeddings


def test_whisper_plan_groups_self_and_cross_layers(whisper):
    p = plan_kv_cache(whisper)
    # page = 20 heads x (64 + 64) x 2 B x 16 tokens = 81,920 B for self and cross layers alike
    assert [(s.kind, s.layers, s.page_bytes, s.blocks_per_request, s.groups) for s in p.specs] == [
        ("full", 32, 81_920, 28, 1), ("cross", 32, 81_920, 512, 1)]
    # self: cdiv(448, 16) = 28; cross: cdiv(max_num_encoder_input_tokens = max_num_batched_tokens 8,192, 16) = 512
    assert (p.max_num_batched_tokens, p.group_size, p.bytes_per_block, p.blocks_per_request) == (8192, 32, 2_621_440, 540)
    c = p.capacity(30 * GIB)
    # 32,212,254,720 // 2,621,440 = 12,288 blocks; 12,288 / 540 = 22.7556; int(22.7556 x 448) = 10,194
    assert (c["num_blocks"], c["max_concurrency"], c["kv_cache_size_tokens"]) == (12_288, 22.76, 10_194)
    assert any("not the encoder's 1,500 positions" in n for n in p.notes)
    assert any("without chunked prefill and prefix caching" in n for n in p.notes)


def test_cross_blocks_follow_max_num_batched_tokens(whisper):
    assert cross_attention_blocks_per_request(8192, 16) == 512
    assert cross_attention_blocks_per_request(1500, 16) == 94  # what the kv_cache_interface.py:1226 comment implies
    p = plan_kv_cache(whisper, max_num_batched_tokens=2048)
    assert [s.blocks_per_request for s in p.specs] == [28, 128] and p.blocks_per_request == 156
    # TP 2: 10 heads per rank, page 40,960 B; the blocks per request do not change
    p2 = plan_kv_cache(whisper, tp_size=2)
    assert (p2.bytes_per_block, p2.blocks_per_request) == (32 * 40_960, 540)


def test_encoder_decoder_default_batched_tokens():
    # arg_utils.py:3190-3225, chunked prefill off: min(max_num_seqs x max_model_len, max(max_model_len, default))
    assert encoder_decoder_batched_tokens(8192, 448, 1024) == 8192
    assert encoder_decoder_batched_tokens(8192, 448, 1) == 448
    assert encoder_decoder_batched_tokens(2048, 4096, 256) == 4096


def test_whisper_encoder_budget_and_refusal(whisper):
    tok, src = model_mm_tokens_per_item(whisper)
    assert tok == {"audio": 1500} and "max_source_positions" in src
    b = encoder_budget(tok, 8192, 448, 1024, whisper.hidden_size, 2, limits={"audio": 1},
                       chunked_prefill=False, chunked_mm_input=False)
    # compute = cache = max(8,192, 1,500); per prompt max(1, min(1, 448 // 1500)) = 1;
    # requests min(1,024, 8,192 // 1,500) = 5; items max(1, min(8,192 // 1,500, 5 x 1)) = 5
    assert (b.modality, b.compute_budget, b.cache_size, b.items_per_prompt, b.items_profiled) == ("audio", 8192, 8192, 1, 5)
    assert b.profiled_bytes == 5 * 1500 * 1280 * 2 == 19_200_000
    # --max-num-seqs 1 makes max_num_batched_tokens 448 < 1,500: vLLM refuses (encoder_cache_manager.py:362-371)
    with pytest.raises(OptkgError, match="more than max_num_batched_tokens 448"):
        encoder_budget(tok, 448, 448, 1, 1280, 2, chunked_prefill=False, chunked_mm_input=False)
    off = encoder_budget(tok, 8192, 448, 1024, 1280, 2, limits={"audio": 0})
    assert (off.modality, off.cache_size, off.profiled_bytes) == (None, 0, 0) and "not initialise" in off.notes[0]


def test_whisper_weights_count_encoder_and_cross_attention(whisper):
    g = group_params(whisper)
    # attention 4 x 1280^2 x (2 x 32 decoder + 32 encoder) = 629,145,600; MLP 2 x 1280 x 5120 x 64 = 838,860,800;
    # embeddings 51,866 x 1280 + 1280 x (448 + 1500) = 68,881,920; proj_out tied
    assert (g["attention"], g["dense_mlp"], g["embedding"], g["lm_head"]) == (629_145_600, 838_860_800, 68_881_920, 0)
    assert estimate_weight_bytes(whisper) == 3_073_776_640


def test_whisper_kv_and_check_print_vllms_numbers():
    # vLLM 0.33.0's numbers (16-token blocks; 64 from 0.34.0)
    code, out, err = run_cli("kv", "--engine-version", "0.33.0", "--model", "openai/whisper-large-v3", "--kv-budget-gib", "30", "--max-model-len", "448",
                             "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    ca, c = d["cross_attention"], d["capacity"]
    assert (ca["layers"], ca["bytes_per_encoder_token_per_gpu"], ca["encoder_tokens_reserved_per_request"],
            ca["blocks_per_request"]) == (32, 163_840, 8192, 512)
    assert (c["num_blocks"], c["blocks_per_request"], c["max_concurrency"], c["gpu_kv_cache_size_tokens"]) == (
        12_288, 540, 22.76, 10_194)
    # (30 GiB - one null block) // 2,621,440 = 12,287 blocks, less 512 cross blocks, x 16 tokens
    assert c["max_model_len_that_fits"] == (12_287 - 512) * 16 == 188_400
    code, out, err = run_cli("check", "--engine-version", "0.33.0", "--vllm", "vllm serve openai/whisper-large-v3", "--kv-budget-gib", "30",
                             "--gpu", "H100-SXM", "--format", "json")
    assert code in (0, 1), err
    dv = json.loads(out)["derived"]
    assert (dv["kv_blocks_per_request"], dv["kv_cross_blocks_per_request"], dv["kv_cross_encoder_tokens_per_request"],
            dv["max_concurrency"], dv["kv_tokens_per_gpu"]) == (540, 512, 8192, 22.76, 10_194)
    assert dv["weight_bytes_per_gpu_estimate"] == 3_073_776_640
    code, out, err = run_cli("check", "--engine-version", "0.33.0", "--vllm", "vllm serve openai/whisper-large-v3", "--kv-budget-gib", "30",
                             "--gpu", "H100-SXM")
    assert "cross-attn encoder tokens per request" in out and "8,192" in out


GEMMA_MM = "tests/fixtures/model_configs/gemma-3-27b-it-mm.json"


def test_gemma3_encoder_cache_line_in_the_budget():
    from conftest import REPO
    cfg = str(REPO / GEMMA_MM)
    code, out, err = run_cli("check", "--vllm", "vllm serve google/gemma-3-27b-it", "--config", cfg, "--gpu", "H100-SXM",
                             "--format", "json")
    assert code in (0, 1), err
    d = json.loads(out)
    line = next(x for x in d["derived"]["kv_budget_breakdown"] if x["name"] == "encoder cache (profiled)")
    # chunked prefill on: per prompt max(1, min(999, 131,072 // 256)) = 512; items max(1, min(8,192 // 256, 1,024 x 512))
    # = 32; 32 x 256 tokens x hidden 5,376 x 2 B (bf16) = 88,080,384 B
    assert line["bytes"] == 88_080_384 and line["basis"].startswith("32 image item(s) x 256 tokens")
    for flag in ("--limit-mm-per-prompt '{\"image\": 0}'", "--language-model-only"):
        code, out, err = run_cli("check", "--vllm", f"vllm serve google/gemma-3-27b-it {flag}", "--config", cfg,
                                 "--gpu", "H100-SXM", "--format", "json")
        d = json.loads(out)
        assert not any(x["name"] == "encoder cache (profiled)" for x in d["derived"]["kv_budget_breakdown"]), flag
        assert any("does not initialise the encoder cache" in n for n in d["notes"]), flag


def test_multimodal_model_without_a_fixed_item_size_reports_tokens_only():
    from conftest import REPO
    from kg.derive.encoder_cache import stack_encoder_budget
    from kg.inputs.modelcfg import parse_config
    cfg = json.loads((REPO / GEMMA_MM).read_text())
    del cfg["mm_tokens_per_image"]
    m = parse_config(cfg, "gemma-without-mm-tokens")
    b, notes = stack_encoder_budget(m, 8192, 131072, 1024)
    assert b is None and "max(max_num_batched_tokens 8,192" in notes[0] and "not estimated here" in notes[0]
    # a text-only model: nothing
    assert stack_encoder_budget(resolve_model("Qwen/Qwen3-32B"), 8192, 40960, 1024) == (None, [])


def test_whisper_budget_is_one_number_in_check_fit_and_sweep():
    from conftest import REPO
    small = str(REPO / "rules" / "fixtures" / "traces" / "small_prefix.jsonl")
    code, out, err = run_cli("check", "--vllm", "vllm serve openai/whisper-large-v3", "--gpu", "H100-SXM", "--format", "json")
    check = json.loads(out)["derived"]
    code, out, err = run_cli("fit", small, "--model", "openai/whisper-large-v3", "--gpu", "H100-SXM", "--format", "json")
    fit = json.loads(out)["cost_curve"]
    code, out, err = run_cli("sweep", "--vllm", "vllm serve openai/whisper-large-v3", "--tp", "1", "--gpu", "H100-SXM",
                             "--format", "json")
    row = json.loads(out)["combinations"][0]
    assert check["kv_budget_bytes_per_gpu"] == round(fit["budget_bytes_per_gpu"]) == row["kv_budget_bytes_per_gpu"]
    enc = next(x for x in check["kv_budget_breakdown"] if x["name"] == "encoder cache (profiled)")
    assert enc["bytes"] == 19_200_000 and "encoder cache (profiled)" in row["kv_budget_source"]


def test_cross_attention_reservation_by_release(whisper):
    # vLLM 0.10.2-0.12.0 set max_num_encoder_input_tokens to the encoder length (0.12.0 config/vllm.py:736-741):
    # cdiv(1,500, 16) = 94 cross blocks; from 0.13.0 it is max_num_batched_tokens (config/scheduler.py:226): 512
    old = plan_kv_cache(whisper, engine_version="0.12.0")
    assert [s.blocks_per_request for s in old.specs] == [28, 94] and old.blocks_per_request == 122
    assert [s.blocks_per_request for s in plan_kv_cache(whisper, engine_version="0.13.0").specs] == [28, 512]
    code, out, err = run_cli("check", "--vllm", "vllm serve openai/whisper-large-v3", "--engine-version", "0.12.0",
                             "--kv-budget-gib", "30", "--gpu", "H100-SXM", "--format", "json")
    dv = json.loads(out)["derived"]
    # 12,288 blocks / 122 = 100.72x; before 0.21.0 "GPU KV cache size" is num_blocks // groups x block
    # (kg.engines.vllm.kv_plan KV_SIZE_FROM_CONCURRENCY_SINCE): 12,288 // 2 x 16 = 98,304 tokens
    assert (dv["kv_cross_encoder_tokens_per_request"], dv["kv_blocks_per_request"], dv["max_concurrency"],
            dv["kv_tokens_per_gpu"]) == (1500, 122, 100.72, 98_304)


def test_whisper_with_one_sequence_is_refused_at_startup():
    code, out, err = run_cli("check", "--vllm", "vllm serve openai/whisper-large-v3 --max-num-seqs 1", "--gpu", "H100-SXM",
                             "--format", "json")
    assert code == 1, err
    f = next(f for f in json.loads(out)["findings"] if f["rule_id"] == "encoder-item-exceeds-batched-tokens")
    # min(1 x 448, max(448, 8,192)) = 448 batched tokens < 1,500 encoder tokens of one 30 s audio
    assert f["numbers"] == {"encoder_tokens_per_item": 1500, "max_num_batched_tokens": 448}


def test_sglang_whisper_pool_sizes_every_layer_id(whisper):
    from kg.engines.sglang.pools import sglang_pools
    # SGLang 0.5.23: encoder 32 + decoder self 32 + cross 32 = 96 layers per token cell (model_config.py:1591-1601):
    # 96 x 20 heads x (64 + 64) x 2 B = 491,520 B; 30 GiB / 491,520 B = 65,536 tokens
    p = sglang_pools(whisper, 1, 30 * GIB)
    assert (p.kind, p.cell_bytes, p.max_total_num_tokens) == ("encoder-decoder", 491_520, 65_536)
    code, out, err = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path openai/whisper-large-v3 "
                             "--context-length 448", "--kv-budget-gib", "30", "--gpu", "H100-SXM", "--format", "json")
    dv = json.loads(out)["derived"]
    # each request: 1,500 encoder placeholder tokens + 448 decoder tokens (models/whisper.py:421-429): 65,536 / 1,948
    assert (dv["kv_tokens_per_gpu"], dv["max_concurrency"]) == (65_536, 33.64)
