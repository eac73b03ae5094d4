"""Runtime-failure rules: schema and consistency, fixtures at the version boundary, the reporters' own
stacks with their numbers, the report's "starts, then ..." section, and the per-release support data.

Each reporter stack below is built from the command or settings quoted in the public issue (URL in
the rule); the assertions use the numbers the issue states.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from kg.analyses.check import check_stack
from kg.core.errors import OptkgError
from kg.core.yamlio import YamlDoc
from kg.engine.fixtures import load_fixture_cases
from kg.engine.rules import load_rules, load_ruleset
from kg.engines.launch import parse_command
from kg.inputs.stack import stack_from_doc
from kg.knowledge.support import load_support_file, support_facts, support_files
from kg.output.report import render_check_text, to_json

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "catalog" / "models"


@pytest.fixture(scope="module")
def rules():
    return load_ruleset("check")


@pytest.fixture(scope="module")
def runtime_rules(rules):
    return [r for r in rules.rules if r.kind == "runtime-failure"]


def _stack(catalog, data):
    return stack_from_doc(YamlDoc("<test>", data, {}), catalog, REPO)


def _finding(report, rule_id):
    got = [f for f in report.findings if f.rule_id == rule_id]
    assert got, f"{rule_id} did not fire; fired: {[f.rule_id for f in report.findings]}"
    return got[0]


def _quiet(report, rule_id):
    assert rule_id not in [f.rule_id for f in report.findings]


def _command_stack(catalog, cmd, engine, version, gpu=None):
    """The stack of the launch command ``cmd`` for ``engine`` at release ``version`` (on catalog GPU ``gpu``)."""
    s = parse_command(cmd, catalog, engine)
    s.engine_version = version
    if gpu:
        s.hardware = catalog.hardware[gpu]
    return s


def _structured_fires_until(catalog, rules, cmd, engine, rule_id, version, fixed):
    """``cmd`` serving structured outputs: ``rule_id`` fires at ``version`` and not at ``fixed`` (the
    release with the fix, or the one where the engine path is gone). Returns (finding, stack at ``version``)."""
    from kg.inputs.stack import add_technique
    s = _command_stack(catalog, cmd, engine, version)
    add_technique(s, catalog, "structured-output-decoding", None, "<test>")
    f = _finding(check_stack(s, catalog, rules), rule_id)
    s.engine_version = fixed
    _quiet(check_stack(s, catalog, rules), rule_id)
    s.engine_version = version
    return f, s


# --------------------------------------------------------------------------- rule set shape

def test_runtime_failure_rules_load_and_derive_applies_to(runtime_rules):
    assert len(runtime_rules) >= 30
    for r in runtime_rules:
        fb = r.failure
        assert r.applies_to == {"engines": [fb["engine"]], "versions": fb["affected"]}, r.id
        assert fb["issue"]["url"].endswith(f"/{fb['issue']['number']}"), r.id
        assert r.cost_dimension in ("compute", "storage", "network", "scheduling", "data", "energy"), r.id


def test_every_runtime_failure_rule_has_boundary_fixtures(runtime_rules):
    """One fire case inside the affected range, one pass case at the fixed release (when there is one),
    and one pass case inside the range without the combination."""
    cases = load_fixture_cases()
    for r in runtime_rules:
        spec = SpecifierSet(r.failure["affected"])
        mine = [c for c in cases if c.rule == r.id]
        versions = {(c.expect_fire, str((c.input.get("engine") or {}).get("version"))) for c in mine}
        assert any(fire and Version(v) in spec for fire, v in versions if v != "None"), f"{r.id}: no fire case in {spec}"
        assert any(not fire and Version(v) in spec for fire, v in versions if v != "None"), \
            f"{r.id}: no pass case inside the range (without the combination)"
        if r.failure["fixed_in"]:
            assert (False, r.failure["fixed_in"]) in versions, f"{r.id}: no pass case at the fixed release"


def _rule_file(tmp_path, failure, **extra):
    rule = {"id": "x-runtime", "kind": "runtime-failure", "title": "t", "severity": "error", "match": [{"kind": "stack"}],
            "message": "m", "mechanism": "why", "cost_dimension": "compute", "fix": "f",
            "sources": [{"title": "s", "url": "https://example.org"}], "failure": failure, **extra}
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump({"ruleset": "check", "rules": [rule]}))
    rs, problems = load_rules("check", tmp_path)
    return rs, [p.message for p in problems]


GOOD = {"engine": "vllm", "outcome": "crash", "affected": ">=0.6.3,<0.7.0", "fixed_in": "0.7.0",
        "issue": {"url": "https://github.com/vllm-project/vllm/pull/10467", "number": 10467}, "observed": "o"}


def test_good_failure_block_loads(tmp_path):
    rs, problems = _rule_file(tmp_path, GOOD)
    assert problems == []
    assert rs.rules[0].applies_to == {"engines": ["vllm"], "versions": ">=0.6.3,<0.7.0"}


@pytest.mark.parametrize("change, expect", [
    ({"affected": "<0.7.0"}, "has no lower bound"),
    ({"affected": ">=0.6.3,<0.7.1"}, "must end at the fix: add '<0.7.0'"),
    ({"affected": ">=0.6.3,<=0.7.0"}, "lies inside the affected range"),
    ({"fixed_in": None}, "fixed_in is null: say why"),
    ({"issue": {"url": "https://github.com/vllm-project/vllm/pull/10467", "number": 1046}}, "is not the one in"),
    ({"affected": "not a range"}, "is not a version range"),
])
def test_inconsistent_failure_blocks_are_refused(tmp_path, change, expect):
    _, problems = _rule_file(tmp_path, {**GOOD, **change})
    assert any(expect in m for m in problems), problems


def test_runtime_failure_needs_its_block_and_fix(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump({"ruleset": "check", "rules": [{
        "id": "x", "kind": "runtime-failure", "title": "t", "severity": "error", "match": [{"kind": "stack"}],
        "message": "m", "sources": [{"title": "s", "url": "https://example.org"}]}]}))
    _, problems = load_rules("check", tmp_path)
    assert problems and all(pr.code == "rule-schema" for pr in problems)
    assert any("failure" in pr.message for pr in problems)


def test_applies_to_must_agree_with_the_failure_block(tmp_path):
    _, problems = _rule_file(tmp_path, GOOD, applies_to={"engines": ["vllm"], "versions": "<0.7.0"})
    assert any("disagrees with the failure block" in m for m in problems)


def test_failure_block_only_on_runtime_failure_rules(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump({"ruleset": "check", "rules": [{
        "id": "x", "title": "t", "severity": "error", "match": [{"kind": "stack"}], "message": "m",
        "sources": [{"title": "s", "url": "https://example.org"}], "failure": GOOD}]}))
    _, problems = load_rules("check", tmp_path)
    assert problems


# --------------------------------------------------------------------------- reporters' stacks

def test_vllm_2847_rank_64_adapter_default_max_rank(catalog, rules):
    # issue 2847: "LoRA rank 64 is greater than max_lora_rank 16"; the workaround --max-lora-rank 64 works
    s = _command_stack(catalog, "vllm serve meta-llama/Llama-3.1-8B --enable-lora", "vllm", "0.5.0")
    s.settings["lora_adapter_rank"] = 64
    f = _finding(check_stack(s, catalog, rules), "vllm-lora-adapter-rank-above-max")
    assert f.kind == "runtime-failure" and f.severity == "error"
    assert f.numbers == {"lora_adapter_rank": 64, "max_lora_rank": 16, "max_lora_rank_needed": 64}
    assert f.failure["issue"]["number"] == 2847 and f.failure["fixed_in"] is None
    s.settings["max_lora_rank"] = 64
    _quiet(check_stack(s, catalog, rules), "vllm-lora-adapter-rank-above-max")


def test_vllm_27969_eagle3_tp8_json_object(catalog, rules):
    cmd = ("vllm serve meta-llama/Llama-3.1-8B -tp 8 --speculative-config "
           "'{\"method\": \"eagle3\", \"model\": \"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\", \"num_speculative_tokens\": 4, "
           "\"max_model_len\": 2048}'")
    s = _command_stack(catalog, cmd, "vllm", "0.11.0")
    from kg.inputs.stack import add_technique
    add_technique(s, catalog, "structured-output-decoding", None, "<test>")  # the requests carry json_object
    f = _finding(check_stack(s, catalog, rules), "vllm-v1-spec-decode-structured-output-crash")
    assert f.numbers == {"num_speculative_tokens": 4}
    assert f.failure["reported_numbers"]["concurrency"] == 30 and f.failure["outcome"] == "crash"


def test_vllm_47025_guidance_tp2(catalog, rules):
    s = _stack(catalog, {"model": "meta-llama/Llama-3.1-8B", "engine": {"name": "vllm", "version": "0.23.0"},
                         "techniques": [{"tensor-parallelism": {"tp_size": 2}},
                                        {"speculative-decoding": {"speculative_method": "ngram"}}, "structured-output-decoding"],
                         "settings": {"structured_outputs_backend": "guidance"}})
    f = _finding(check_stack(s, catalog, rules), "vllm-guidance-spec-decode-crash")
    assert f.failure["reported_numbers"] == {"tp_size": 2}
    s.settings["structured_outputs_backend"] = "xgrammar"
    _quiet(check_stack(s, catalog, rules), "vllm-guidance-spec-decode-crash")


def test_vllm_9423_draft_model_v0(catalog, rules):
    # --max-model-len 8192 --speculative-model <3B draft> --num-speculative-tokens 5 on the V0 engine (0.6.6 docker)
    cmd = ("python3 -m vllm.entrypoints.openai.api_server --max-model-len 8192 --model meta-llama/Llama-3.1-70B "
           "--speculative-model neuralmagic/Llama-3.2-3B-Instruct-FP8-dynamic --num-speculative-tokens 5")
    # quiet at 0.11.0: V0 removed, the V1 engine handles the pair
    f, s = _structured_fires_until(catalog, rules, cmd, "vllm", "vllm-v0-spec-decode-guided-decoding", "0.6.6", "0.11.0")
    assert f.failure["reported_numbers"] == {"num_speculative_tokens": 5, "max_model_len": 8192}
    assert s.settings["max_model_len"] == 8192 and s.values()["num_speculative_tokens"] == 5


def test_vllm_10467_multistep_flashinfer_boundary(catalog, rules):
    data = {"model": "meta-llama/Llama-3.1-8B", "engine": {"name": "vllm", "version": "0.6.6"}, "techniques": ["chunked-prefill"],
            "settings": {"num_scheduler_steps": 8, "attention_backend": "FLASHINFER"}}
    f = _finding(check_stack(_stack(catalog, data), catalog, rules), "vllm-multistep-chunked-prefill-flashinfer")
    assert f.numbers == {"num_scheduler_steps": 8} and f.failure["fixed_in"] == "0.7.0"
    data["engine"]["version"] = "0.7.0"
    _quiet(check_stack(_stack(catalog, data), catalog, rules), "vllm-multistep-chunked-prefill-flashinfer")


def test_sglang_12887_fp8_moe_a100_engine_specific(catalog, rules):
    # an FP8 MoE checkpoint (Qwen3-235B-A22B, FP8) on A100s (compute capability 8.0)
    s = _stack(catalog, {"model": "Qwen/Qwen3-235B-A22B", "engine": {"name": "sglang", "version": "0.5.23"},
                         "hardware": {"gpu": "A100-80GB", "count": 8}, "techniques": [{"tensor-parallelism": {"tp_size": 8}}],
                         "settings": {"quantization": "fp8"}})
    f = _finding(check_stack(s, catalog, rules), "sglang-fp8-moe-on-ampere")
    assert f.numbers == {"gpu_compute_capability": 8.0}
    # the same stack on vLLM falls back to weight-only FP8 Marlin MoE: no runtime failure
    v = _stack(catalog, {"model": "Qwen/Qwen3-235B-A22B", "engine": {"name": "vllm", "version": "0.10.2"},
                         "hardware": {"gpu": "A100-80GB", "count": 8}, "techniques": [{"tensor-parallelism": {"tp_size": 8}}],
                         "settings": {"quantization": "fp8"}})
    _quiet(check_stack(v, catalog, rules), "sglang-fp8-moe-on-ampere")


def test_sglang_10846_eagle3_radix_cache_numbers(catalog, rules):
    # the PR wrote --speculative-algo (an argparse abbreviation); the full flag name is used here
    cmd = ("python3 -m sglang.launch_server --model meta-llama/Llama-3.1-8B --speculative-algorithm EAGLE3 "
           "--speculative-draft-model-path lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B --speculative-num-steps 2 "
           "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3 --dtype float16")
    s = _command_stack(catalog, cmd, "sglang", "0.5.2")
    f = _finding(check_stack(s, catalog, rules), "sglang-eagle-radix-cache-acceptance")
    rn = f.failure["reported_numbers"]
    assert (rn["acceptance_without_radix"], rn["acceptance_with_radix"]) == (2.39, 2.26)
    assert round(1 - rn["tokens_per_s_with"] / rn["tokens_per_s_without"], 4) == 0.0523  # 255.74 / 269.86: 5.23 % slower
    s.engine_version = "0.5.3"
    _quiet(check_stack(s, catalog, rules), "sglang-eagle-radix-cache-acceptance")


def test_sglang_32459_eagle_prefix_reuse_collapse(catalog, rules):
    s = _stack(catalog, {"model": "Qwen/Qwen3-235B-A22B", "engine": {"name": "sglang", "version": "0.5.16"},
                         "techniques": [{"tensor-parallelism": {"tp_size": 8}}, {"speculative-decoding": {"speculative_method": "eagle"}},
                                        "prefix-caching"], "settings": {"speculative_num_draft_tokens": 4}})
    f = _finding(check_stack(s, catalog, rules), "sglang-eagle-defeats-prefix-reuse")
    rn = f.failure["reported_numbers"]
    assert rn["cache_hit_no_spec_pct"] - rn["cache_hit_eagle_pct"] == 57  # 97 % -> 40 %
    assert round(rn["input_tok_s_no_spec"] / rn["input_tok_s_eagle"], 2) == 2.62  # 43,981 / 16,811


# --------------------------------------------------------------------------- report

def test_text_and_json_show_runtime_failures_apart(catalog, rules):
    s = _stack(catalog, {"model": "meta-llama/Llama-3.1-8B", "engine": {"name": "vllm", "version": "0.6.6"},
                         "techniques": ["chunked-prefill"], "settings": {"num_scheduler_steps": 8, "attention_backend": "FLASHINFER"}})
    d = check_stack(s, catalog, rules).to_dict()
    text = render_check_text(d)
    assert "Starts, then fails at run time (1)" in text
    assert "starts, then crashes: affected vllm >=0.6.3,<0.7.0; fixed in 0.7.0" in text
    assert "issue: #10467 <https://github.com/vllm-project/vllm/pull/10467>" in text
    assert text.index("Starts, then fails at run time") < text.index("ERROR vllm-multistep-chunked-prefill-flashinfer")
    j = json.loads(to_json(d))
    rf = [f for f in j["findings"] if f["rule_id"] == "vllm-multistep-chunked-prefill-flashinfer"][0]
    assert rf["kind"] == "runtime-failure" and rf["failure"]["fixed_in"] == "0.7.0" and rf["failure"]["outcome"] == "crash"
    startup = [f for f in j["findings"] if f["rule_id"] != "vllm-multistep-chunked-prefill-flashinfer"]
    assert all(f["kind"] == "startup" for f in startup)


# --------------------------------------------------------------------------- support data

def test_support_lookup_by_release():
    got = support_facts("vllm", "0.6.0", {})
    assert got["allowed_max_lora_ranks"] == [8, 16, 32, 64]         # 0.5.4 entry holds until 0.6.4.post1
    assert got["support_releases"]["vllm-lora"] == "0.5.4"
    assert support_facts("vllm", "0.11.1", {})["allowed_max_lora_ranks"][0] == 1   # rank 1 from 0.11.1 (PR 26461)
    assert support_facts("vllm", "0.3.3", {}).get("allowed_max_lora_ranks") is None   # older than every entry (0.4.0)
    assert support_facts("vllm", None, {})["support_releases"]["vllm-lora"] == "0.33.0"
    assert "allowed_max_lora_ranks" not in support_facts("sglang", "0.5.23", {})


def test_every_support_entry_cites_source():
    files = support_files()
    assert files
    for sf in files:
        for _, name, entry in sf.releases:
            assert all(":" in s for s in entry["source"]), f"{sf.path} {name}: cite path:line"


@pytest.mark.parametrize("doc, expect", [
    ({"engine": "vllm", "facts": {"a": {"kind": "value"}}}, "missing field 'releases'"),
    ({"engine": "vllm", "facts": {"a": {"kind": "odd"}}, "releases": {"1.0": {"source": ["x:1"]}}}, "facts.a.kind"),
    ({"engine": "vllm", "facts": {"a": {"kind": "value"}}, "releases": {"1.0": {"a": 1}}}, "releases.1.0.source"),
    ({"engine": "vllm", "facts": {"a": {"kind": "value"}}, "releases": {"one": {"source": ["x:1"]}}}, "not a release number"),
    ({"engine": "vllm", "facts": {"a": {"kind": "member", "list": "l", "key": "architecture"}},
      "releases": {"1.0": {"source": ["x:1"], "l": "Llama"}}}, "expected a list"),
])
def test_bad_support_files_name_file_and_field(tmp_path, doc, expect):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(OptkgError, match=expect.replace(".", r"\.")):
        load_support_file(p)


# --------------------------------------------------------------------------- batch 2: reporters' stacks

def test_vllm_38652_mla_fp8_kv_judge_scores(catalog, rules):
    # the report's GPU (H100, FLASHMLA); both reports are on Hopper, so a Blackwell GPU is not flagged
    s = _command_stack(catalog, "vllm serve deepseek-ai/DeepSeek-V3 --kv-cache-dtype fp8 --max-model-len 8192 -tp 8", "vllm",
                       "0.18.1", "H100-SXM")
    f = _finding(check_stack(s, catalog, rules), "vllm-mla-fp8-kv-garbled")
    rn = f.failure["reported_numbers"]
    assert round(rn["judge_score_bf16_kv"] - rn["judge_score_fp8_kv"], 2) == 3.54   # 4.61 -> 1.07 on MLA
    assert round(rn["gqa_control_bf16"] - rn["gqa_control_fp8"], 2) == 0.03        # 4.74 -> 4.71 on GQA
    q = _command_stack(catalog, "vllm serve Qwen/Qwen3-235B-A22B --kv-cache-dtype fp8 -tp 8", "vllm", "0.18.1")
    _quiet(check_stack(q, catalog, rules), "vllm-mla-fp8-kv-garbled")
    s.hardware = catalog.hardware["B200"]
    _quiet(check_stack(s, catalog, rules), "vllm-mla-fp8-kv-garbled")


def test_vllm_11252_gemma2_xformers_soft_cap_50(catalog, rules):
    s = _command_stack(catalog, "VLLM_ATTENTION_BACKEND=XFORMERS vllm serve google/gemma-2-9b-it", "vllm", "0.6.5")
    f = _finding(check_stack(s, catalog, rules), "vllm-xformers-ignores-softcap")
    assert f.numbers == {"attn_logit_softcapping": 50.0} and f.failure["outcome"] == "wrong-output"
    s.engine_version = "0.6.4.post1"   # refused at startup there (support data: softcap_refusing_backends)
    _quiet(check_stack(s, catalog, rules), "vllm-xformers-ignores-softcap")


def test_vllm_25502_gemma2_h100_fa3(catalog, rules):
    s = _stack(catalog, {"model": "google/gemma-2-9b-it", "engine": {"name": "vllm", "version": "0.10.2"},
                         "hardware": {"gpu": "H100-SXM", "count": 1}, "settings": {"dtype": "bfloat16", "max_model_len": 4096}})
    f = _finding(check_stack(s, catalog, rules), "vllm-gemma2-fa3-softcap-crash")
    assert f.failure["reported_numbers"] == {"max_model_len": 4096} and f.failure["affected"] == "==0.10.2"
    s.settings["flash_attn_version"] = 2   # VLLM_FLASH_ATTN_VERSION=2
    _quiet(check_stack(s, catalog, rules), "vllm-gemma2-fa3-softcap-crash")


def test_vllm_22103_cascade_a100_10_of_18(catalog, rules):
    cmd = ("vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 1 --max-model-len 32768 --max-num-seqs 16 "
           "--enforce-eager")
    s = _command_stack(catalog, cmd, "vllm", "0.10.2", gpu="A100-80GB")
    f = _finding(check_stack(s, catalog, rules), "vllm-cascade-attention-ampere-accuracy")
    rn = f.failure["reported_numbers"]
    assert round(rn["correct_a100"] / rn["questions"], 4) == 0.5556 and rn["correct_a100_no_cascade"] == 18
    assert s.settings["max_model_len"] == 32768 and s.settings["max_num_seqs"] == 16
    s.settings["disable_cascade_attn"] = True
    _quiet(check_stack(s, catalog, rules), "vllm-cascade-attention-ampere-accuracy")


def test_vllm_26130_flashinfer_cascade_hang_b200(catalog, rules):
    s = _command_stack(catalog, "vllm serve Qwen/Qwen3-32B", "vllm", "0.10.2", gpu="B200")
    f = _finding(check_stack(s, catalog, rules), "vllm-flashinfer-cascade-prefix-hang")
    assert f.failure["reported_numbers"]["prefix_cache_hit_rate_pct"] == 89.9 and f.failure["outcome"] == "hang"
    s.engine_version = "0.11.0"
    _quiet(check_stack(s, catalog, rules), "vllm-flashinfer-cascade-prefix-hang")


def test_vllm_54992_flashinfer_spec_ampere_tp2_k7(catalog, rules):
    cmd = ("vllm serve meta-llama/Llama-3.1-8B -tp 2 --attention-backend FLASHINFER --speculative-config "
           "'{\"method\": \"eagle3\", \"model\": \"x\", \"num_speculative_tokens\": 7}'")
    s = _command_stack(catalog, cmd, "vllm", "0.27.0", gpu="A100-80GB")
    f = _finding(check_stack(s, catalog, rules), "vllm-flashinfer-spec-decode-eager-fallback")
    assert f.numbers == {"num_speculative_tokens": 7} and f.failure["reported_numbers"]["slowdown_pct"] == 16


def test_vllm_15554_v1_ngram_guided_tp2(catalog, rules):
    cmd = ("VLLM_USE_V1=1 vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 2 --gpu-memory-utilization 0.7 "
           "--speculative-model [ngram] --num-speculative-tokens 3")
    f, _ = _structured_fires_until(catalog, rules, cmd, "vllm", "vllm-v1-structured-output-spec-unmasked", "0.8.5", "0.9.0")
    assert f.failure["reported_numbers"] == {"tp_size": 2, "gpu_memory_utilization": 0.7, "num_speculative_tokens": 3}


def test_sglang_17576_ngram_json_schema_tp2(catalog, rules):
    cmd = ("python3 -m sglang.launch_server --model Qwen/Qwen3-32B --tp 2 --dp 1 --attention-backend flashinfer "
           "--mem-fraction-static 0.6 --max-running-requests 32 --disable-radix-cache --speculative-algorithm NGRAM")
    f, _ = _structured_fires_until(catalog, rules, cmd, "sglang", "sglang-ngram-structured-output-crash", "0.5.8", "0.5.9")
    assert f.failure["reported_numbers"]["max_running_requests"] == 32 and f.failure["fixed_in"] == "0.5.9"


def test_sglang_13019_spec_v2_json(catalog, rules):
    s = _stack(catalog, {"model": "Qwen/Qwen3-235B-A22B", "engine": {"name": "sglang", "version": "0.5.6"},
                         "techniques": [{"tensor-parallelism": {"tp_size": 8}}, {"speculative-decoding": {"speculative_method": "eagle"}},
                                        "structured-output-decoding"], "settings": {"sglang_enable_spec_v2": True}})
    f = _finding(check_stack(s, catalog, rules), "sglang-spec-v2-structured-output-garbage")
    assert f.failure["reported_numbers"] == {"max_tokens": 1000}
    s.settings["sglang_enable_spec_v2"] = False
    _quiet(check_stack(s, catalog, rules), "sglang-spec-v2-structured-output-garbage")


TRT = {"model": "meta-llama/Llama-3.1-8B", "engine": {"name": "trtllm"}}


@pytest.mark.parametrize("rule_id, version, extra, numbers", [
    ("trtllm-kv-reuse-chunked-prefill-token-budget", "1.3.0rc11",
     {"techniques": ["chunked-prefill", "prefix-caching"], "settings": {"kv_cache_reuse": True, "max_num_batched_tokens": 4096}},
     {"max_num_tokens": 4096}),
    ("trtllm-xgrammar-kv-reuse-segfault", "0.16.0",
     {"techniques": ["structured-output-decoding", "prefix-caching"], "settings": {"kv_cache_reuse": True}}, {}),
    ("trtllm-draft-model-spec-hang", "0.17.0.post1",
     {"techniques": [{"speculative-decoding": {"speculative_method": "draft_model"}}]}, {}),
    ("trtllm-int8-kv-bf16-garbage", "0.8.0",
     {"techniques": [{"tensor-parallelism": {"tp_size": 4}}, {"kv-cache-quantization": {"kv_cache_dtype": "int8"}}],
      "settings": {"dtype": "bfloat16"}}, {}),
    ("trtllm-chunked-context-accuracy", "0.8.0", {"techniques": ["chunked-prefill"], "settings": {"dtype": "float16"}}, {}),
])
def test_trtllm_reported_stacks(catalog, rules, rule_id, version, extra, numbers):
    data = {**TRT, **extra, "engine": {"name": "trtllm", "version": version}}
    f = _finding(check_stack(_stack(catalog, data), catalog, rules), rule_id)
    assert f.numbers == numbers and f.failure["engine"] == "trtllm"


def test_trtllm_1303_numbers(catalog, rules):
    r = {x.id: x for x in rules.rules}
    assert r["trtllm-int8-kv-bf16-garbage"].failure["reported_numbers"] == {
        "tp_size": 4, "max_batch_size": 32, "max_input_len": 4096, "max_output_len": 512}


def test_eagle3_target_support_data():
    # 0.12.0: the allow-list of vllm/config/speculative.py:620 and the SupportsEagle3 classes
    got = support_facts("vllm", "0.12.0", {"architecture": "LlamaForCausalLM"})
    assert got["eagle3_model_types"] == ["llama", "qwen", "minicpm", "gpt_oss"] and got["supports_eagle3"] is True
    assert support_facts("vllm", "0.12.0", {"architecture": "DeepseekV3ForCausalLM"})["supports_eagle3"] is False
    assert support_facts("vllm", "0.33.0", {"architecture": "DeepseekV3ForCausalLM"})["supports_eagle3"] is True


def test_vllm_8985_multistep_json_mode_8_steps(catalog, rules):
    # --num-scheduler-steps 8 with response_format json_object on vllm-openai:v0.6.2
    s = _stack(catalog, {"model": "meta-llama/Llama-3.1-70B", "engine": {"name": "vllm", "version": "0.6.2"},
                         "techniques": [{"tensor-parallelism": {"tp_size": 4}}, "structured-output-decoding"],
                         "settings": {"num_scheduler_steps": 8}})
    f = _finding(check_stack(s, catalog, rules), "vllm-multistep-guided-decoding-crash")
    assert f.numbers == {"num_scheduler_steps": 8} and f.failure["reported_numbers"] == {"num_scheduler_steps": 8}
    s.settings["num_scheduler_steps"] = 1
    _quiet(check_stack(s, catalog, rules), "vllm-multistep-guided-decoding-crash")


def test_sglang_23006_pp2_one_running_request(catalog, rules):
    cmd = ("python -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B --moe-runner-backend triton --disable-cuda-graph "
           "--chunked-prefill-size 64 --max-running-requests 1 --pp-size 2")
    s = _command_stack(catalog, cmd, "sglang", "0.5.10")
    f = _finding(check_stack(s, catalog, rules), "sglang-pp-chunked-prefill-hang")
    rn = f.failure["reported_numbers"]
    assert f.numbers == {"pp_size": 2}
    assert max(rn["max_running_requests"] // rn["pp_size"], 1) == rn["pp_max_micro_batch_size"] == 1
    assert s.settings["max_num_seqs"] == 1 and s.settings["chunked_prefill_size"] == 64
    s.engine_version = "0.5.11"
    _quiet(check_stack(s, catalog, rules), "sglang-pp-chunked-prefill-hang")


def test_structured_outputs_spec_support_states():
    assert [support_facts("vllm", v, {})["structured_outputs_with_spec"] for v in ("0.8.0", "0.8.2", "0.8.5", "0.9.0", "0.33.0")] == \
        ["refused", "unmasked", "unmasked", "masked", "masked"]


def test_lmdeploy_3767_gemma_prefix_caching_index_17(catalog, rules):
    s = _stack(catalog, {"model": "google/gemma-2-9b-it", "engine": {"name": "lmdeploy", "version": "0.9.2"},
                         "techniques": ["prefix-caching"]})
    f = _finding(check_stack(s, catalog, rules), "lmdeploy-sliding-window-prefix-caching-crash")
    assert f.failure["reported_numbers"] == {"index": 17, "axis_size": 17} and f.failure["fixed_in"] == "0.10.0"
    s.engine_version = "0.10.0"
    _quiet(check_stack(s, catalog, rules), "lmdeploy-sliding-window-prefix-caching-crash")


def test_lmdeploy_4306_turbomind_prefix_caching_tp2(catalog, rules):
    s = _stack(catalog, {"model": "Qwen/Qwen3-32B", "engine": {"name": "lmdeploy", "version": "0.11.1"},
                         "hardware": {"gpu": "H20", "count": 2},
                         "techniques": [{"tensor-parallelism": {"tp_size": 2}}, "prefix-caching"],
                         "settings": {"max_model_len": 128000, "max_num_seqs": 1, "block_size": 128}})
    f = _finding(check_stack(s, catalog, rules), "lmdeploy-turbomind-prefix-caching-garbled")
    assert f.failure["reported_numbers"]["session_len"] == s.settings["max_model_len"] == 128000


def test_sglang_spec_v2_default_per_release():
    from kg.analyses.supportfacts import support_namespace
    from kg.inputs.stack import Stack
    def v2(version, given=None):
        st = Stack(name="x", model=None, engine="sglang", engine_version=version)
        ns = {} if given is None else {"sglang_enable_spec_v2": given}
        return support_namespace(st, ns).get("sglang_enable_spec_v2", given)
    assert [v2("0.5.6"), v2("0.5.10"), v2("0.5.11"), v2("0.5.14"), v2("0.5.6", True)] == [False, False, True, True, True]


def test_vllm_29373_ray_tp8_pp2_timeout_300s(catalog, rules):
    cmd = ("vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --pipeline-parallel-size 2 --dtype bfloat16 "
           "--gpu-memory-utilization 0.9 --trust-remote-code")
    s = _command_stack(catalog, cmd, "vllm", "0.11.0")
    s.settings["distributed_executor_backend"] = "ray"   # --distributed-executor-backend ray
    f = _finding(check_stack(s, catalog, rules), "vllm-ray-pp-compiled-graph-timeout")
    assert f.numbers == {"pp_size": 2, "tp_size": 8} and f.failure["reported_numbers"]["channel_timeout_s"] == 300
    s.settings["distributed_executor_backend"] = "mp"
    _quiet(check_stack(s, catalog, rules), "vllm-ray-pp-compiled-graph-timeout")


def test_vllm_10432_multistep_max_tokens_zero(catalog, rules):
    s = _stack(catalog, {"model": "meta-llama/Llama-3.1-8B", "engine": {"name": "vllm", "version": "0.6.4.post1"},
                         "settings": {"num_scheduler_steps": 8}})
    f = _finding(check_stack(s, catalog, rules), "vllm-multistep-max-tokens-zero-crash")
    assert f.numbers == {"num_scheduler_steps": 8} and f.failure["reported_numbers"] == {"sampled_token_ids_rows": 27}


def test_vllm_8230_prefix_caching_055(catalog, rules):
    s = _command_stack(catalog, "vllm serve meta-llama/Llama-3.1-8B --enable-prefix-caching", "vllm", "0.5.5")
    f = _finding(check_stack(s, catalog, rules), "vllm-055-prefix-caching-illegal-memory-access")
    assert f.failure["affected"] == "==0.5.5" and f.failure["outcome"] == "crash"


def test_trtllm_2543_lora_no_kv_cache(catalog, rules):
    s = _stack(catalog, {"model": "meta-llama/Llama-3.1-8B", "engine": {"name": "trtllm", "version": "0.15.0"},
                         "techniques": ["multi-lora-serving"], "settings": {"kv_cache_type": "disabled", "quantization": "awq"}})
    f = _finding(check_stack(s, catalog, rules), "trtllm-lora-without-kv-cache-segfault")
    assert f.failure["reported_numbers"] == {"weight_bits": 4}


def test_every_runtime_failure_rule_has_a_reporter_test(runtime_rules):
    """Each gathered failure is also a test above, built from the reporter's stack (rule id named in a test)."""
    src = Path(__file__).read_text()
    untested = [r.id for r in runtime_rules if f'"{r.id}"' not in src]
    assert not untested, untested
