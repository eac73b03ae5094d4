"""vLLM 0.33.0 configuration checks covered by rules (rules/engine_checks_vllm.yaml): the options they read
come from pasted commands (catalog/engines/vllm.yaml flag entries), the defaults vLLM applies when an option
is not given (kg.inputs.optiondefaults), and the coverage docs/engine-checks.md reports."""
from __future__ import annotations

import re

import pytest

import kg
from kg.analyses.enginechecks import coverage, load_checks
from kg.core import paths
from kg.inputs.optiondefaults import option_facts

RULES = paths.rules_dir() / "engine_checks_vllm.yaml"
NEW_IDS = set(re.findall(r"^  - id: (\S+)", RULES.read_text(encoding="utf-8"), re.M))


@pytest.fixture(scope="module")
def catalog():
    return kg.load_catalog()


def _fired(cmd: str, catalog, version: str | None = None) -> dict[str, str]:
    st = kg.stack_from_command(cmd, catalog)
    if version:
        st.engine_version = version
    return {f.rule_id: f.severity for f in kg.check(st, catalog).findings}


def test_vllm_0_33_0_coverage_is_34_of_36():
    # 6 covered before this lane + 28 rules here; 2 left with a reason (encoder-decoder fact, model samplers)
    files = {(f["engine"], f["release"]): f for f in coverage(load_checks(paths.catalog_dir() / "engines" / "checks"),
                                                               set(NEW_IDS) | _all_rule_ids())}
    v = files[("vllm", "0.33.0")]
    assert (v["covered"], v["total"], v["percent"]) == (34, 36, 94.4)
    left = [r["check"].id for r in v["rows"] if r["status"] != "covered"]
    assert left == ["vllm-config-model-1080", "vllm-config-vllm-1425"]
    assert all(r["check"].not_covered for r in v["rows"] if r["status"] != "covered")


def _all_rule_ids() -> set[str]:
    from kg.engine.rules import load_rules
    return {r.id for r in load_rules("check", paths.rules_dir())[0].rules}


def test_parser_reads_json_fields_list_flags_and_shorthands(catalog):
    cmd = ("vllm serve Qwen/Qwen3-30B-A3B -cc.pass_config.fuse_attn_quant true --cudagraph-capture-sizes 1 2 4 "
           "--eplb-config '{\"use_async\": true, \"communicator\": \"pynccl\"}' --spec-method eagle3 "
           "--compilation-config '{\"cudagraph_mode\": \"PIECEWISE\", \"mode\": 1}'")
    s = kg.stack_from_command(cmd, catalog).settings
    assert s["cudagraph_capture_sizes"] == "1 2 4"          # nargs="+": all three words, none taken as the model
    assert s["eplb_communicator"] == "pynccl" and s["eplb_use_async"] is True
    assert s["spec_method"] == "eagle3" and s["speculative_method"] == "eagle3"   # also_set
    # the later -cc replaces the earlier one (argparse keeps the last value); nested keys reach their settings
    assert s["cudagraph_mode"] == "PIECEWISE" and s["compilation_mode"] == "1"
    nested = kg.stack_from_command("vllm serve Qwen/Qwen3-30B-A3B "
                                   "-cc '{\"pass_config\": {\"fuse_attn_quant\": true}}'", catalog).settings
    assert nested["fuse_attn_quant"] is True


def test_option_defaults_follow_the_flag_release_bounds():
    at_26 = option_facts("vllm", "0.26.0", {})
    at_27 = option_facts("vllm", "0.27.0", {})
    assert "use_replayssm" not in at_26                      # --use-replayssm exists from 0.27.0
    assert at_27["use_replayssm"] is False
    latest = option_facts("vllm", None, {})
    assert latest["moe_backend"] == "auto" and latest["eplb_use_async"] is True
    assert latest["mm_tensor_ipc"] == "direct_rpc" and latest["watermark_given"] is False
    assert latest["options_given_twice"] == []
    given = option_facts("vllm", "0.33.0", {"moe_backend": "triton", "watermark_config": {}})
    assert "moe_backend" not in given and given["watermark_given"] is True
    assert option_facts("sglang-missing-table", None, {}) == {}


