"""Fixes from the fresh-user tester report (P0-3, P1-4..P1-10, P2-11..P2-15, P3 KV/memory/explain items).

Every number is worked by hand in the comment next to it, from the bundled config.json files
(catalog/models/) and the formulas in kg/derive/kv.py.
"""
from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from kg.core.errors import OptkgError

EXAMPLE = str(REPO / "examples" / "qwen3-235b-tp8.yaml")
GPTQ_CASE = str(REPO / "tests" / "fixtures" / "field_cases" / "vllm-17604-gptq-moe-tp8-runtime.yaml")


def one_line_error(code: int, err: str) -> str:
    """The CLI's user-error contract: exit 2 and exactly one line ``optkg: error: ...``."""
    assert code == 2, err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("optkg: error: "), err
    return lines[0]


def check_json(*argv: str) -> tuple[int, dict]:
    code, out, err = run_cli("check", *argv, "--format", "json")
    assert code in (0, 1), err
    return code, json.loads(out)


def fired(d: dict) -> dict[str, dict]:
    return {f["rule_id"]: f for f in d["findings"]}


@pytest.fixture(scope="module")
def catalog():
    from kg.knowledge.catalog import load_catalog
    cat, problems = load_catalog()
    assert not problems
    return cat


def model(name: str):
    from kg.inputs.modelcfg import resolve_model
    return resolve_model(name)


# P0-3: huge parallel sizes -----------------------------------------------------------------------

def test_huge_tp_in_a_command_is_refused_at_once():
    # refused while parsing the flag (the message names its ceiling), before any loop over tp could run
    code, _, err = run_cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B --tensor-parallel-size 99999999999999999999")
    line = one_line_error(code, err)
    assert "--tensor-parallel-size: expected a value <= 65536" in line


def test_valid_dcp_sizes_walk_only_divisors():
    from kg.derive.kv import divisors, valid_dcp_sizes
    assert divisors(36) == [1, 2, 3, 4, 6, 9, 12, 18, 36]
    assert divisors(1) == [1] and divisors(0) == []
    # Qwen3-235B (64 query heads, 4 KV heads) at tp 65,536: dcp must divide 65,536, be <= 65,536 // 4 = 16,384
    # and divide 64 / 4 = 16 -> {1, 2, 4, 8, 16}; before the fix this looped 65,536 times per call
    assert valid_dcp_sizes(model("Qwen/Qwen3-235B-A22B"), 65_536) == [1, 2, 4, 8, 16]
    # MLA: every divisor of tp (D1 only): 2**40 has 41 divisors
    assert len(valid_dcp_sizes(model("deepseek-ai/DeepSeek-V3"), 2**40)) == 41
    # the work, counted (not timed): one trial division per i with i*i <= n, i.e. floor(sqrt(n)) of them
    from kg.core.intmath import _divisors

    class Counting(int):
        calls = 0

        def __mod__(self, other):
            Counting.calls += 1
            return int(self) % other
    for n, steps in ((65_536, 256), (2**40, 2**20)):
        Counting.calls = 0
        assert len(_divisors.__wrapped__(Counting(n))) == n.bit_length()  # 2**k has k + 1 divisors
        assert Counting.calls == steps


@pytest.mark.parametrize("argv, needle", [
    (["--tp", "10000000"], "--tp: 10000000 does not divide num_attention_heads 64 of Qwen/Qwen3-235B-A22B; "
                           "valid tp sizes: 1, 2, 4, 8, 16, 32, 64"),
    (["--tp", "3"], "--tp: 3 does not divide num_attention_heads 64"),
    (["--pp", "200"], "--pp: 200 pipeline stages for 94 layers of Qwen/Qwen3-235B-A22B; pp_size must be at most 94"),
])
def test_kv_refuses_parallel_sizes_no_engine_starts(argv, needle):
    code, _, err = run_cli("kv", "--model", "Qwen/Qwen3-235B-A22B", *argv)
    assert needle in one_line_error(code, err)


def test_kv_refuses_tp_that_kv_heads_cannot_follow():
    # Qwen2-7B: 28 query heads, 4 KV heads; tp 7 divides 28 but neither 7 | 4 nor 4 | 7
    code, _, err = run_cli("kv", "--config", str(REPO / "tests/fixtures/field_cases/configs/qwen2-7b.json"), "--tp", "7")
    assert "do not divide each other" in one_line_error(code, err)


