"""LMDeploy's --cache-max-entry-count is a fraction of the GPU memory free after the weights are loaded, not of the
total as vLLM's gpu_memory_utilization (kg.engines.lmdeploy.budget; lmdeploy 0.18.0 lmdeploy/messages.py:305-312,
lmdeploy/cli/utils.py:526-531, lmdeploy/pytorch/engine/executor/base.py:219-238, 401, 409-433).

Llama-3.1-70B (bf16) at TP 4 on an H100-SXM, worked by hand:
- device: catalog memory_visible_mib 81,559 MiB = 85,520,809,984 B;
- weights per GPU 35,276,193,792 B (kg.derive.weights: 70.55 B parameters x 2 B / 4);
- non-torch 3.58 GiB = 3,843,995,729.92 B (TP > 1 on a 70 GiB+ GPU, kg.derive.budget.non_torch_bytes);
- free after loading = 85,520,809,984 - 35,276,193,792 - 3,843,995,729.92 = 46,400,620,462.08 B;
- TurboMind (Llama's backend): 0.8 x 46,400,620,462.08 = 37,120,496,369.66 -> 37,120,496,369 B;
- PyTorch: less the runtime reserve (8,192 + 2 x 1,024 max_batches on an H100) x 128,256 x 2 B = 2,626,682,880 B:
  0.8 x 43,773,937,582.08 = 35,019,150,065.66 -> 35,019,150,065 B.
vLLM's formula gave ceil(85,520,809,984 x 0.8) - weights - sampler 1,024 x 128,256 x 14 B (1,838,678,016) - CUDA
graphs 268,435,456 - non-torch = 27,189,344,994 B: 26.8 % below LMDeploy's own figure.
"""
from __future__ import annotations

import json

from conftest import run_cli

L70 = "lmdeploy serve api_server meta-llama/Meta-Llama-3.1-70B --tp 4"


