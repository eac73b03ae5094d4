"""Configurations an engine refuses to start (weights that do not fit, a context above the model's limit,
more GPUs than the parallel layout has) are error findings, in check and in fit."""
from __future__ import annotations

import json

import pytest

from cli_helpers import EXAMPLE, check_json, fired, model
from conftest import REPO, run_cli

SMALL_AZURE = REPO / "rules" / "fixtures" / "traces" / "small_azure.csv"


def test_mixtral_on_one_h100_does_not_fit():
    code, d = check_json("--vllm", "vllm serve mistralai/Mixtral-8x7B-v0.1 --max-model-len 32768", "--gpu", "H100-SXM", "--count", "1",
                         "--engine-version", "0.33.0")
    assert code == 1
    f = fired(d)["weights-do-not-fit"]
    # 93,405,052,928 B = 86.99 GiB > 81,559 MiB x 0.92 (vLLM 0.33.0's default, issue 13) = 73.28 GiB;
    # ceil(93,405,052,928 / 78,679,145,185.28) = ceil(1.19) = 2
    assert f["severity"] == "error"
    assert f["numbers"] == {"weight_gib_per_gpu": 86.99, "usable_gib_per_gpu": 73.28, "weight_gib_total": 86.99,
                            "min_gpus_for_weights": 2, "weights_from": "estimate"}  # no checkpoint beside a bundled config


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


def test_weights_do_not_fit_qwen3_235b_tp1_h100():
    # weights 470,185,672,704 B = 437.89 GiB on one GPU (kg.derive.kv.weight_bytes_per_gpu, as kg.analyses.check);
    # H100-SXM 81,559 MiB x 0.92 = 73.28 GiB usable (issue 13: the budget check prints);
    # ceil(470,185,672,704 / 78,679,145,185.28) = ceil(5.98) = 6 GPUs
    code, out, _ = run_cli("fit", str(SMALL_AZURE), "--model", "Qwen/Qwen3-235B-A22B", "--tp", "1", "--gpu", "H100-SXM",
                           "--format", "json", "--fail-on", "error", "--engine-version", "0.33.0")
    assert code == 1
    rep = json.loads(out)
    fired = {r["id"]: r for r in rep["rules"] if r["fired"]}
    w = fired["fit-weights-do-not-fit"]
    assert w["severity"] == "error"
    assert w["numbers"] == {"weight_gib_per_gpu": 437.89, "usable_gib_per_gpu": 73.28, "weight_gib_total": 437.89,
                            "min_gpus_for_weights": 6}
    # the KV budget is 0, but no KV-compression advice: those rules need the kv_budget fact
    for rid in ("fit-memory-first", "fit-compact-kv-pattern", "fit-kv-head-sharing", "fit-long-requests-exceed-gpu"):
        assert rid not in fired
    assert rep["checklist"][3]["answer"] == ("weights 437.89 GiB per GPU exceed the 73.28 GiB the engine may use: "
                                             "no KV budget, fix the weights first")
