"""Weight memory of MoE checkpoints without moe_intermediate_size, MXFP4 experts and GPTQ int4.

Every number is worked by hand next to it from the bundled config.json files (catalog/models/) and the
formulas in kg/derive/weights.py."""
from __future__ import annotations

from cli_helpers import check_json, fired, model
from conftest import REPO

GPTQ_CASE = str(REPO / "tests" / "fixtures" / "field_cases" / "vllm-17604-gptq-moe-tp8-runtime.yaml")


def test_weights_of_moe_models_without_moe_intermediate_size():
    from kg.derive.kv import estimate_weight_bytes, weight_params
    # Mixtral-8x7B (h 4096, 32 layers, 32/8 heads of 128, 8 experts of intermediate_size 14,336, vocab 32,000):
    # attention 32 x (2 x 32x128x4096 + 2 x 8x128x4096) = 1,342,177,280; experts 32 x 8 x 3 x 4096 x 14,336 =
    # 45,097,156,608; router 32 x 4096 x 8 = 1,048,576; embeddings 2 x 4096 x 32,000 = 262,144,000
    p = weight_params(model("mistralai/Mixtral-8x7B-v0.1"))
    assert p == {"attention": 1_342_177_280, "dense_mlp": 0, "experts": 45_097_156_608, "shared_experts": 0,
                 "router": 1_048_576, "embedding": 262_144_000, "vision": 0}
    assert estimate_weight_bytes(model("mistralai/Mixtral-8x7B-v0.1")) == 46_702_526_464 * 2
    # Llama-4-Scout (h 5120, 48 layers, all MoE: 16 experts + 1 shared expert of intermediate_size 8192,
    # heads 40/8 of 128, vocab 202,048): attention 48 x 62,914,560 = 3,019,898,880; experts 48 x 16 x 3 x 5120 x
    # 8192 = 96,636,764,160; shared 48 x 3 x 5120 x 8192 = 6,039,797,760; router 48 x 5120 x 16 = 3,932,160;
    # embeddings 2 x 5120 x 202,048 = 2,068,971,520 -> 107,769,364,480 params (the text part of 109 B)
    p = weight_params(model("meta-llama/Llama-4-Scout-17B-16E-Instruct"))
    assert p["experts"] == 96_636_764_160 and p["shared_experts"] == 6_039_797_760
    assert sum(p.values()) == 107_769_364_480
    # Phi-mini-MoE (h 4096, 32 layers, 16 experts of 960, vocab 32,064): 1,342,177,280 + 6,039,797,760 +
    # 2,097,152 + 262,668,288 = 7,646,740,480 params x 2 B
    assert estimate_weight_bytes(model("microsoft/Phi-mini-MoE-instruct")) == 15_293_480_960
    # dense models are unchanged: Llama-3.1-8B 8,029,995,008 params x 2 B (rules/fixtures/fit-memory-first.yaml)
    assert estimate_weight_bytes(model("meta-llama/Llama-3.1-8B")) == 16_059_990_016


def test_mxfp4_experts_and_bf16_rest_for_gpt_oss():
    from kg.derive.kv import estimate_weight_bytes, weight_bytes_per_param, weight_params
    m = model("openai/gpt-oss-120b")
    assert weight_bytes_per_param(m) == {"linear": 2.0, "experts": 0.53125, "embedding": 2.0}  # 0.5 + 1/32
    # attention 36 x (64x64x2880 x 2 + 8x64x2880 x 2) = 955,514,880; experts 36 x 128 x 3 x 2880 x 2880 =
    # 114,661,785,600; router 36 x 2880 x 128 = 13,271,040; embeddings 2 x 2880 x 201,088 = 1,158,266,880
    assert sum(weight_params(m).values()) == 116_788_838_400
    # 114,661,785,600 x 0.53125 = 60,914,073,600 + (955,514,880 + 13,271,040 + 1,158,266,880) x 2 = 4,254,105,600
    assert estimate_weight_bytes(m) == 65_168_179_200


def test_gptq_checkpoint_is_estimated_at_4_bits_plus_group_scales():
    from kg.derive.kv import estimate_weight_bytes, weight_bytes_per_param
    from kg.inputs.modelcfg import load_config_file
    m = load_config_file(REPO / "tests/fixtures/field_cases/configs/qwen3-235b-a22b-gptq-int4.json")
    # 4 bits + (fp16 scale 2 B + 4-bit zero 0.5 B) per 128-row group: 0.5 + 2.5 / 128
    assert weight_bytes_per_param(m)["linear"] == 0.51953125
    p = estimate_weight_bytes(m, parts=True)
    # attention 94 x 71,303,168 = 6,702,497,792 x 0.51953125 = 3,482,157,056
    assert p["attention"] == 3_482_157_056
    # experts 94 x 128 x 3 x 4096 x 1536 = 227,096,395,776 x 0.51953125 = 117,983,674,368
    assert p["experts"] == 117_983_674_368
    assert p["total"] == 124_053_716_992


def test_gptq_field_case_now_has_kv_memory(catalog):
    # A800-40GB (no capture: vendor 40 GiB) x 0.85 = 36,507,222,016 B; weights 124,053,716,992 / 8 =
    # 15,506,714,624 B; issue 13 subtracts the rest of the breakdown (kg.derive.budget): activation = the
    # sampler's min(2,048, 256) = 256 requests x 151,936 x 28 B (the case's vLLM is before 0.18.0: sort path)
    # = 1,089,077,248 B, above the forward's 2,048 x (8 x (4,096 + 4,096) + 3 x 4,096) x 2 = 318,767,104 B;
    # no CUDA graphs (enforce_eager), non-torch 0.6 GiB = 644,245,094.4 B -> 19,267,185,049 B of KV;
    # 48,128 B/token x 16 -> 25,020 blocks = 400,320 tokens
    _, d = check_json(GPTQ_CASE)
    assert d["derived"]["weight_bytes_per_gpu_estimate"] == 15_506_714_624
    assert d["derived"]["kv_budget_bytes_per_gpu"] == 19_267_185_049
    assert d["derived"]["kv_tokens_per_gpu"] == 400_320
    assert "kv-budget-exhausted" not in fired(d) and "weights-do-not-fit" not in fired(d)


def test_mxfp4_engine_fact_is_half_a_byte(catalog):
    from kg.analyses.check import stack_facts
    from kg.engines.launch import parse_command
    _, ns = stack_facts(parse_command("vllm serve openai/gpt-oss-120b", catalog, "vllm"))
    # issue 13: one fact per report, the same bytes the weight estimate uses: 0.5 + one e8m0 scale per 32
    assert ns["weight_bytes_per_param"] == 0.53125
