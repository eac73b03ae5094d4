"""SGLang's computed default mem_fraction_static (kg.engines.sglang.memfrac; tester-4 #2): SGLang 0.5.23
srt/arg_groups/memory_hook.py:281-399 (0.5.18 srt/server_args.py:4969-4980, 5082-5118), worked by hand."""
from __future__ import annotations

import json

import pytest
from conftest import run_cli
from kg.engines.sglang.memfrac import MIB, default_mem_fraction, gpu_defaults, prefill_capture_sizes


def test_h100_tp8_gqa_model():
    # H100: nvidia-smi memory.total 81,559 MiB -> chunked_prefill 8,192, decode max_bs 512 (TP >= 4)
    # prefill capture sizes up to 8,192: 8 + 14 + 8 + 8 + 12 + 8 = 58 -> 464 MiB; decode 512 x 2 = 1,024
    assert len(prefill_capture_sizes(8192)) == 58
    mf = default_mem_fraction(81559 * MIB, 8)
    # 512 + 1.5 x 8,192 + 8 / 8 x 1,024 + (1,024 + 464) = 15,312 MiB; (81,559 - 15,312) / 81,559 = 0.8123 -> 0.812
    assert mf.reserved_mib == 15312 and mf.fraction == 0.812
    assert (mf.chunked_prefill_size, mf.max_bs) == (8192, 512)


def test_h200_mla_with_dp_attention():
    # DeepSeek-V3 (MLA) on H200 (143,771 MiB), TP 8 with DP attention over 8 groups: graph reserve
    # 512 x 2 + 512 x 8 x 3 + 512 x 8 x 1.5 (max_bs > 300) + 1.5 GiB (MLA prefill graphs) = 20,992 MiB
    mf = default_mem_fraction(143771 * MIB, 8, is_mla=True, attn_dp_size=8)
    assert mf.reserved_mib == 512 + 12288 + 1024 + 20992
    assert mf.fraction == round((143771 - 34816) / 143771, 3) == 0.758


def test_small_gpus_floor_and_release_buckets():
    # RTX 4090 (24,564 MiB) TP 1: 4,096 / 48 from 0.5.20, 2,048 / 24 before; no 10 GiB floor below 60 GiB
    assert gpu_defaults(24564, 1, "0.5.23") == (4096, 48) and gpu_defaults(24564, 1, "0.5.19") == (2048, 24)
    mf = default_mem_fraction(24564 * MIB, 1)
    # 512 + 1.5 x 4,096 + 1 / 8 x 1,024 + (48 x 2 + 8 MiB x 50 capture sizes up to 4,096) = 7,280 MiB
    assert len(prefill_capture_sizes(4096)) == 50 and mf.reserved_mib == 512 + 6144 + 128 + 96 + 400
    # a small reserve on a large GPU is raised to 10 GiB: --disable-cuda-graph, chunked prefill 2,048 on H100 TP 1
    mf = default_mem_fraction(81559 * MIB, 1, chunked_prefill_size=2048, cuda_graph_disabled=True)
    assert mf.reserved_mib == 10240 and mf.fraction == round((81559 - 10240) / 81559, 3)
    assert default_mem_fraction(81559 * MIB, 8, engine_version="0.5.17") is None  # not modelled before 0.5.18


def test_check_uses_it_for_the_static_pool():
    code, out, err = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B "
                             "--tp 8", "--gpu", "H100", "--count", "8", "--format", "json")
    d = json.loads(out)
    assert d["derived"]["kv_budget_gpu_memory_utilization"] == 0.812
    assert d["derived"]["kv_budget_utilization_source"].startswith("SGLang default")
    pool = {x["name"]: x for x in d["derived"]["kv_budget_breakdown"]}["static pool"]
    assert pool["bytes"] == 81559 * MIB * 0.812
    assert d["stack"]["techniques"]["paged-kv-cache"]["gpu_memory_utilization"] == 0.812
    # a given --mem-fraction-static is kept
    code, out, err = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B "
                             "--tp 8 --mem-fraction-static 0.85", "--gpu", "H100", "--count", "8", "--format", "json")
    assert json.loads(out)["derived"]["kv_budget_gpu_memory_utilization"] == 0.85