def test_flag_and_json_twin_detected_only_from_the_release_that_refuses_them():
    both = {"attention_backend": "FLASHINFER", "attention_config": {"backend": "FLASH_ATTN"}}
    assert option_facts("vllm", "0.13.0", both)["options_given_twice"] == ["--attention-backend"]
    assert option_facts("vllm", "0.12.0", both)["options_given_twice"] == []   # no --attention-backend yet
    other = {"attention_backend": "FLASHINFER", "attention_config": {"flash_attn_version": 3}}
    assert option_facts("vllm", "0.33.0", other)["options_given_twice"] == []


@pytest.mark.parametrize("cmd, rule, severity", [
    ("vllm serve Qwen/Qwen3-30B-A3B --enable-lora --moe-backend deep_gemm_mega_moe", "lora-with-mega-moe-backend", "error"),
    ("vllm serve Qwen/Qwen3-30B-A3B -pp 2 --enable-expert-parallel --enable-eplb --enable-elastic-ep",
     "elastic-ep-with-pipeline-parallel", "error"),
    ("vllm serve Qwen/Qwen3-30B-A3B --enable-expert-parallel --enable-eplb --eplb-config.communicator torch_nccl",
     "async-eplb-with-nccl-communicator", "error"),
    ("vllm serve meta-llama/Llama-3.1-8B --attention-backend FLASHINFER -ac.backend FLASH_ATTN",
     "attention-backend-with-attention-config-backend", "error"),
    ("vllm serve meta-llama/Llama-3.1-8B --max-cudagraph-capture-size 256 -cc.max_cudagraph_capture_size 512",
     "max-cudagraph-capture-size-given-twice", "error"),
    ("vllm serve meta-llama/Llama-3.1-8B --spec-tokens 3 "
     "--speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 4}'",
     "spec-flag-with-speculative-config-key", "error"),
    ("vllm serve Qwen/Qwen3-30B-A3B -dp 2 --enable-expert-parallel --all2all-backend deepep_high_throughput",
     "deepep-high-throughput-disables-cuda-graphs", "warning"),
    ("vllm serve meta-llama/Llama-3.1-8B -cc.mode 1", "stock-torch-compile-disables-cuda-graphs-v2", "info"),
    ("vllm serve meta-llama/Llama-3.1-8B --profiler-config "
     "'{\"profiler\": \"proton\", \"proton_graph_attribution\": true, \"proton_mode\": \"periodic_flushing:format=hatchet\"}'",
     "proton-graph-attribution-with-periodic-flushing", "error"),
    ("vllm serve meta-llama/Llama-3.1-8B --use-replayssm --kv-transfer-config "
     "'{\"kv_connector\": \"NixlConnector\", \"kv_role\": \"kv_both\"}'", "replayssm-with-kv-connector", "error"),
])
def test_pasted_commands_fire_on_the_latest_release(cmd, rule, severity, catalog):
    assert _fired(cmd, catalog).get(rule) == severity


def test_the_same_commands_pass_before_the_check_existed(catalog):
    cmd = "vllm serve Qwen/Qwen3-30B-A3B -dp 2 --enable-expert-parallel --all2all-backend deepep_high_throughput"
    assert "deepep-high-throughput-disables-cuda-graphs" in _fired(cmd, catalog, "0.13.0")
    assert "deepep-high-throughput-disables-cuda-graphs" not in _fired(cmd, catalog, "0.12.0")
    lora = "vllm serve Qwen/Qwen3-30B-A3B --enable-lora --moe-backend deep_gemm_mega_moe"
    assert "lora-with-mega-moe-backend" not in _fired(lora, catalog, "0.32.0")


def test_plain_commands_leave_no_new_rule_unevaluable(catalog):
    # the defaults make every new rule decidable on an ordinary command: held or not applicable, never "missing"
    for cmd in ("vllm serve Qwen/Qwen3-235B-A22B -tp 8",
                "vllm serve Qwen/Qwen3-30B-A3B -dp 2 --enable-expert-parallel --speculative-config "
                "'{\"method\": \"eagle3\", \"model\": \"x/y\", \"num_speculative_tokens\": 3}'"):
        rep = kg.check(kg.stack_from_command(cmd, catalog), catalog)
        assert not [n["rule_id"] for n in rep.not_evaluable if n["rule_id"] in NEW_IDS]
        assert not [f.rule_id for f in rep.findings if f.rule_id in NEW_IDS]


