"""The KV budget breakdown (kg.derive.budget, each engine's kg.engines.<engine>.budget; issue 13 priority 3)."""
from __future__ import annotations

import json
import math

from conftest import run_cli
from kg.derive.budget import forward_peak_bytes, release_default, resolve_utilization
from kg.engines.budget import serving_budget
from kg.engines.vllm.budget import activation_peak_bytes
from kg.inputs.modelcfg import resolve_model

GIB = 2**30
H100 = 81559 * 2**20  # memory_visible_mib of catalog/hardware/H100-SXM.yaml = 79.65 GiB


def test_activation_calibration_points_vllm_10517():
    m = resolve_model("meta-llama/Meta-Llama-3.1-8B")
    # per token (3 x 14,336 + 3 x 4,096) x 2 B = 110,592 B; logged peak_torch - weights 2.99 / 2.07 GiB
    assert activation_peak_bytes(m, 1, 29000, 256) == 29000 * 110_592
    assert activation_peak_bytes(m, 1, 20000, 256) == 20000 * 110_592
    assert abs(29000 * 110_592 / GIB / 2.99 - 1) < 0.015 and abs(20000 * 110_592 / GIB / 2.07 - 1) < 0.01
    # a tiny profile run is bounded by the sampler, over min(16 tokens, 1,024 seqs) = 16 requests
    # (vllm 0.33.0 gpu_model_runner.py:5545) x 128,256 x 14 B (bf16 logits + fp32 copy + probs + noise)
    assert activation_peak_bytes(m, 1, 16, 1024) == 16 * 128_256 * 14 == 28_729_344


def test_moe_activation_uses_the_fused_moe_workspaces():
    m = resolve_model("Qwen/Qwen3-235B-A22B")
    # TP 4: expert ffn 1,536 / 4 = 384; 8 x (max(384, 4096) + max(768, 4096)) + 3 x 4096 = 77,824 x 2 B per token
    assert forward_peak_bytes(m, 4, 8192) == 8192 * 77_824 * 2 == 1_275_068_416
    # the sampler is larger: 1,024 requests x 151,936 x 14 B = 2,178,154,496 B (vLLM >= 0.18.0);
    # 28 B on the sort path before 0.18.0
    assert activation_peak_bytes(m, 4, 8192, 1024) == 1024 * 151_936 * 14 == 2_178_154_496
    assert activation_peak_bytes(m, 4, 8192, 1024, engine_version="0.10.0") == 1024 * 151_936 * 28


def test_release_defaults_of_gpu_memory_utilization():
    # one source of truth: catalog/engines/releases/vllm.yaml (the effective configuration's table):
    # 0.9 before 0.20.0 (arg_utils.py:48 at 0.5.1), 0.92 from 0.20.0 (config/cache.py:66 at 0.20.0)
    assert release_default("vllm", "gpu_memory_utilization", "0.12.0")[0] == 0.9
    assert release_default("vllm", "gpu_memory_utilization", "0.19.0")[0] == 0.9
    assert release_default("vllm", "gpu_memory_utilization", "0.20.0")[0] == 0.92
    assert release_default("vllm", "gpu_memory_utilization", "0.25.0")[0] == 0.92  # was 0.9 from a second table
    assert release_default("vllm", "gpu_memory_utilization", "0.33.0")[0] == 0.92
    # 0.34.0: unset resolves to 1.0 with the extensible KV cache, on by default (cache.py:495-501, vllm.py:3180)
    assert release_default("vllm", "gpu_memory_utilization", "0.34.0")[0] == 1.0
    v, src = release_default("vllm", "gpu_memory_utilization", None)
    assert v == 1.0 and "latest known release assumed (0.34.0)" in src and "cache.py:216" in src
    # the parser's table default is replaced by the release's; any other value was given on purpose
    assert resolve_utilization("vllm", "0.10.0", 0.92, 0.92)[0] == 0.9
    assert resolve_utilization("vllm", "0.10.0", 0.85, 0.92) == (0.85, resolve_utilization("vllm", None, 0.85, 0.92)[1])