def _derived(cmd: str) -> dict:
    code, out, err = run_cli("check", "--cmd", cmd, "--gpu", "H100-SXM", "--count", "4", "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)["derived"]


def test_turbomind_cache_is_the_fraction_of_the_memory_free_after_the_weights():
    d = _derived(L70)
    assert d["kv_budget_bytes_per_gpu"] == 37_120_496_369
    lines = {x["name"]: x["bytes"] for x in d["kv_budget_breakdown"]}
    assert list(lines) == ["device memory", "weights", "non-torch", "held back"]
    assert lines["device memory"] == 85_520_809_984 and lines["weights"] == 35_276_193_792
    assert round(lines["held back"]) == round(0.2 * 46_400_620_462.08)
    assert "(1 - cache_max_entry_count 0.8) x 43.21 GiB free after loading" in d["kv_budget_breakdown"][-1]["basis"]
    assert d["kv_budget_utilization_source"].startswith("lmdeploy default cache_max_entry_count 0.8")
    # 81,920 B/token (80 layers x 2 KV heads per GPU x 128 x 2 x 2 B) x 64-token blocks = 5,242,880 B per block:
    # 37,120,496,369 // 5,242,880 = 7,080 blocks = 453,120 tokens; 7,080 / (131,072 / 64) = 3.46 requests
    assert (d["kv_num_blocks"], d["kv_tokens_per_gpu"], d["max_concurrency"]) == (7_080, 453_120, 3.46)
    assert d["kv_budget_bytes_per_gpu"] / 27_189_344_994 > 1.36  # vLLM's formula was 26.8 % low


def test_pytorch_backend_keeps_its_runtime_reserve_out_first():
    d = _derived(L70 + " --backend pytorch")
    assert d["kv_budget_bytes_per_gpu"] == 35_019_150_065
    reserve = next(x for x in d["kv_budget_breakdown"] if x["name"] == "runtime reserve")
    assert reserve["bytes"] == 2_626_682_880
    assert "(max_prefill_token_num 8,192 + 2 x max_batches 1,024) x vocab 128,256 x 2 B" in reserve["basis"]


def test_the_fraction_given_is_of_the_free_memory_and_the_weights_need_the_whole_device():
    # --cache-max-entry-count 0.5: 0.5 x 46,400,620,462.08 = 23,200,310,231.04 -> 23,200,310,231 B
    d = _derived(L70 + " --cache-max-entry-count 0.5")
    assert d["kv_budget_bytes_per_gpu"] == 23_200_310_231
    assert d["kv_budget_utilization_source"].startswith("given (--cache-max-entry-count)")
    # 35.28 GB of weights per GPU fit one H100 (85.52 GB): LMDeploy takes its fraction after loading, so the share
    # the weights must fit is the device, not 0.5 x the device (42.76 GB)
    code, out, _ = run_cli("check", "--cmd", L70 + " --cache-max-entry-count 0.5", "--gpu", "H100-SXM", "--count", "4",
                           "--format", "json")
    assert "weights-do-not-fit" not in {f["rule_id"] for f in json.loads(out)["findings"]}


def test_a_model_turbomind_does_not_run_gets_the_pytorch_engine():
    # Gemma2ForCausalLM is not in lmdeploy 0.18.0 turbomind/supported_models.py:7-35: the PyTorch engine, with its
    # runtime reserve (8,192 + 2 x 1,024) x 256,000 x 2 B = 5,242,880,000 B
    code, out, err = run_cli("check", "--cmd", "lmdeploy serve api_server google/gemma-2-9b-it", "--gpu", "H100-SXM",
                             "--format", "json")
    assert code in (0, 1), err
    lines = {x["name"]: x["bytes"] for x in json.loads(out)["derived"]["kv_budget_breakdown"]}
    assert lines["runtime reserve"] == 5_242_880_000


def test_turbomind_reads_one_or_more_as_a_block_count():
    # lmdeploy 0.10.0 messages.py:267 / 0.18.0 :429 assert only cache_max_entry_count > 0 for TurboMind, and
    # BlockManager.cc:34-39 (InternLM/lmdeploy@0bb835a) keeps block_count blocks when it is not below 1:
    # 2,000 blocks x 5,242,880 B (64 tokens x 81,920 B) = 10,485,760,000 B, exactly: the count is what is asked for
    d = _derived(L70 + " --cache-max-entry-count 2000")
    assert (d["kv_budget_bytes_per_gpu"], d["kv_budget_error_bytes"]) == (10_485_760_000, 0)
    # 2,000 x 64 = 128,000 tokens; 2,000 / (131,072 / 64 = 2,048 blocks per request) = 0.98 requests
    assert (d["kv_num_blocks"], d["kv_tokens_per_gpu"], d["max_concurrency"]) == (2_000, 128_000, 0.98)
    assert d["kv_budget_utilization_source"].startswith("given (--cache-max-entry-count): 2,000 KV blocks")
    held = d["kv_budget_breakdown"][-1]
    # 46,400,620,462.08 B free after loading - 10,485,760,000 B of cache
    assert (held["name"], round(held["bytes"])) == ("held back", 35_914_860_462)


def test_one_or_more_is_refused_where_the_release_or_the_engine_refuses_it():
    # the flag table accepts it (argparse type=float, lmdeploy 0.18.0 cli/utils.py:529-533): the refusal is the
    # release's and the engine's, each a rule: both engines before 0.10.0 (0.9.2 messages.py:263, :374), the PyTorch
    # engine always (0.18.0 :608)
    for cmd, version, rule in ((L70 + " --cache-max-entry-count 2000", "0.9.2",
                                "lmdeploy-cache-max-entry-count-not-below-one"),
                               (L70 + " --backend pytorch --cache-max-entry-count 2000", "0.18.0",
                                "lmdeploy-pytorch-cache-max-entry-count-not-below-one")):
        code, out, err = run_cli("check", "--cmd", cmd, "--engine-version", version, "--gpu", "H100-SXM", "--count",
                                 "4", "--format", "json")
        assert code == 1, err
        d = json.loads(out)
        assert rule in {f["rule_id"] for f in d["findings"]}
        # no cache, not 2,000 x the free memory (81,535 GiB before): the engine stops before sizing one
        assert (d["derived"]["kv_budget_bytes_per_gpu"], d["derived"]["kv_tokens_per_gpu"]) == (0, 0)
        assert d["derived"]["kv_budget_breakdown"][-1]["basis"].startswith("no cache: LMDeploy")
    code, out, err = run_cli("check", "--cmd", L70 + " --cache-max-entry-count 2000", "--engine-version", "0.18.0",
                             "--gpu", "H100-SXM", "--count", "4", "--format", "json")
    assert code == 0, err
