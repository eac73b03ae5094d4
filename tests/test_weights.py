"""Weight bytes per tensor group as vLLM 0.33.0 loads them (kg.derive.weights; issue 13 priority 1).

Parameter counts are worked from the bundled configs (catalog/models/); Llama-3.1-8B: attention
32 x (2 x 4096 x 4096 + 2 x 4096 x 1024) = 1,342,177,280, MLP 32 x 3 x 4096 x 14336 = 5,637,144,576
(linear 6,979,321,856), embeddings 4096 x 128,256 = 525,336,576 and as much again for lm_head;
Llama-3.1-70B: linear 80 x (150,994,944 + 704,643,072) = 68,451,041,280, embeddings + lm_head
2 x 8192 x 128,256 = 2,101,346,304.
"""
from __future__ import annotations

import json

import pytest

from conftest import REPO, run_cli
from kg.core.errors import OptkgError
from kg.derive.weights import estimate_weight_bytes, group_params, weight_bytes_per_gpu, weight_matrices, weight_scheme
from kg.inputs.modelcfg import load_config_file, resolve_model

QC = REPO / "tests" / "fixtures" / "quant_configs"


def check_json(*argv: str) -> dict:
    code, out, err = run_cli("check", *argv, "--format", "json", "--no-speed")  # no test here reads the Speed section
    assert code in (0, 1), err
    return json.loads(out)


def test_llama_70b_online_fp8_is_72_65_gb():
    m = resolve_model("meta-llama/Meta-Llama-3.1-70B")
    s = weight_scheme(m, quantization="fp8")
    assert s.method == "fp8" and s.source.startswith("--quantization fp8 on an unquantised checkpoint")
    assert s.bytes_per_param == {"attention": 1.0, "dense_mlp": 1.0, "experts": 1.0, "shared_experts": 1.0,
                                 "router": 2.0, "embedding": 2.0, "lm_head": 2.0, "vision": 2.0}
    p = group_params(m)
    assert p["attention"] + p["dense_mlp"] == 68_451_041_280 and p["embedding"] + p["lm_head"] == 2_101_346_304
    # 80 layers x (q, k, v, o + gate, up, down) = 560 fp32 per-tensor scales (fp8.py:319-326)
    assert weight_matrices(m) == 560
    # 68,451,041,280 x 1 + 2,101,346,304 x 2 + 560 x 4 = 72,653,736,128 B
    total = estimate_weight_bytes(m, scheme=s)
    assert total == 72_653_736_128
    assert abs(total / 72.65e9 - 1) < 0.01
    # the BF16 size it replaces: (68,451,041,280 + 2,101,346,304) x 2
    assert estimate_weight_bytes(m) == 141_104_775_168


def test_llama_70b_fp8_tp1_on_h200_fits_and_reports_one_quant_fact():
    d = check_json("--vllm", "vllm serve meta-llama/Meta-Llama-3.1-70B -tp 1 --quantization fp8", "--gpu", "H200",
                   "--count", "1")
    assert "weights-do-not-fit" not in {f["rule_id"] for f in d["findings"]}
    assert d["derived"]["weight_bytes_total_estimate"] == 72_653_736_128
    assert d["derived"]["weight_bytes_per_gpu_estimate"] == 72_653_736_128
    assert d["derived"]["weight_bytes_per_param"] == 1.0


def test_sweep_tp1_fp8_70b_on_h200_is_not_weights_do_not_fit():
    code, out, err = run_cli("sweep", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-70B --quantization fp8",
                             "--tp", "1,2", "--gpu", "H200", "--count", "2", "--format", "json", "--no-speed")
    assert code in (0, 1), err
    rows = {c["tp_size"]: c for c in json.loads(out)["combinations"]}
    assert rows[1]["fits"] is True, rows[1]["reasons"]


