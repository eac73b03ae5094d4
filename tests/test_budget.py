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


def test_vllm_034_extensible_kv_cache_caps_requested_at_total_minus_the_margin():
    # vllm 0.34.0 v1/worker/extensible_kv_cache.py:614-617: available = min(requested - non_kv_used,
    # headroom - margin) - transient_peak, margin = max(1 GiB, 0.75 x transient_peak) (:64-65); the transient
    # peak is the profiled peak + the CUDA-graph estimate (gpu_worker.py:771-773, kept at :946-948), while the
    # captured graphs are already in non_kv_used. Qwen3-235B-A22B TP 8 on 141 GiB at the 1.0 default:
    from kg.derive.budget import BudgetInputs
    from kg.engines.vllm.budget import budget
    m = resolve_model("Qwen/Qwen3-235B-A22B")
    total, weights = 141 * GIB, 54 * GIB
    act = 1024 * 151_936 * 14  # the sampler: 2,178,154,496 B
    peak = act + 0.25 * GIB  # 2,446,589,952 B
    margin = 0.75 * peak  # 1,834,942,464 B (1.71 GiB), above the 1 GiB floor
    inp = BudgetInputs("vllm", total, 1.0, "test", weights, m, 8, 8192, 1024, kv_sizing="extensible")
    sb = budget(inp)
    assert [x.name for x in sb.lines] == ["requested", "weights", "activation peak", "CUDA graphs",
                                          "transient peak: CUDA graphs", "non-torch", "extensible-cache margin"]
    assert sb.line("extensible-cache margin").bytes == margin == 1_834_942_464
    assert sb.line("transient peak: CUDA graphs").bytes == 0.25 * GIB
    # 141 GiB - 1,834,942,464 - 54 GiB - 2,178,154,496 - 2 x 0.25 GiB - 3.58 GiB
    assert sb.kv_bytes == math.floor(total - margin - weights - act - 0.5 * GIB - 3.58 * GIB) == 85_021_575_086
    # the profile budget of the same stack keeps 1,834,942,464 + 268,435,456 B more for the cache
    old = budget(BudgetInputs("vllm", total, 1.0, "test", weights, m, 8, 8192, 1024))
    assert old.kv_bytes - sb.kv_bytes == 2_103_377_920
    # at 0.9 the fraction binds (126.9 GiB < 141 GiB - 1.71 GiB): no margin line, the graph estimate still counts twice
    at09 = budget(BudgetInputs("vllm", total, 0.9, "test", weights, m, 8, 8192, 1024, kv_sizing="extensible"))
    assert at09.line("extensible-cache margin") is None
    assert at09.line("transient peak: CUDA graphs").bytes == 0.25 * GIB
    # a small model's peak: the 1 GiB floor (3 GiB on ROCm) binds
    small = resolve_model("Qwen/Qwen3-0.6B")  # peak 256 x 151,936 x 14 B + 0.25 GiB = 0.76 GiB
    s = budget(BudgetInputs("vllm", 24 * GIB, 1.0, "test", GIB, small, 1, 2048, 256, kv_sizing="extensible"))
    assert s.line("extensible-cache margin").bytes == 1 * GIB
    r = budget(BudgetInputs("vllm", 24 * GIB, 1.0, "test", GIB, small, 1, 2048, 256, kv_sizing="extensible-rocm"))
    assert r.line("extensible-cache margin").bytes == 3 * GIB


def test_vllm_extensible_kv_cache_is_on_from_034_unless_turned_off():
    # 0.34.0 config/vllm.py:3180-3262: on by default on CUDA / ROCm; off with --no-enable-extensible-kv-cache,
    # --kv-cache-memory-bytes, --num-gpu-blocks-override, elastic EP or a KV connector; absent before 0.34.0
    def breakdown(cmd, *extra):
        code, out, err = run_cli("check", "--vllm", cmd, "--gpu", "H100-SXM", "--format", "json", "--no-speed", *extra)
        assert code in (0, 1), err
        return [x["name"] for x in json.loads(out)["derived"]["kv_budget_breakdown"]]
    assert "extensible-cache margin" in breakdown("vllm serve Qwen/Qwen3-8B")
    assert "extensible-cache margin" not in breakdown("vllm serve Qwen/Qwen3-8B --no-enable-extensible-kv-cache")
    assert "extensible-cache margin" not in breakdown("vllm serve Qwen/Qwen3-8B", "--engine-version", "0.33.0")


def test_vllm_034_budget_fraction_is_092_when_the_extensible_kv_cache_is_off():
    # vllm 0.34.0 config/cache.py:495-501 resolved_gpu_memory_utilization: 1.0 only with the extensible KV cache,
    # else DEFAULT_GPU_MEMORY_UTILIZATION 0.92 (:186); config/vllm.py:3180-3262 turns it off for
    # --no-enable-extensible-kv-cache and a KV connector. The budget must use the fraction the effective
    # configuration shows (newuser6 #2: it took the 1.0 row without its `when`, KV x 1.78).
    def derived(cmd, count="1"):
        code, out, err = run_cli("check", "--vllm", cmd, "--gpu", "H100-SXM", "--count", count, "--format", "json",
                                 "--no-speed")
        assert code in (0, 1), err
        d = json.loads(out)
        eff = [e["value"] for e in d["effective_config"] if e["setting"] == "gpu_memory_utilization"]
        return d["derived"], eff
    d, eff = derived("vllm serve Qwen/Qwen3-32B --no-enable-extensible-kv-cache")
    assert d["kv_budget_gpu_memory_utilization"] == 0.92 == eff[0]
    assert "cache.py:186" in d["kv_budget_utilization_source"]
    # ceil(79.65 GiB x 0.92) = 73.28 GiB - 61.02 weights - 2.03 sampler - 0.25 graphs - 1.79 non-torch: 33,472
    # tokens at 262,144 B (was 59,584 from x 1.0)
    assert d["kv_tokens_per_gpu"] == 33_472
    d, eff = derived("vllm serve Qwen/Qwen3-32B -tp 2 --kv-transfer-config "
                     "'{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}'", "2")
    assert d["kv_budget_gpu_memory_utilization"] == 0.92 == eff[0]
    # the default (extensible on) keeps 1.0: no fire
    d, eff = derived("vllm serve Qwen/Qwen3-32B")
    assert d["kv_budget_gpu_memory_utilization"] == 1.0 == eff[0]
    assert d["kv_tokens_per_gpu"] == 51_584  # x 1.0, then capped by the extensible-cache margin
