"""A Qwen3-VL / Qwen3.5 model's vision tower is part of the weights an engine loads (vLLM 0.34.0
model_executor/models/qwen3_vl.py:564-660 Qwen3_VisionTransformer), split over TP unless --mm-encoder-tp-mode data,
and not loaded with --language-model-only (interfaces.py:382-394). It was left out: Qwen3-VL-32B weighed what
Qwen3-32B weighs."""
from __future__ import annotations

import pytest

from cli_helpers import model

# Qwen3-VL-32B vision_config: depth 27, hidden 1152, intermediate 4304, out 5120, merge 2, 3 deepstack indexes,
# 2304 positions, patch 16, temporal 2, 3 channels.
# blocks 27 x (4 x 1152^2 + 2 x 1152 x 4304) = 27 x 15,224,832 = 411,070,464
# mergers (1 + 3) x (4608^2 + 4608 x 5120) = 4 x 44,826,624 = 179,306,496
# pos_embed 2304 x 1152 = 2,654,208; patch_embed 3 x 2 x 16 x 16 x 1152 = 1,769,472
QWEN3_VL_32B_VISION = 594_800_640


def test_qwen3_vl_tower_is_counted_from_its_vllm_modules():
    from kg.derive.weights import weight_params
    m = model("Qwen/Qwen3-VL-32B-Instruct")
    assert m.vision_params == QWEN3_VL_32B_VISION
    text = model("Qwen/Qwen3-32B")
    assert text.vision_params is None and weight_params(text)["vision"] == 0
    # the language model is Qwen3-32B's: the two differ by the tower alone
    assert sum(weight_params(m).values()) - sum(weight_params(text).values()) == QWEN3_VL_32B_VISION


@pytest.mark.parametrize("shards,expected", [(None, QWEN3_VL_32B_VISION), (1, 2 * QWEN3_VL_32B_VISION), (0, 0)])
def test_tower_bytes_per_gpu_follow_the_encoder_tp_mode(shards, expected):
    from kg.derive.weights import weight_bytes_per_gpu
    m = model("Qwen/Qwen3-VL-32B-Instruct")
    base = weight_bytes_per_gpu(m, 2, vision_shards=0)
    # bf16: 2 B per parameter; TP 2 splits the tower in two (weights mode), data mode keeps it whole
    assert weight_bytes_per_gpu(m, 2, vision_shards=shards) - base == expected


def test_language_model_only_drops_the_tower_from_the_kv_budget():
    from kg.analyses.stackfacts import _vision_shards
    assert _vision_shards({}, 2) == 2
    assert _vision_shards({"mm_encoder_tp_mode": "data"}, 2) == 1
    assert _vision_shards({"language_model_only": True}, 2) == 0
    assert _vision_shards({"limit_mm_per_prompt": {"image": 0, "video": 0}}, 4) == 0
    assert _vision_shards({"limit_mm_per_prompt": {"image": 0}}, 4) == 4  # video keeps vLLM's default 999


def test_a_tower_optkg_cannot_size_is_named_in_a_note_not_left_silent():
    from conftest import run_cli
    _, out, _ = run_cli("check", "--vllm", "vllm serve google/gemma-4-26B-A4B -tp 2", "--gpu", "H100", "--no-speed")
    text = " ".join(out.split())
    assert ("note: weights: the vision tower (gemma4_vision) is not counted: optkg sizes only Qwen3-VL / Qwen3.5 "
            "towers (kg.inputs.vision), so the weights are low and the KV budget high by its size") in text
    _, out, _ = run_cli("check", "--vllm", "vllm serve google/gemma-4-26B-A4B -tp 2 --language-model-only",
                        "--gpu", "H100", "--no-speed")
    assert "vision tower" not in out  # not loaded: nothing missing