def test_405b_fp8_on_8_h100_no_longer_fails_weights():
    d = check_json("--vllm", "vllm serve meta-llama/Meta-Llama-3.1-405B -tp 8 --quantization fp8", "--gpu", "H100-SXM",
                   "--count", "8")
    assert "weights-do-not-fit" not in {f["rule_id"] for f in d["findings"]}
    # 405B: linear 126 x (16384 x 16384 x 2 + 16384 x 1024 x 2 + 3 x 16384 x 53248) = 126 x 3,187,671,040 =
    # 401,646,551,040 params x 1 B, embeddings + lm_head 2 x 16384 x 128,256 = 4,202,692,608 x 2 B,
    # 126 x 7 = 882 scales x 4 B: 410,051,939,784 B, 51.3 GB per GPU at TP 8
    assert d["derived"]["weight_bytes_total_estimate"] == 401_646_551_040 + 8_405_385_216 + 3_528


def test_block_fp8_checkpoint_counts_one_scale_per_block():
    m = resolve_model("deepseek-ai/DeepSeek-V3")
    s = weight_scheme(m)
    assert s.source == "config.json quantization_config" and s.method == "fp8"
    assert s.bytes_per_param["experts"] == 1 + 4 / 16384 == 1.000244140625
    assert s.bytes_per_param["embedding"] == 2.0 and s.bytes_per_param["router"] == 2.0
    # --quantization fp8 agrees with the checkpoint: same scheme, the source says so
    s2 = weight_scheme(m, quantization="fp8")
    assert s2.bytes_per_param == s.bytes_per_param and s2.source.endswith("(--quantization fp8 agrees)")


def test_compressed_tensors_w4a16_group_128_with_lm_head_ignored():
    m = load_config_file(QC / "llama31-8b-w4a16-ct")
    s = weight_scheme(m)
    assert s.method == "compressed-tensors" and s.ignored == ["lm_head"]
    # int4 + one 2-byte scale per 128 inputs, symmetric (no zero point): 0.5 + 2/128 = 0.515625
    assert s.bytes_per_param["attention"] == s.bytes_per_param["dense_mlp"] == 0.515625
    assert s.bytes_per_param["lm_head"] == s.bytes_per_param["embedding"] == 2.0
    # 6,979,321,856 x 0.515625 = 3,598,712,832 + 1,050,673,152 x 2 = 5,700,059,136
    assert estimate_weight_bytes(m) == 5_700_059_136


def test_compressed_tensors_ignore_list_keeps_attention_at_model_dtype():
    cfg = json.loads((QC / "llama31-8b-w4a16-ct" / "config.json").read_text())
    cfg["quantization_config"]["ignore"] = ["lm_head", "re:.*self_attn.*"]
    from kg.inputs.modelcfg import parse_config
    s = weight_scheme(parse_config(cfg, "ct-attn-ignored"))
    assert s.bytes_per_param["attention"] == 2.0 and s.bytes_per_param["dense_mlp"] == 0.515625


def test_modelopt_hf_quant_config_json_fp8_and_nvfp4():
    m = load_config_file(QC / "llama31-8b-modelopt-fp8")
    assert m.quant_method == "modelopt" and m.checkpoint_kv_scales
    s = weight_scheme(m)
    assert s.method == "modelopt_fp8" and s.source == "hf_quant_config.json (ModelOpt)"
    # 6,979,321,856 linear params x 1 B + 1,050,673,152 embedding/lm_head params x 2 B + 32 x (4 + 3) = 224 scales x 4 B
    assert estimate_weight_bytes(m) == 6_979_321_856 + 2_101_346_304 + 224 * 4
    m4 = load_config_file(QC / "llama31-8b-modelopt-nvfp4")
    s4 = weight_scheme(m4)
    assert s4.method == "modelopt_fp4" and s4.bytes_per_param["dense_mlp"] == 0.5625  # 0.5 + 1/16
    # 6,979,321,856 x 0.5625 = 3,925,868,544 + 2,101,346,304 + 224 global scales x 4 B
    assert estimate_weight_bytes(m4) == 3_925_868_544 + 2_101_346_304 + 896