def test_releases_before_0_5_18_use_their_own_reserve():
    # 0.5.3 - 0.5.9 (0.5.8.post1 srt/server_args.py:879-1030): H100 TP 1, 512 + 1.5 x 8,192 + 256 x 2 + 1 / 8 x 1,024
    # = 13,440 MiB, no prefill-graph term; (81,559 - 13,440) / 81,559 = 0.8352 -> 0.835 (0.5.23 gives 0.830)
    mf = default_mem_fraction(81559 * MIB, 1, engine_version="0.5.8.post1")
    assert mf.reserved_mib == 13440 and mf.fraction == 0.835
    # H200 TP 8 on 0.5.6.post2: 512 + 12,288 + 512 x 2 + 1,024 = 14,848 -> (143,771 - 14,848) / 143,771 = 0.897
    assert default_mem_fraction(143771 * MIB, 8, engine_version="0.5.6.post2").fraction == 0.897
    # 0.5.1 - 0.5.2 (0.5.1 :354-393): a fixed (9.5 + tp x pp / 2) GiB on an H100: TP 2 -> 10,752 MiB -> 0.868
    mf = default_mem_fraction(81559 * MIB, 2, engine_version="0.5.1.post1")
    assert mf.reserved_mib == 10752 and mf.fraction == 0.868
    # 0.5.10 - 0.5.17 not read, 0.4.x not modelled: the table's default stays
    assert default_mem_fraction(81559 * MIB, 1, engine_version="0.5.12") is None
    assert default_mem_fraction(81559 * MIB, 1, engine_version="0.4.0") is None


def test_chunked_prefill_off_reserves_max_prefill_tokens_of_activations():
    # newuser8: `--chunked-prefill-size -1` (or 0) turns chunking off; SGLang then reserves 1.5 MiB per token of
    # max(max_prefill_tokens, 2048) (0.5.23 srt/arg_groups/memory_hook.py:304-307, default 16,384) and captures no
    # prefill graph size (max_bs -1). optkg took -1 as a chunk size: max(-1, 2048) -> 10 GiB floor -> 0.874.
    # Llama-3.1-70B TP 4 on an H100 (81,559 MiB): 512 + 1.5 x 16,384 + 4 / 8 x 1,024 + 512 x 2 = 26,624 MiB
    mf = default_mem_fraction(81559 * MIB, 4, chunked_prefill_size=-1)
    assert mf.reserved_mib == 26624 and mf.fraction == round((81559 - 26624) / 81559, 3) == 0.674
    assert default_mem_fraction(81559 * MIB, 4, chunked_prefill_size=0).fraction == 0.674
    # --max-prefill-tokens 4,096: 512 + 6,144 + 512 + 1,024 = 8,192 MiB, raised to the 10 GiB floor -> 0.874
    assert default_mem_fraction(81559 * MIB, 4, chunked_prefill_size=-1, max_prefill_tokens=4096).fraction == 0.874
    # 0.5.3 - 0.5.9 take the same branch (0.5.5 srt/server_args.py:789-792): TP 1, 512 + 24,576 + 256 x 2 + 128
    mf = default_mem_fraction(81559 * MIB, 1, chunked_prefill_size=-1, engine_version="0.5.8.post1")
    assert mf.reserved_mib == 25728 and mf.fraction == 0.685
    code, out, err = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path "
                             "meta-llama/Meta-Llama-3.1-70B --tp 4 --chunked-prefill-size -1", "--gpu", "H100",
                             "--count", "4", "--no-speed", "--format", "json")
    d = json.loads(out)["derived"]
    assert d["kv_budget_gpu_memory_utilization"] == 0.674
    assert "max_prefill_tokens (chunked prefill off) 24,576" in d["kv_budget_utilization_source"]