def test_parallel_sizes_in_stack_files_are_capped(catalog):
    from kg.inputs.stack import stack_from_mapping
    with pytest.raises(OptkgError, match="expected a value <= 65536"):
        stack_from_mapping({"model": "Qwen/Qwen3-235B-A22B", "techniques": [{"tensor-parallelism": {"tp_size": 70000}}]}, catalog)
    with pytest.raises(OptkgError, match="expected a value <= 65536"):
        stack_from_mapping({"model": "Qwen/Qwen3-235B-A22B", "settings": {"dp_size": 70000}}, catalog)


# P1-4 / P1-5: weight estimates -------------------------------------------------------------------

def test_weights_of_moe_models_without_moe_intermediate_size():
    from kg.derive.kv import estimate_weight_bytes, weight_params
    # Mixtral-8x7B (h 4096, 32 layers, 32/8 heads of 128, 8 experts of intermediate_size 14,336, vocab 32,000):
    # attention 32 x (2 x 32x128x4096 + 2 x 8x128x4096) = 1,342,177,280; experts 32 x 8 x 3 x 4096 x 14,336 =
    # 45,097,156,608; router 32 x 4096 x 8 = 1,048,576; embeddings 2 x 4096 x 32,000 = 262,144,000
    p = weight_params(model("mistralai/Mixtral-8x7B-v0.1"))
    assert p == {"attention": 1_342_177_280, "dense_mlp": 0, "experts": 45_097_156_608, "shared_experts": 0,
                 "router": 1_048_576, "embedding": 262_144_000}
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
    from kg.inputs.launch import parse_command
    _, ns = stack_facts(parse_command("vllm serve openai/gpt-oss-120b", catalog, "vllm"))
    # issue 13: one fact per report, the same bytes the weight estimate uses: 0.5 + one e8m0 scale per 32
    assert ns["weight_bytes_per_param"] == 0.53125


# P1-6: startup failures --------------------------------------------------------------------------

def test_mixtral_on_one_h100_does_not_fit():
    code, d = check_json("--vllm", "vllm serve mistralai/Mixtral-8x7B-v0.1 --max-model-len 32768", "--gpu", "H100-SXM", "--count", "1")
    assert code == 1
    f = fired(d)["weights-do-not-fit"]
    # 93,405,052,928 B = 86.99 GiB > 81,559 MiB x 0.92 (vLLM 0.33.0's default, issue 13) = 73.28 GiB;
    # ceil(93,405,052,928 / 78,679,145,185.28) = ceil(1.19) = 2
    assert f["severity"] == "error"
    assert f["numbers"] == {"weight_gib_per_gpu": 86.99, "usable_gib_per_gpu": 73.28, "weight_gib_total": 86.99,
                            "min_gpus_for_weights": 2}