def test_expert_dtype_overrides_only_the_experts():
    m = resolve_model("Qwen/Qwen3-30B-A3B")
    s = weight_scheme(m, expert_dtype="fp4")
    assert s.bytes_per_param["experts"] == 0.5625 and s.bytes_per_param["attention"] == 2.0
    p = group_params(m)
    # 48 layers x 128 experts x 3 x 2048 x 768 = 28,991,029,248 expert params
    assert p["experts"] == 28_991_029_248
    bf16 = estimate_weight_bytes(m, parts=True)
    fp4 = estimate_weight_bytes(m, parts=True, scheme=s)
    assert fp4["experts"] == 28_991_029_248 * 0.5625
    assert fp4["attention"] == bf16["attention"]
    with pytest.raises(OptkgError, match="expert_dtype"):
        weight_scheme(m, expert_dtype="fp3")


def test_gptq_awq_bnb_mxfp4_bytes():
    from kg.inputs.modelcfg import parse_config
    base = json.loads((REPO / "catalog/models/meta-llama__Meta-Llama-3.1-8B.json").read_text())

    def bpp(qc):
        return weight_scheme(parse_config(dict(base, quantization_config=qc), "q")).bytes_per_param["attention"]
    assert bpp({"quant_method": "gptq", "bits": 4, "group_size": 128}) == 0.51953125    # 0.5 + 2.5/128
    assert bpp({"quant_method": "awq", "bits": 4, "group_size": 64}) == 0.5 + 2.5 / 64
    assert bpp({"quant_method": "bitsandbytes", "load_in_4bit": True}) == 0.5625          # 0.5 + 4/64
    assert bpp({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_use_double_quant": True}) == \
        0.5 + 1 / 64 + 4 / (64 * 256)
    assert bpp({"quant_method": "bitsandbytes", "load_in_8bit": True}) == 1 + 4 / 4096
    gpt = resolve_model("openai/gpt-oss-120b")
    s = weight_scheme(gpt)
    assert s.bytes_per_param["experts"] == 0.53125 and s.bytes_per_param["attention"] == 2.0


def test_dtype_flag_and_mismatched_quantization():
    m = resolve_model("meta-llama/Meta-Llama-3.1-8B")
    assert estimate_weight_bytes(m, scheme=weight_scheme(m, dtype="float32")) == 16_059_990_016 * 2
    s = weight_scheme(m, quantization="awq")
    assert s.method == "none" and "needs a checkpoint quantised with it" in s.notes[0]
    with pytest.raises(OptkgError, match="--dtype"):
        weight_scheme(m, dtype="int3")


def test_per_gpu_split_uses_the_scheme():
    m = resolve_model("meta-llama/Meta-Llama-3.1-70B")
    s = weight_scheme(m, quantization="fp8")
    assert weight_bytes_per_gpu(m, 4, 1, None, s) == 72_653_736_128 / 4


def test_online_fp8_shorthands_per_tensor_block_channel():
    """vLLM >= 0.20.0 online shorthands (config/quantization.py:195-209 at 0.33.0): fp8_per_tensor is what
    `--quantization fp8` on an unquantised checkpoint becomes (model_loader/weight_utils.py:355-362);
    fp8_per_block stores one fp32 scale per 128 x 128 tile; fp8_per_channel one per output row."""
    m = resolve_model("meta-llama/Meta-Llama-3.1-70B")
    assert estimate_weight_bytes(m, scheme=weight_scheme(m, quantization="fp8_per_tensor")) == 72_653_736_128
    # 68,451,041,280 x (1 + 4 / 16,384) + 2,101,346,304 x 2 = 68,467,752,960 + 4,202,692,608 (no per-tensor scales)
    s = weight_scheme(m, quantization="fp8_per_block")
    assert s.bytes_per_param["attention"] == 1.000244140625 and s.per_tensor_scale_bytes == 0.0
    assert estimate_weight_bytes(m, scheme=s) == 72_670_445_568
    # per channel: 1 + 4 / hidden_size 8,192 = 1.00048828125 per linear parameter
    c = weight_scheme(m, quantization="fp8_per_channel")
    assert c.bytes_per_param["dense_mlp"] == 1.00048828125
    assert estimate_weight_bytes(m, scheme=c) == 68_451_041_280 + 33_423_360 + 4_202_692_608


def test_online_fp8_is_per_tensor_so_block_rules_hold():
    """Tester finding 11: online `--quantization fp8` on Llama-3.1-70B was mapped to block FP8, leaving
    weight_block_size / moe_intermediate_size unknown; it is per-tensor FP8 (fp8-inference-kernels), so the
    block rules hold and the online-deprecation note fires on 0.33.0."""
    d = check_json("--vllm", "vllm serve meta-llama/Meta-Llama-3.1-70B -tp 4 --quantization fp8", "--gpu", "H100",
                   "--count", "4")
    techs = d["stack"]["techniques"]
    assert "fp8-inference-kernels" in techs and "fp8-block-quantization" not in techs
    missing = {n["rule_id"] for n in d["not_evaluable"]}
    assert not {r for r in missing if "fp8" in r}, missing
    assert "fp8-online-quantization-deprecated" in {f["rule_id"] for f in d["findings"]}
    assert d["derived"]["weight_bytes_total_estimate"] == 72_653_736_128


def test_shared_expert_rule_holds_for_moe_without_shared_experts():
    """fp8-block-shared-expert-misaligned was 'not evaluable' on Qwen3-235B-A22B (no shared expert)."""
    d = check_json("--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8 --quantization fp8_per_block", "--gpu", "H200",
                   "--count", "8")
    assert "fp8-block-shared-expert-misaligned" not in {n["rule_id"] for n in d["not_evaluable"]}
    assert "fp8-block-quantization" in d["stack"]["techniques"]
    # 1536 / 8 = 192, not a multiple of the shorthand's 128 x 128 block, before vLLM 0.29.0's refinement
    d = check_json("--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8 --quantization fp8_per_block", "--gpu", "H200",
                   "--count", "8", "--engine-version", "0.28.0")
    f = {x["rule_id"]: x for x in d["findings"]}["fp8-block-moe-misaligned"]
    assert f["numbers"]["moe_intermediate_size_per_rank"] == 192 and f["numbers"]["remainder"] == 64


def test_per_layer_ignore_entries_are_one_note_not_one_per_layer():
    # checkpoints list every layer's router in their ignore list (Qwen3-235B-A22B-NVFP4: 94 of them); each is left
    # at its quantised size and said once, with the count and the first and last entry
    cfg = json.loads((QC / "llama31-8b-w4a16-ct" / "config.json").read_text())
    from kg.inputs.modelcfg import parse_config
    cfg["quantization_config"]["ignore"] = ["lm_head"] + [f"model.layers.{i}.mlp.gate_proj" for i in range(32)]
    notes = [n for n in weight_scheme(parse_config(cfg, "ct-layers")).notes if "single layers" in n]
    assert notes == ["32 ignored modules name single layers (e.g. 'model.layers.0.mlp.gate_proj', "
                     "'model.layers.31.mlp.gate_proj'); their sizes are not counted at the model dtype"]
    cfg["quantization_config"]["ignore"] = ["lm_head", "model.layers.3.mlp.gate_proj"]
    notes = [n for n in weight_scheme(parse_config(cfg, "ct-layer")).notes if "single layers" in n]
    assert notes == ["ignored module 'model.layers.3.mlp.gate_proj' names single layers; its size is not counted "
                     "at the model dtype"]
