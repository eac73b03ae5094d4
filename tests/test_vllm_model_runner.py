"""vLLM's V2 model runner per release and the batches it keeps in flight under pipeline parallelism, which set
how many blocks a sliding-window group holds per request. Every value is worked from the vLLM release source
cited beside it."""
from __future__ import annotations

import json

import pytest

from conftest import REPO, run_cli
from kg.engines.vllm.kv_plan import batches_in_flight, plan_kv_cache
from kg.inputs.modelcfg import resolve_model
from kg.engines.vllm.runner import model_uses_v2_runner, uses_v2_model_runner

MISTRAL = REPO / "tests/fixtures/field_cases/configs/mistral-7b-v0.1.json"


@pytest.mark.parametrize("version, arch, moe, expected", [
    ("0.21.0", "Qwen3ForCausalLM", False, False),     # envs.py:251 VLLM_USE_V2_MODEL_RUNNER: bool = False
    ("0.22.0", "Qwen3ForCausalLM", False, True),      # 0.22.0 config/vllm.py:69 {"Qwen3ForCausalLM"}
    ("0.22.0", "MistralForCausalLM", False, False),
    ("0.23.0", "MistralForCausalLM", False, True),    # Llama / Mistral join the set
    ("0.24.0", "GptOssForCausalLM", True, False),
    ("0.26.0", "MistralForCausalLM", False, True),    # any dense non-hybrid model
    ("0.28.0", "GptOssForCausalLM", True, False),     # a MoE not in the set stays on V1
    ("0.29.0", "GptOssForCausalLM", True, True),      # V2 for every model from 0.29.0
    ("0.33.0", "GptOssForCausalLM", True, True),      # 0.33.0 config/vllm.py:748-767
])
def test_v2_model_runner_default_per_release(version, arch, moe, expected):
    assert uses_v2_model_runner(version, arch, is_moe=moe)[0] is expected


def test_v2_runner_falls_back_for_unsupported_speculative_methods():
    assert uses_v2_model_runner("0.33.0", "LlamaForCausalLM", speculative_method="suffix")[0] is False  # :3066-3068
    assert uses_v2_model_runner("0.33.0", "LlamaForCausalLM", speculative_method="ngram")[0] is True
    assert uses_v2_model_runner("0.31.0", "LlamaForCausalLM", speculative_method="ngram")[0] is False
    assert uses_v2_model_runner("0.23.0", "LlamaForCausalLM", speculative_method="eagle3", pp_size=2)[0] is False
    assert uses_v2_model_runner("0.33.0", "LlamaForCausalLM", env=False)[0] is False


def test_batches_in_flight_v2_is_pp_plus_one():
    # 0.33.0 config/vllm.py:592-599: async -> pp + 1 on V2; V1: 2 at PP 1, else pp
    assert batches_in_flight(2, True, "0.33.0", v2_runner=True) == 3
    assert batches_in_flight(1, True, "0.33.0", v2_runner=True) == 2
    assert batches_in_flight(2, True, "0.33.0", v2_runner=False) == 2
    assert batches_in_flight(2, True, "0.25.0", v2_runner=True) == 1   # one batch before 0.26.0


def test_mistral_pp2_uses_three_batches_at_0_33_0():
    # window 4,096; 3 x 8,192 = 24,576 in flight: cdiv(min(4,095 + 24,576, 32,768), 16) + 1 = 1,792 + 1 = 1,793
    # 16 layers per stage x 16 tokens x 8 heads x 128 x 2 (K, V) x 2 B = 1 MiB per block: 30 GiB = 30,720 blocks;
    # 30,720 / 1,793 = 17.13x; int(30,720 / 1,793 x 32,768) = 561,423 tokens
    code, out, err = run_cli("kv", "--config", str(MISTRAL), "--pp", "2", "--kv-budget-gib", "30",
                             "--max-model-len", "32768", "--format", "json", "--engine-version", "0.33.0")
    assert code == 0, err
    d = json.loads(out)
    c = d["capacity"]
    assert (c["blocks_per_request"], c["max_concurrency"], c["gpu_kv_cache_size_tokens"]) == (1793, 17.13, 561_423)
    assert d["vllm_plan"]["model_runner"] == "V2" and d["vllm_plan"]["max_in_flight_tokens"] == 24_576
    code, out, err = run_cli("check", "--vllm", "vllm serve mistralai/Mistral-7B-v0.1 --max-model-len 32768 -pp 2",
                             "--config", str(MISTRAL), "--kv-budget-gib", "30", "--gpu", "H100-SXM", "--count", "2",
                             "--format", "json", "--engine-version", "0.33.0")
    assert code in (0, 1), err
    j = json.loads(out)
    assert (j["derived"]["kv_blocks_per_request"], j["derived"]["max_concurrency"]) == (1793, 17.13)
    asy = [e for e in j["effective_config"] if e["setting"] == "async_scheduling"]
    assert asy and asy[0]["value"] is True and asy[0]["releases"] == ">=0.22.0,<0.34.0"


def test_mistral_pp2_on_0_22_0_stays_on_v1_without_async():
    code, out, err = run_cli("check", "--vllm", "vllm serve mistralai/Mistral-7B-v0.1 --max-model-len 32768 -pp 2",
                             "--config", str(MISTRAL), "--kv-budget-gib", "30", "--gpu", "H100-SXM", "--count", "2",
                             "--engine-version", "0.22.0", "--format", "json")
    assert code in (0, 1), err
    assert not [e for e in json.loads(out)["effective_config"] if e["setting"] == "async_scheduling"]


def test_gpt_oss_pp2_v2_at_0_33_0_v1_at_0_28_0():
    m = resolve_model("openai/gpt-oss-120b")
    # 0.33.0: V2, 24,576 in flight: sliding cdiv(min(127 + 24,576, 131,072), 16) + 1 = 1,545, full 8,192 -> 9,737
    p = plan_kv_cache(m, pp_size=2, max_model_len=131072, engine_version="0.33.0")
    assert (p.model_runner, p.blocks_per_request) == ("V2", 9737)
    assert p.capacity(10 * 2**30)["max_concurrency"] == 3.74
    # 0.28.0: GptOssForCausalLM is a MoE not in DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES -> V1, 2 x 8,192 in flight
    p = plan_kv_cache(m, pp_size=2, max_model_len=131072, engine_version="0.28.0")
    assert (p.model_runner, p.blocks_per_request) == ("V1", 9225)
    assert model_uses_v2_runner(m, "0.28.0")[0] is False
