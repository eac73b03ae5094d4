"""NemotronH's decoder layers each hold ONE block: a Mamba2 mixer (M), attention (*), an up/down MLP (-) or a MoE
layer (E) (vllm 0.34.0 model_executor/models/nemotron_h.py:548-553, :597). They were sized as attention + a gated
MoE on every layer: Nemotron-3-Super-120B-A12B came out at 1,495.5 B parameters (NVFP4 785.14 GiB: "weights do not
fit" on one B200, where NVIDIA documents it running), Ultra-550B at 6,989 B, Nano-30B at 102.3 B."""
from __future__ import annotations

import pytest

from cli_helpers import model

# Nano-30B-A3B by hand (h 2688; 23 M, 6 *, 23 E; vocab 131,072 untied):
#   Mamba2 (64 heads x 64 = I 4096, conv_dim 4096 + 2 x 8 x 128 = 6144, kernel 4):
#     2688 x (4096 + 6144 + 64) + 4 x 6144 + 4096 x 2688 = 38,731,776; x 23 = 890,830,848
#   attention 32 x 128 x 2688 x 2 + 2 x 2 x 128 x 2688 = 23,396,352; x 6 = 140,378,112
#   experts 23 x 128 x 2 x 2688 x 1856 = 29,374,808,064; shared 23 x 2 x 2688 x 3712 = 458,981,376
#   router 23 x 2688 x 128 = 7,913,472; embedding + lm_head 2 x 2688 x 131,072 = 704,643,072
# Super-120B-A12B (h 4096, latent 1024; 40 M, 8 *, 40 E):
#   Mamba2 (128 x 64 = I 8192, conv_dim 10,240): 4096 x 18,560 + 4 x 10,240 + 8192 x 4096 = 109,617,152; x 40
#   attention 8 x 35,651,584; experts 40 x 512 x 2 x 1024 x 2688 = 112,742,891,520; shared 40 x 2 x 4096 x 5376
#   router + latent projections 40 x (4096 x 512 + 2 x 4096 x 1024) = 419,430,400; embeddings 1,073,741,824
PARAMS = {
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": 31_577_554_944,        # published 31.6 B
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4": 120_667_570_176,   # 120 B
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16": 549_306_368_000,    # 550 B
    "nvidia/Nemotron-H-56B-Base-8K": 56_321_343_488,                     # 56 B
}


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_nemotron_h_parameters_count_one_block_per_layer(name):
    from kg.derive.weights import weight_params
    assert sum(weight_params(model(name)).values()) == PARAMS[name]


def test_nano_groups_match_the_hand_count():
    from kg.derive.weights import group_params
    g = group_params(model("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"))
    assert g == {"attention": 890_830_848 + 140_378_112, "dense_mlp": 0, "experts": 29_374_808_064,
                 "shared_experts": 458_981_376, "router": 7_913_472, "embedding": 352_321_536,
                 "lm_head": 352_321_536, "vision": 0}


def test_ultra_legacy_layers_block_type_reads_as_the_pattern():
    # Ultra's config.json has no hybrid_override_pattern, only layers_block_type with the legacy names
    m = model("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16")
    assert (len(m.layer_blocks), m.layer_blocks.count("M"), m.layer_blocks.count("*"), m.num_moe_layers) == (108, 48, 12, 48)
    assert m.layer_blocks.startswith("MEMEMEM*E") and not m.mlp_gated and m.moe_latent_size == 2048
    assert m.shared_expert_intermediate_size == 10240  # moe_shared_expert_intermediate_size x n_shared_experts 1


def test_super_nvfp4_fits_one_b200_and_ultra_bf16_does_not_fit_eight_h100():
    from kg.derive.weights import estimate_weight_bytes
    # linear groups 119,174,397,952 x 0.5625 B + router/latent and embeddings 1,493,172,224 x 2 B + a 4 B global
    # scale per weight matrix: 8 x 4 + 40 x 2 (in/out_proj) + 40 x (512 x 2 + 2) = 41,152 matrices
    assert estimate_weight_bytes(model("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4")) == 70_022_107_904
    from conftest import run_cli
    rc, out, _ = run_cli("check", "--cmd", "trtllm-serve nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",
                         "--gpu", "B200", "--no-speed")
    assert "weights-do-not-fit" not in out and "- weights                                65.21 GiB" in out
    rc, out, _ = run_cli("check", "--vllm", "vllm serve nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16 -tp 8",
                         "--gpu", "H100", "--no-speed")
    # 549,306,368,000 x 2 B = 1,023.16 GiB over 8 GPUs
    assert rc == 1 and "ERROR weights-do-not-fit" in out and "weight_gib_total = 1,023" in " ".join(out.split())