def _nvfp4_stack(gpu: str, version: str, dtype: str = "nvfp4", model: str = "meta-llama/Llama-3.1-8B"):
    from kg.engines.launch import parse_command
    cat = kg.load_catalog()
    st = parse_command(f"vllm serve {model} --kv-cache-dtype {dtype}", cat, "vllm")
    st.hardware, st.gpu_count, st.engine_version = cat.resolve_hardware(gpu), 1, version
    return cat, st


@pytest.mark.parametrize("gpu, version, dtype, model, fired", [
    # 0.24.0-0.31.0: FlashInfer's TRT-LLM FP4 kernels only (flashinfer.py:654 at 0.24.0, :502 at 0.31.0)
    ("H100-SXM", "0.31.0", "nvfp4", "meta-llama/Llama-3.1-8B", "nvfp4-kv-cache-needs-sm100"),
    ("B200", "0.31.0", "nvfp4", "meta-llama/Llama-3.1-8B", None),
    # 0.32.0: FA2 path on SM80/SM90/SM120 (flashinfer.py:110), plain nvfp4 only, not at head_size 64
    ("H100-SXM", "0.32.0", "nvfp4", "meta-llama/Llama-3.1-8B", None),
    ("H100-SXM", "0.33.0", "nvfp4_4over6", "meta-llama/Llama-3.1-8B", "nvfp4-kv-cache-unsupported-gpu"),
    ("H100-SXM", "0.33.0", "nvfp4", "openai/gpt-oss-120b", "nvfp4-kv-cache-unsupported-gpu"),
    ("T4", "0.33.0", "nvfp4", "meta-llama/Llama-3.1-8B", "nvfp4-kv-cache-unsupported-gpu"),
    ("RTX-PRO-6000", "0.33.0", "nvfp4", "meta-llama/Llama-3.1-8B", None),
])
def test_nvfp4_kv_cache_by_gpu_and_release(gpu, version, dtype, model, fired):
    cat, st = _nvfp4_stack(gpu, version, dtype, model)
    got = {f.rule_id for f in kg.check(st, cat).findings} & {"nvfp4-kv-cache-needs-sm100", "nvfp4-kv-cache-unsupported-gpu"}
    assert got == ({fired} if fired else set())


def test_sweep_no_longer_recommends_nvfp4_kv_where_vllm_refuses_it():
    from kg.analyses.sweep import sweep
    from kg.engine.rules import load_ruleset
    cat, st = _nvfp4_stack("T4", "0.33.0", "auto")
    res = sweep(st, cat, load_ruleset("check"), [1], None, None, ["fp8", "nvfp4"])
    by = {c.kv_cache_dtype: c for c in res.combinations}
    assert "nvfp4-kv-cache-unsupported-gpu" in [f["rule_id"] for f in by["nvfp4"].findings]
    assert "nvfp4-kv-cache-unsupported-gpu" not in [f["rule_id"] for f in by["fp8"].findings]


@pytest.mark.parametrize("gpu, version, kernel", [
    # vLLM < 0.14.0: Marlin needs SM80 (marlin_utils.py:51 at 0.13.0 'if device_capability < 80:'),
    # from 0.14.0 SM75 (marlin_utils.py:54 at 0.14.0, :66 at 0.33.0 'if device_capability < 75:')
    ("T4", "0.13.0", "awq"), ("T4", "0.14.0", "awq_marlin"), ("T4", "0.33.0", "awq_marlin"),
    ("V100", "0.33.0", "awq"), ("A100-80GB", "0.13.0", "awq_marlin"),
])
def test_awq_checkpoint_runs_marlin_from_sm75_since_0_14(gpu, version, kernel):
    from kg.analyses.check import stack_facts
    from kg.engines.launch import parse_command
    from kg.inputs.optiondefaults import ranged_fact
    cat = kg.load_catalog()
    cfg = str(paths.rules_dir() / "fixtures" / "configs" / "qwen2.5-72b-awq.json")
    st = parse_command(f"vllm serve {cfg}", cat, "vllm")
    st.hardware, st.gpu_count, st.engine_version = cat.resolve_hardware(gpu), 1, version
    assert stack_facts(st)[1]["weight_quant_kernel"] == kernel
    assert ranged_fact("vllm", "0.13.0", "marlin_min_compute_capability") == 8.0
    assert ranged_fact("vllm", None, "marlin_min_compute_capability") == 7.5
    assert ranged_fact("sglang", "0.5.23", "marlin_min_compute_capability") is None   # SGLang keeps 8.0 in code