def test_budget_lines_and_error_bar():
    m = resolve_model("meta-llama/Meta-Llama-3.1-8B")
    sb = serving_budget("vllm", H100, 0.92, "test", 16_059_990_016, m, 1, 8192, 1024)
    names = [x.name for x in sb.lines]
    assert names == ["requested", "weights", "activation peak", "CUDA graphs", "non-torch"]
    act = 8192 * 110_592  # 905,969,664 B, below the sampler's 1,024 x 128,256 x 14 = 1,838,678,016 B
    assert sb.line("activation peak").bytes == max(act, 1024 * 128_256 * 14) == 1_838_678_016
    requested = -(-H100 * 0.92 // 1)
    assert sb.line("requested").bytes == requested
    # non-torch on an 80 GB GPU at TP 1: 1.79 GiB (vLLM PR 10511's H100 log); floored to whole bytes: 58,590,043,833
    assert sb.line("non-torch").bytes == 1.79 * GIB
    assert sb.kv_bytes == math.floor(requested - 16_059_990_016 - 1024 * 128_256 * 14 - 0.25 * GIB - 1.79 * GIB)
    assert sb.kv_bytes == 58_590_043_833
    assert sb.error_bytes == 0.15 * 1024 * 128_256 * 14 + 0.25 * GIB + 0.25 * GIB + 0.6 * GIB
    # before vLLM 0.20.0 the CUDA-graph estimate is not taken from the budget (envs.py:1635 at 0.18.0)
    old = serving_budget("vllm", H100, 0.9, "test", 16_059_990_016, m, 1, 8192, 1024, engine_version="0.11.0")
    assert old.line("CUDA graphs").bytes == 0 and old.line("activation peak").bytes == 1024 * 128_256 * 28
    s2 = serving_budget("sglang", H100, 0.88, "test", 16_059_990_016, m, 1)
    assert [x.name for x in s2.lines] == ["static pool", "weights", "non-torch"]


def test_check_fit_and_sweep_print_the_same_budget(tmp_path):
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM",
                             "--format", "json", "--no-speed")  # the budgets only: no Speed section
    assert code in (0, 1), err
    check_budget = json.loads(out)["derived"]["kv_budget_bytes_per_gpu"]
    code, out, err = run_cli("sweep", "--vllm", "vllm serve meta-llama/Llama-3.1-8B", "--tp", "1", "--gpu", "H100-SXM",
                             "--format", "json", "--no-speed")
    assert code in (0, 1), err
    sweep_budget = json.loads(out)["combinations"][0]["kv_budget_bytes_per_gpu"]
    from kg.analyses.fit import model_context
    from kg.knowledge.catalog import load_catalog
    cat, _ = load_catalog()
    ctx = model_context(resolve_model("meta-llama/Meta-Llama-3.1-8B"), hardware=cat.resolve_hardware("H100-SXM"))
    assert check_budget == sweep_budget == round(ctx["budget_bytes"])
    # 79.65 GiB (memory_visible_mib) everywhere, not 80
    assert "79.65 GiB" in ctx["budget_source"]


def _utilization_everywhere(*argv: str) -> set:
    """gpu_memory_utilization in the check header (paged-kv-cache parameter), the effective configuration
    and the budget's requested line, for one check run."""
    code, out, err = run_cli("check", *argv, "--gpu", "H100-SXM", "--format", "json", "--no-speed")  # no Speed read
    assert code in (0, 1), err
    d = json.loads(out)
    eff = {e["setting"]: e for e in d["effective_config"]}["gpu_memory_utilization"]
    requested = {x["name"]: x for x in d["derived"]["kv_budget_breakdown"]}["requested"]
    return {d["stack"]["techniques"]["paged-kv-cache"]["gpu_memory_utilization"], eff["value"],
            d["derived"]["kv_budget_gpu_memory_utilization"]}, eff["source"], requested["basis"], requested["source"]


def test_pinned_release_header_and_budget_use_one_utilization():
    # vLLM 0.11.0 runs with 0.9 (release table); header, effective configuration and budget all say 0.9
    vals, src, basis, why = _utilization_everywhere("--vllm", "vllm serve meta-llama/Llama-3.1-8B",
                                                    "--engine-version", "0.11.0")
    assert vals == {0.9} and src == "engine default" and "gpu_memory_utilization 0.9)" in basis
    assert "given" not in why and "vllm 0.11.0 default" in why
    # 0.25.0: 0.92 everywhere (the budget used to read a second table that said 0.9 between 0.12.0 and 0.33.0)
    vals, src, basis, why = _utilization_everywhere("--vllm", "vllm serve meta-llama/Llama-3.1-8B",
                                                    "--engine-version", "0.25.0")
    assert vals == {0.92} and src == "engine default"
    # a flag equal to the newest default is still given: 0.11.0 with --gpu-memory-utilization 0.92 runs with 0.92
    vals, src, basis, why = _utilization_everywhere(
        "--vllm", "vllm serve meta-llama/Llama-3.1-8B --gpu-memory-utilization 0.92", "--engine-version", "0.11.0")
    assert vals == {0.92} and src == "given" and "; given (" in why