@pytest.mark.parametrize("argv, rule", [
    (["--gpu", "H100-SXM", "--count", "8", "--vllm", "vllm serve moonshotai/Kimi-K2-Instruct -tp 8 -dcp 8"], "weights-do-not-fit"),
    (["--gpu", "L40S", "--count", "1", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B"], "weights-do-not-fit"),
    ([EXAMPLE, "--max-model-len", "99999999999"], "max-model-len-exceeds-max-position-embeddings"),
    ([EXAMPLE, "--max-model-len", "99999999999"], "max-model-len-exceeds-kv-capacity"),
    (["--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 8 --context-length 65536"],
     "max-model-len-exceeds-max-position-embeddings"),
    (["--gpu", "H100-SXM", "--count", "4", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8"], "parallel-size-exceeds-gpu-count"),
    (["--gpu", "H100-SXM", "--count", "8", "--vllm", "vllm serve meta-llama/Llama-3.1-405B -tp 8 -pp 2"],
     "parallel-size-exceeds-gpu-count"),
    # SGLang --dp without DP attention runs dp copies of the TP group: 8 x 2 = 16 GPUs
    (["--gpu", "H100-SXM", "--count", "8", "--sglang",
      "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 8 --dp 2"], "parallel-size-exceeds-gpu-count"),
])
def test_startup_failures_are_errors(argv, rule):
    code, d = check_json(*argv)
    assert code == 1 and fired(d)[rule]["severity"] == "error"


def test_context_limit_numbers_and_engine_fix():
    _, d = check_json(EXAMPLE, "--max-model-len", "99999999999")
    f = fired(d)["max-model-len-exceeds-max-position-embeddings"]
    assert f["numbers"] == {"max_model_len": 99_999_999_999, "max_model_len_limit": 40_960}
    assert f["fix"].startswith("--max-model-len 40960 or less")
    _, d = check_json("--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --context-length 65536")
    assert fired(d)["max-model-len-exceeds-max-position-embeddings"]["fix"].startswith("--context-length 40960 or less")
    # SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 lets SGLang start
    _, d = check_json("--sglang", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 python -m sglang.launch_server "
                                  "--model-path Qwen/Qwen3-235B-A22B --context-length 65536")
    assert "max-model-len-exceeds-max-position-embeddings" not in fired(d)


def test_sglang_dp_attention_fits_the_tp_group():
    _, d = check_json("--gpu", "H100-SXM", "--count", "8", "--sglang",
                      "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 8 --dp 2 --enable-dp-attention")
    assert "parallel-size-exceeds-gpu-count" not in fired(d)


def test_derived_context_limits_follow_the_engines():
    from kg.inputs.modelcfg import sglang_context_length, vllm_max_model_len
    assert model("deepseek-ai/DeepSeek-V3").derived_max_model_len == 163_840   # YaRN: max_position_embeddings as is
    assert model("openai/gpt-oss-120b").derived_max_model_len == 131_072      # YaRN: max_position_embeddings as is
    assert model("meta-llama/Llama-3.1-8B").derived_max_model_len == 131_072  # llama3 scaling: not multiplied
    assert model("Qwen/Qwen3-235B-A22B").derived_max_model_len == 40_960
    # linear scaling multiplies max_position_embeddings in both engines: 32,768 x 4
    lin = {"max_position_embeddings": 32768, "rope_scaling": {"type": "linear", "factor": 4}}
    assert vllm_max_model_len(lin) == 131_072 and sglang_context_length(lin) == 131_072
    # YaRN: vLLM 0.33.0 leaves max_position_embeddings as it is ("YaRN variants leave max_position_embeddings
    # already scaled", config/model.py:2610-2621; issue 13 moved optkg to that release); SGLang keeps it too
    yarn = {"max_position_embeddings": 2048, "rope_scaling": {"rope_type": "yarn", "factor": 4,
                                                              "original_max_position_embeddings": 4096}}
    assert vllm_max_model_len(yarn) == 2048 and sglang_context_length(yarn) == 2048
    assert vllm_max_model_len({}) is None


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


# P1-8: SGLang advice ------------------------------------------------------------------------------

def test_kv_head_replication_fix_follows_the_engine():
    _, d = check_json("--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 8")
    f = fired(d)["kv-head-replication"]
    # attention TP 8 / dp 2 = 4 = num_key_value_heads: one KV head per rank
    # SGLang >= 0.5.22 spells DP attention --attn-dp-size; since 0.5.15 it has --dcp-size (not vLLM's -dcp)
    assert "--attn-dp-size 2" in f["fix"] and "--enable-dp-attention --dp 2" in f["fix"]
    assert "vLLM -dcp" not in f["fix"] and "--dcp-size" in f["fix"]
    # SGLang 0.5.23's own DCP sizes (changed on purpose, tester finding: the numbers said {1} while the fix named
    # --dcp-size): 4 KV heads over tp 8 -> dcp 1 or 2 (kg.derive.kv.valid_dcp_sizes_sglang)
    assert f["numbers"]["suggested_dcp_sizes"] == [1, 2]
    assert d["derived"]["valid_dcp_sizes"] == [1, 2] and d["derived"]["dcp_possible"] is True
    code, out, _ = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 8")
    assert "valid DCP sizes                            {1, 2}" in out
    # before SGLang had --dcp-size (0.5.15) no DCP size is offered
    _, d = check_json("--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 8", "--engine-version", "0.5.14")
    assert fired(d)["kv-head-replication"]["numbers"]["suggested_dcp_sizes"] == [1] and "valid_dcp_sizes" not in d["derived"]
    _, d = check_json("--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8")
    assert "(vLLM -dcp 2)" in fired(d)["kv-head-replication"]["fix"]
    assert fired(d)["kv-head-replication"]["numbers"]["suggested_dcp_sizes"] == [1, 2]
    _, d = check_json("--sglang", "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8")
    assert "--enable-dp-attention --dp 8" in fired(d)["mla-kv-duplication"]["fix"]


def test_engine_specific_fix_is_data():
    from kg.engine.rules import load_ruleset
    r = load_ruleset("check").by_id("kv-head-replication")
    # trtllm since 780a751 (attention DP in the LLM-API YAML)
    assert set(r.fix_by_engine) == {"vllm", "sglang", "trtllm"} and "{max_useful_dcp_size}" in r.fix_by_engine["vllm"]
    assert isinstance(r.fix, str) and "SGLang --attn-dp-size" in r.fix  # the default names both


# P1-10: command parsing ---------------------------------------------------------------------------

def parse(catalog, cmd: str, engine: str = "vllm"):
    from kg.inputs.launch import parse_command
    return parse_command(cmd, catalog, engine)


def test_flag_equals_false_turns_the_flag_off(catalog):
    st = parse(catalog, "vllm serve meta-llama/Llama-3.1-8B --enable-expert-parallel=false")
    assert "expert-parallelism" not in st.techniques and st.settings["enable_expert_parallel"] is False
    assert "prefix-caching" not in parse(catalog, "vllm serve meta-llama/Llama-3.1-8B --enable-prefix-caching=false").techniques
    assert "cuda-graphs" in parse(catalog, "vllm serve meta-llama/Llama-3.1-8B --enforce-eager=false").techniques
    assert "cuda-graphs" not in parse(catalog, "vllm serve meta-llama/Llama-3.1-8B --enforce-eager").techniques
    _, d = check_json("--vllm", "vllm serve meta-llama/Llama-3.1-8B --enable-expert-parallel=false")
    assert "ep-without-experts" not in fired(d)


def test_launchers_and_environment(catalog):
    st = parse(catalog, "env VLLM_USE_V1=1 vllm serve meta-llama/Llama-3.1-8B")
    assert st.model.name == "meta-llama/Meta-Llama-3.1-8B" and st.settings["vllm_use_v1"] == 1
    st = parse(catalog, "uv run vllm serve meta-llama/Llama-3.1-8B")
    assert st.model.name == "meta-llama/Meta-Llama-3.1-8B" and st.notes == []
    st = parse(catalog, "CUDA_VISIBLE_DEVICES=0,1,2,3 FOO=1 uv run python3.11 -m vllm.entrypoints.openai.api_server "
                        "--model meta-llama/Llama-3.1-8B")
    assert st.gpu_count == 4 and st.ignored == ["FOO=1"]
    st = parse(catalog, "mywrapper --x vllm serve meta-llama/Llama-3.1-8B")
    assert st.notes == ["--vllm: skipped the words before the vllm program: mywrapper --x"]


def test_value_less_flags_keep_the_model(catalog):
    st = parse(catalog, "vllm serve --trust-remote-code meta-llama/Llama-3.1-8B")
    assert st.model.name == "meta-llama/Meta-Llama-3.1-8B" and st.ignored == ["--trust-remote-code"]
    st = parse(catalog, "vllm serve --no-something meta-llama/Llama-3.1-8B")
    assert st.model.name == "meta-llama/Meta-Llama-3.1-8B" and st.ignored == ["--no-something"]
    st = parse(catalog, "python -m sglang.launch_server --trust-remote-code --model-path Qwen/Qwen3-32B --tp 2", "sglang")
    assert st.model.name == "Qwen/Qwen3-32B" and st.settings["tp_size"] == 2


def test_kv_cache_dtype_values_per_engine(catalog):
    with pytest.raises(OptkgError, match=r"'banana' is not a vllm kv_cache_dtype.*valid: auto, float16"):
        parse(catalog, "vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype banana")
    # fp8_ds_mla is vLLM's packed MLA layout, not an SGLang choice (nvfp4 is one since SGLang 0.5.16: issue 14 item 15)
    with pytest.raises(OptkgError, match=r"'fp8_ds_mla' is not a sglang kv_cache_dtype"):
        parse(catalog, "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --kv-cache-dtype fp8_ds_mla", "sglang")
    assert "kv-cache-quantization" in parse(
        catalog, "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --kv-cache-dtype nvfp4", "sglang").techniques
    # nvfp4: 4-bit values + a 1-byte scale per 16 = 0.5625 B; 32 layers x 8 heads x 256 x 0.5625 = 36,864 B/token
    _, d = check_json("--vllm", "vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype nvfp4")
    assert d["derived"]["kv_bytes_per_token_per_gpu"] == 36_864
    # a bf16 cache is not KV quantisation
    assert "kv-cache-quantization" not in parse(catalog, "vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype bfloat16").techniques


def test_unsized_but_valid_kv_dtype_is_a_note_not_bf16(catalog):
    _, d = check_json("--vllm", "vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype turboquant_k8v4")
    assert "kv_bytes_per_token_per_gpu" not in d["derived"]
    assert any("does not model its cache size" in n for n in d["notes"])


def test_stack_file_kv_dtype(catalog):
    from kg.inputs.stack import stack_from_mapping
    with pytest.raises(OptkgError, match="'banana' is not a kv_cache_dtype"):
        stack_from_mapping({"model": "meta-llama/Llama-3.1-8B", "settings": {"kv_cache_dtype": "banana"}}, catalog)
    st = stack_from_mapping({"model": "meta-llama/Llama-3.1-8B", "engine": "vllm",
                             "techniques": [{"kv-cache-quantization": {"kv_cache_dtype": "int8"}}]}, catalog)
    assert any("'int8' is not a vllm kv_cache_dtype" in n for n in st.notes)


# P2-11 / P2-12: bad numbers and outputs ----------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["kv", "--model", "Qwen/Qwen3-235B-A22B", "--kv-budget-gib", "nan"],
    ["kv", "--model", "Qwen/Qwen3-235B-A22B", "--kv-budget-gib", "inf"],
    ["check", EXAMPLE, "--kv-budget-gib", "1e400"],
    ["fit", str(REPO / "README.md"), "--model", "meta-llama/Llama-3.1-8B", "--kv-budget-gib", "inf"],
])
def test_non_finite_numbers_are_usage_errors(argv):
    code, _, err = run_cli(*argv)
    assert "expected a finite number" in one_line_error(code, err)


def test_non_finite_setting_in_a_stack_file(catalog):
    from kg.inputs.stack import stack_from_mapping
    with pytest.raises(OptkgError, match="expected a finite number"):
        stack_from_mapping({"model": "meta-llama/Llama-3.1-8B", "settings": {"kv_budget_gib": float("inf")}}, catalog)


@pytest.mark.parametrize("target", ["/sys/optkg-x", "/proc/optkg-x"])
def test_unwritable_output_is_a_user_error(target):
    code, _, err = run_cli("check", EXAMPLE, "-o", target)
    assert f"{target}: cannot write" in one_line_error(code, err)
    code, _, err = run_cli("new", "zz-never", "-o", os.path.dirname(target))
    assert "cannot write" in one_line_error(code, err)


def test_force_never_replaces_a_device_or_an_input(tmp_path):
    code, _, err = run_cli("check", EXAMPLE, "-o", "/dev/full", "--force")
    assert "not a regular file" in one_line_error(code, err)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    stack = tmp_path / "s.yaml"
    stack.write_text(Path(EXAMPLE).read_text())
    before = stack.read_bytes()
    code, _, err = run_cli("check", str(stack), "-o", str(stack), "--force")
    assert "is an input of this command" in one_line_error(code, err)
    assert stack.read_bytes() == before
    # the same file through another spelling (.. and a symlink) is still the input
    link = tmp_path / "link.yaml"
    link.symlink_to(stack)
    code, _, err = run_cli("check", str(stack), "-o", str(tmp_path / "sub" / ".." / "link.yaml"), "--force")
    assert code == 2 and stack.read_bytes() == before
    base = tmp_path / "base.json"
    base.write_text('{"schema_version": "1.0", "fingerprints": []}\n')
    code, _, err = run_cli("check", str(stack), "--baseline", str(base), "--write-baseline", str(base), "--force")
    assert "is an input" in one_line_error(code, err)


def test_atomic_write_edges(tmp_path):
    from kg.core.yamlio import atomic_write
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OptkgError, match="not a regular file"):
        atomic_write(fifo, "x", force=True)
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with pytest.raises(OptkgError, match="symbolic link"):  # never written through (second tester, item 22)
        atomic_write(link, "new", force=True)
    assert link.is_symlink() and real.read_text() == "old"
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if not os.access(ro, os.W_OK):  # root may write anyway
            with pytest.raises(OptkgError, match="cannot write"):
                atomic_write(ro / "x.txt", "x")
    finally:
        ro.chmod(0o700)


# P2-13: argparse errors ---------------------------------------------------------------------------

@pytest.mark.parametrize("argv, cmd", [
    (["kv", "--tp", "eight", "--model", "Qwen/Qwen3-32B"], "kv"),
    (["check", EXAMPLE, "--count", "eight"], "check"),
    (["fit", "x.jsonl", "--model", "m", "--causal", "maybe"], "fit"),
    (["diagnose", "x.prom", "--target-throughput", "abc"], "diagnose"),
    (["place", "x.yaml", "--fail-on", "bogus"], "place"),
])
def test_usage_errors_are_one_line(argv, cmd):
    code, out, err = run_cli(*argv)
    line = one_line_error(code, err)
    assert line.endswith(f"(see 'optkg {cmd} --help')") and "usage:" not in err and out == ""


# P2-14: silently accepted input -------------------------------------------------------------------

def test_unknown_engine_and_bad_versions(catalog, tmp_path):
    from kg.inputs.stack import stack_from_mapping
    with pytest.raises(OptkgError, match=r"unknown engine 'tensorrt'; did you mean 'trtllm'\? \(known: lmdeploy, sglang, trtllm, vllm"):
        stack_from_mapping({"model": "meta-llama/Llama-3.1-8B", "engine": {"name": "tensorrt"}}, catalog)
    assert stack_from_mapping({"model": "meta-llama/Llama-3.1-8B", "engine": "TensorRT-LLM"}, catalog).engine == "trtllm"
    with pytest.raises(OptkgError, match="expected an engine version number such as 0.11.0, found 'abc'"):
        stack_from_mapping({"model": "meta-llama/Llama-3.1-8B", "engine": {"name": "vllm", "version": "abc"}}, catalog)
    code, _, err = run_cli("check", EXAMPLE, "--engine-version", "banana")
    assert "--engine-version: expected an engine version number" in one_line_error(code, err)


def test_select_that_matches_nothing_is_an_error():
    code, _, err = run_cli("check", EXAMPLE, "--select", "nonsense-rule")
    assert "--select: 'nonsense-rule' matches no rule id, tag, severity or check code" in one_line_error(code, err)
    code, _, err = run_cli("check", EXAMPLE, "--ignore", "kv-head-replicaton")
    assert "did you mean kv-head-replication" in one_line_error(code, err)
    from kg.output.filtering import check_terms
    check_terms(["kv-cache,error", "placement", "schema-enum", "place-new-direction"], ["warning"])  # all known


def test_duplicates_and_zero_length_in_stack_files(catalog, tmp_path):
    from kg.inputs.stack import load_stack_file, stack_from_mapping
    with pytest.raises(OptkgError, match=r":5: technique 'tensor-parallelism' is listed twice \(first at .*:4\)"):
        f = tmp_path / "twice.yaml"
        f.write_text("model: Qwen/Qwen3-235B-A22B\nengine: vllm\ntechniques:\n  - tensor-parallelism: {tp_size: 8}\n"
                     "  - tensor-parallelism: {tp_size: 4}\n")
        load_stack_file(f, catalog)
    f = tmp_path / "dup.yaml"
    f.write_text("model: Qwen/Qwen3-235B-A22B\nengine: vllm\nmodel: meta-llama/Llama-3.1-8B\n")
    with pytest.raises(OptkgError, match=r"dup.yaml:3: 'model' is given twice \(first on line 1\)"):
        load_stack_file(f, catalog)
    with pytest.raises(OptkgError, match="max_model_len: expected a value >= 1, found 0"):
        stack_from_mapping({"model": "Qwen/Qwen3-235B-A22B", "settings": {"max_model_len": 0}}, catalog)


def test_unknown_torch_dtype_is_refused():
    from kg.inputs.modelcfg import parse_config
    with pytest.raises(OptkgError, match=r"cfg.json: torch_dtype 'weird' is not a dtype optkg knows"):
        parse_config({"num_attention_heads": 8, "num_hidden_layers": 2, "hidden_size": 512, "torch_dtype": "weird"}, "cfg.json")


# P2-15: wording -----------------------------------------------------------------------------------

def test_new_outside_the_catalog_suggests_place_then_move(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "new").mkdir()
    code, out, err = run_cli("new", "zz-outside", "-o", "new")
    assert code == 0, err
    assert "`optkg place new/zz-outside.yaml`" in out and "then move it to" in out
    assert "optkg validate new/zz-outside.yaml" not in out
    text = (tmp_path / "new" / "zz-outside.yaml").read_text()
    assert "(after moving it there)" in text


def test_binary_catalog_file_hint(tmp_path):
    import shutil
    cat = tmp_path / "cat"
    shutil.copytree(REPO / "catalog", cat)
    (cat / "techniques" / "zz-bin.yaml").write_bytes(bytes([0x8E, 0xFF, 0x00, 0x10]) * 20)
    code, out, err = run_cli("validate", "--catalog", str(cat))
    assert code != 0 and "not a UTF-8 text file (binary?)" in out and "check indentation" not in out


def test_place_on_a_folder():
    code, _, err = run_cli("place", "/tmp")
    assert "/tmp: is a folder; place takes one technique file" in one_line_error(code, err)


def test_big_but_honest_yaml_is_not_an_alias_bomb():
    from kg.core.yamlio import MAX_NODES, parse_yaml
    with pytest.raises(OptkgError) as e:
        parse_yaml("- 1\n" * (MAX_NODES + 1), "big.yaml")
    assert "has more than 200000 nodes" in str(e.value) and "alias" not in str(e.value)


# P3: MLA, fp8_ds_mla, visible memory, estimate label, explain conditions ---------------------------

def test_kv_text_for_mla_shows_the_latent():
    code, out, err = run_cli("kv", "--model", "deepseek-ai/DeepSeek-V3", "--tp", "8")
    assert code == 0, err
    assert ("MLA, 128 query heads sharing one latent of kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements"
            in out)
    assert "KV heads" not in out.splitlines()[0] and "head_dim 56" not in out


def test_fp8_ds_mla_is_656_bytes_per_token_per_layer():
    from kg.derive.kv import kv_layout
    # 512 fp8 latent + 4 fp32 scales (16 B) + 64 bf16 RoPE values (128 B) = 656 B; 61 layers -> 40,016 B/token
    lay = kv_layout(model("deepseek-ai/DeepSeek-V3"), 8, 1, 1, "fp8_ds_mla")
    assert lay.bytes_per_token_layer_per_rank == 656 and lay.bytes_per_token_per_gpu == 40_016
    with pytest.raises(OptkgError, match="packed MLA cache layout"):
        kv_layout(model("meta-llama/Llama-3.1-8B"), 1, 1, 1, "fp8_ds_mla")


def test_gpu_memory_uses_the_visible_capture(catalog):
    from kg.derive.kv import gpu_memory_bytes
    assert gpu_memory_bytes(catalog.resolve_hardware("H100-SXM")) == 81_559 * 2**20  # 85,520,809,984
    assert gpu_memory_bytes(catalog.resolve_hardware("L40S")) == 46_068 * 2**20      # 48,305,405,952
    assert gpu_memory_bytes(catalog.resolve_hardware("H200")) == 141 * 2**30         # no capture: vendor figure


def test_check_labels_the_kv_budget():
    # issue 13: the breakdown of kg.derive.budget. H200 (no capture) ceil(141 GiB x 0.9) = 136,257,837,466 B
    # - 470,185,672,704 / 8 = 58,773,209,088 B weights - activation: the sampler's 1,024 requests x 151,936 x 14 B
    # = 2,178,154,496 B (above the forward's 8,192 x (8 x (4,096 + 4,096) + 3 x 4,096) x 2 = 1,275,068,416 B)
    # - CUDA graphs 0.25 GiB - non-torch 3.58 GiB (TP > 1 on a 70 GiB+ GPU) = 71,194,042,696 B = 66.30 GiB.
    # Error bar (kg.derive.budget, the text sweep and fit print too): activation 0.15 x 2.03 + 0.25 = 0.554 GiB
    # + graphs 0.25 + non-torch 1.0 = 1.80 GiB
    code, out, _ = run_cli("check", EXAMPLE)
    assert "KV budget per GPU (estimate)               ~66.3 GiB (+-1.80 GiB)" in out
    assert "- activation peak                        2.03 GiB" in out
    code, out, _ = run_cli("check", EXAMPLE, "--kv-budget-gib", "40")
    assert "KV budget per GPU (given)                  40.00 GiB" in out


def test_explain_single_technique_shows_conditions():
    code, out, _ = run_cli("explain", "kv-cache-quantization")
    assert code == 0
    assert "conflicts_with (when kv_cache_dtype in ('fp8', 'fp8_e4m3', 'fp8_e5m2'); engines: trtllm): Prefix caching" in out