def test_a_vision_language_model_gets_sglangs_vision_tower_reduction():
    # newuser8: SGLang multiplies its computed fraction by 0.95 x clamp(1 - 0.1 x (L x H^2 / (24 x 1024^2) - 1),
    # 0.8, 1.05) for a multimodal model (0.5.23 srt/arg_groups/memory_hook.py:331-336, 417-466); optkg gave the
    # text model's fraction. Qwen3-VL: SGLang's own config keeps the tower depth as `depth`, so L = 24 (default),
    # H = 1152: 24 x 1152^2 / (24 x 1024^2) = 1.265625 -> 0.95 x 0.9734375 = 0.924765625
    from kg.engines.sglang.vlm import vlm_factor
    qwen_vl = {"vision_config": {"depth": 27, "hidden_size": 1152}}
    assert vlm_factor(qwen_vl, "Qwen3VLForConditionalGeneration")[0] == pytest.approx(0.924765625, abs=1e-12)
    # Gemma 4 names num_hidden_layers 27: 27 x 1152^2 / (24 x 1024^2) = 1.423828125 -> 0.95 x 0.9576171875
    gemma = {"vision_config": {"num_hidden_layers": 27, "hidden_size": 1152}}
    assert vlm_factor(gemma, "Gemma4ForConditionalGeneration")[0] == pytest.approx(0.909736328125, abs=1e-12)
    assert vlm_factor(gemma, "Llama4ForConditionalGeneration") is None  # served text-only by default (:691-705)
    assert vlm_factor({}, "Qwen3VLForConditionalGeneration") is None  # no vision tower: no reduction
    assert vlm_factor(qwen_vl, "Qwen3VLForConditionalGeneration", "decode") is None  # a PD decode server
    assert vlm_factor(qwen_vl, "Qwen3ForCausalLM") is None
    # Qwen3-VL-32B TP 2 on an H100: the text model's 0.828 (reserved 14,032 MiB) x 0.924765625 = 0.765706
    mf = default_mem_fraction(81559 * MIB, 2, vision=vlm_factor(qwen_vl, "Qwen3VLForConditionalGeneration"))
    assert mf.reserved_mib == 14032 and mf.fraction == pytest.approx(0.765706, abs=5e-7)
    code, out, err = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path "
                             "Qwen/Qwen3-VL-32B-Instruct --tp 2", "--gpu", "H100", "--count", "2", "--no-speed",
                             "--format", "json")
    assert json.loads(out)["derived"]["kv_budget_gpu_memory_utilization"] == pytest.approx(0.765706, abs=5e-7)


def test_a_speculative_draft_adds_its_reserve_in_the_releases_that_had_one():
    # newuser8: SGLang 0.5.3 - 0.5.9 reserve 2 GiB more for an EAGLE / MTP draft (6 GiB for STANDALONE, none for
    # NGRAM) after the 10 GiB floor (0.5.9 srt/server_args.py:1051-1057); 0.5.1 - 0.5.2 2 GiB for any algorithm
    # (0.5.1 :387-389); 0.5.17 / 0.5.23 none. H100 TP 1 on 0.5.8.post1: 13,440 MiB (test above) + 2,048 = 15,488
    h100 = 81559 * MIB
    assert default_mem_fraction(h100, 1, engine_version="0.5.8.post1", speculative="EAGLE").fraction == 0.810
    assert default_mem_fraction(h100, 1, engine_version="0.5.8.post1", speculative="STANDALONE").fraction == 0.760
    assert default_mem_fraction(h100, 1, engine_version="0.5.8.post1", speculative="NGRAM").fraction == 0.835
    # after the floor: chunk 2,048 -> 512 + 3,072 + 512 + 128 = 4,224, floored to 10,240, + 2,048 = 12,288 -> 0.849
    mf = default_mem_fraction(h100, 1, chunked_prefill_size=2048, engine_version="0.5.8.post1", speculative="EAGLE3")
    assert mf.reserved_mib == 12288 and mf.fraction == 0.849
    # 0.5.1.post1 TP 2: 10,752 + 2,048 = 12,800 -> 0.843
    assert default_mem_fraction(h100, 2, engine_version="0.5.1.post1", speculative="NGRAM").fraction == 0.843
    assert default_mem_fraction(h100, 8, speculative="EAGLE").fraction == 0.812  # 0.5.23: no draft term


def test_a_stack_file_may_turn_chunked_prefill_off_as_sglang_does(tmp_path):
    # newuser8: `settings: {chunked_prefill_size: -1}` was refused ("expected a value >= 0", exit 2) although -1 is
    # SGLang's way to turn chunking off and `--chunked-prefill-size -1` is read. Qwen3-32B TP 2 on an H100, no
    # cuda-graphs technique in the file: 512 + 1.5 x 16,384 + 2 / 8 x 1,024 = 25,344 MiB -> 0.689
    f = tmp_path / "s.yaml"
    f.write_text("model: Qwen/Qwen3-32B\nengine: {name: sglang, version: '0.5.23'}\nhardware: {gpu: H100, count: 2}\n"
                 "techniques:\n  - tensor-parallelism: {tp_size: 2}\nsettings:\n  chunked_prefill_size: -1\n")
    code, out, err = run_cli("check", str(f), "--no-speed", "--format", "json")
    assert code == 0 and json.loads(out)["derived"]["kv_budget_gpu_memory_utilization"] == 0.689
    f.write_text(f.read_text().replace("-1", "-2"))
    code, out, err = run_cli("check", str(f), "--no-speed")
    assert code == 2 and err.strip().endswith("chunked_prefill_size: expected a value >= -1, found -2")
