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


# Llama-3.3-Nemotron-Super-49B-v1 (DeciLM / nemotron-nas): num_key_value_heads is null, so it was read as MHA with
# attention on all 80 layers: 2,621,440 KV bytes/token (13x) and 88.0 B parameters ("weights do not fit" on 2 x
# H100). vLLM builds attention on 49 layers with 64 // n_heads_in_group 8 = 8 KV heads, and each layer's MLP from
# ffn_mult (nemotron_nas.py:60-71, :133-190): widths 28672 x 49, 14336 x 6, 7168 x 10, 5632 x 8 (ffn_mult 1.0:
# int(5461.3) rounded up to 256), 2816 x 6, 17920 x 1 = 1,642,496.
def test_nemotron_nas_counts_only_the_blocks_it_builds():
    from kg.derive.kv import kv_layout
    from kg.derive.weights import group_params
    m = model("nvidia/Llama-3_3-Nemotron-Super-49B-v1")
    assert (m.num_key_value_heads, m.layer_kinds.count("full"), sum(m.layer_ffn_sizes)) == (8, 49, 1_642_496)
    g = group_params(m)
    # attention 49 x (2 x 64 x 128 x 8192 + 2 x 8 x 128 x 8192) = 49 x 150,994,944; MLP 3 x 8192 x 1,642,496
    assert (g["attention"], g["dense_mlp"], sum(g.values())) == (7_398_752_256, 40_365_981_696, 49_866_080_256)
    # 49 layers x K and V x 8 heads x 128 x 2 B
    assert kv_layout(m, tp_size=1).bytes_per_token_model == 200_704


def test_nemotron_nas_block_configs_that_do_not_fit_the_layers_are_one_line_errors():
    from kg.core.errors import OptkgError
    from kg.inputs.modelcfg import parse_config
    base = {"model_type": "nemotron-nas", "num_attention_heads": 64, "num_hidden_layers": 2, "hidden_size": 8192,
            "num_key_value_heads": None, "vocab_size": 10}
    ok = {"attention": {"no_op": False, "n_heads_in_group": 8}, "ffn": {"ffn_mult": 1.0}}
    with pytest.raises(OptkgError, match="one {attention, ffn} object per layer"):
        parse_config({**base, "block_configs": [ok]})
    with pytest.raises(OptkgError, match=r"block_configs\[1\].attention.n_heads_in_group must divide"):
        parse_config({**base, "block_configs": [ok, {**ok, "attention": {"no_op": False, "n_heads_in_group": 7}}]})


# Up/down-only MLPs (no gate) were counted with three matrices: Falcon-40B came to 57.94 B parameters.
def test_ungated_mlps_count_two_matrices():
    from kg.derive.weights import group_params
    from kg.inputs.modelcfg import parse_config
    g = group_params(model("tiiuae/falcon-40b"))
    # MLP 60 x 2 x 8192 x 4 x 8192; attention 60 x (2 x 128 x 64 x 8192 + 2 x 8 x 64 x 8192)
    assert (g["dense_mlp"], g["attention"], sum(g.values())) == (32_212_254_720, 8_556_380_160, 41_833_988_096)
    # GPT-2 small as its config.json writes it (n_inner null: 4 x n_embd), OPT-125m's ffn_dim
    gpt2 = parse_config({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": None,
                         "vocab_size": 50257, "tie_word_embeddings": True})
    opt = parse_config({"model_type": "opt", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                        "ffn_dim": 3072, "vocab_size": 50272})
    assert group_params(gpt2)["dense_mlp"] == group_params(opt)["dense_mlp"] == 2 * 768 * 3072 * 12
    llama = parse_config({"model_type": "llama", "hidden_size": 768, "num_hidden_layers": 12,
                          "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 50272})
    assert llama.mlp_gated and group_params(llama)["dense_mlp"] == 3 * 768 * 3072 * 12


# Kimi-K3 (kimi_linear text config): 69 of its 93 layers are Kimi Delta Attention (linear_attn_config.kda_layers,
# 1-based; vllm 0.34.0 configs/kimi_linear.py:225-229) with a state, not an MLA cache; its routed experts run in
# routed_expert_hidden_size 3584 (models/kimi_k3/nvidia/model.py:386-392, :555). It was sized as 93 MLA layers
# (107,136 KV bytes/token) and 7168-wide experts (5.47 T parameters).
def test_kimi_k3_kda_layers_hold_state_and_its_experts_run_in_the_latent_width():
    from kg.derive.kv import kv_layout
    from kg.derive.weights import group_params
    from kg.engines.vllm.kv_plan import _gdn_state_bytes, ssm_state_dtype_bytes
    m = model("moonshotai/Kimi-K3")
    assert (m.layer_kinds.count("full"), m.layer_kinds.count("linear"), m.layer_kinds[3]) == (24, 69, "full")
    assert kv_layout(m, tp_size=8).bytes_per_token_model == 24 * 576 * 2
    # TP 8: conv 96 x 128 x 3 / 8 = 4,608 x (kernel 4 - 1) x 2 B = 27,648; recurrent 12 x 128 x 128 x 4 B (float32)
    assert ssm_state_dtype_bytes(m) == (2.0, 4.0)
    assert _gdn_state_bytes(m.linear_attention, 8, *ssm_state_dtype_bytes(m)) == 27_648 + 786_432
    g = group_params(m)
    # 92 MoE layers x 896 experts x 3 x 3584 x 3072; router 92 x (7168 x 896 + 2 x 7168 x 3584)
    assert (g["experts"], g["router"]) == (2_722_740_830_208, 5_317_853_184)
