"""Release scope and evidence of engine rules (kg/engine/scope.py), and the audit's stale rules on the newest releases."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from kg.analyses.fixtures import runner
from kg.engine.fixtures import load_fixture_cases
from kg.engine.rules import load_rules
from kg.engine.scope import PINNED_RELEASES, bounds, scope_problems

EV = {"package": "vllm", "release": "0.33.0", "path": "vllm/config/cache.py", "snippet": "gpu_memory_utilization"}


def ev(release: str, **kw):
    return {**EV, "release": release, **kw}


def test_rules_without_engines_need_nothing():
    assert scope_problems({}, []) == []
    assert scope_problems(None, None) == []
    # training frameworks in applies_to.engines are not serving engines (issue 16 scopes them)
    assert scope_problems({"engines": ["deepspeed"]}, []) == []


def test_missing_range_and_missing_evidence_are_both_named():
    got = scope_problems({"engines": ["vllm"]}, [])
    assert [f for f, _ in got] == ["evidence", "applies_to.versions"]


def test_lower_bound_required():
    got = scope_problems({"engines": ["vllm"], "versions": "<0.12.0"}, [ev("0.11.0")])
    assert got == [("applies_to.versions", "vllm range '<0.12.0' has no lower bound (the first release it holds for)")]


def test_open_range_must_be_checked_at_the_newest_release():
    got = scope_problems({"engines": ["vllm"], "versions": ">=0.10.2"}, [ev("0.12.0")])
    assert len(got) == 1 and "newest release" in got[0][1] and "0.34.0" in got[0][1]
    assert scope_problems({"engines": ["vllm"], "versions": ">=0.10.2"}, [ev("0.12.0"), ev("0.34.0")]) == []


def test_bounded_range_names_the_release_that_changed_it():
    assert bounds(">=0.10.2,<0.11.1") == (True, True)
    assert scope_problems({"engines": ["vllm"], "versions": ">=0.10.2,<0.11.1"}, [ev("0.11.0")]) == []


def test_evidence_outside_the_range_is_an_error_unless_it_shows_the_change():
    at = {"engines": ["vllm"], "versions": ">=0.10.2,<0.11.1"}
    got = scope_problems(at, [ev("0.11.0"), ev("0.12.0")])
    assert got == [("evidence", "evidence release 0.12.0 (vllm/config/cache.py) is outside vllm >=0.10.2,<0.11.1")]
    assert scope_problems(at, [ev("0.11.0"), ev("0.11.1", role="changed")]) == []
    inside = scope_problems(at, [ev("0.11.0"), ev("0.11.0", role="changed")])
    assert len(inside) == 1 and "role: changed" in inside[0][1]


def test_a_changed_item_does_not_count_as_checked_at_the_newest_release():
    got = scope_problems({"engines": ["vllm"], "versions": ">=0.10.2"}, [ev("0.12.0"), ev("0.34.0", role="changed")])
    assert len(got) == 2  # 0.34.0 marked changed lies inside the open range, and nothing holds at 0.34.0


def test_per_engine_ranges():
    at = {"engines": ["vllm", "sglang"], "versions": {"vllm": ">=0.10.2,<0.24.0", "sglang": ">=0.5.5"}}
    sg = {"package": "sglang", "release": "0.5.23", "path": "sglang/srt/x.py", "snippet": "abc"}
    assert scope_problems(at, [ev("0.23.0"), sg]) == []
    got = scope_problems(at, [ev("0.23.0")])
    assert got == [("evidence", "no evidence item from package 'sglang' for engine sglang")]
    extra = scope_problems({"engines": ["vllm"], "versions": {"vllm": ">=0.10.2", "trtllm": ">=1.0"}}, [ev("0.34.0")])
    assert extra == [("applies_to.versions", "ranges for engines not in applies_to.engines: trtllm")]


def test_load_rules_reports_file_line_and_field(tmp_path: Path):
    (tmp_path / "r.yaml").write_text(
        "ruleset: check\nrules:\n"
        "  - id: ok-rule\n    title: t\n    severity: error\n    applies_to: {engines: [vllm], versions: \">=0.10.2,<0.11.1\"}\n"
        "    evidence:\n      - {package: vllm, release: \"0.11.0\", path: vllm/a.py, snippet: \"abc\"}\n"
        "    match: [{kind: model}]\n    message: m\n    sources: [{title: s, url: \"https://x.org\"}]\n"
        "  - id: bad-rule\n    title: t\n    severity: error\n    applies_to: {engines: [vllm]}\n"
        "    match: [{kind: model}]\n    message: m\n    sources: [{title: s, url: \"https://x.org\"}]\n")
    rs, problems = load_rules("check", tmp_path)
    assert [r.id for r in rs.rules] == ["ok-rule", "bad-rule"]
    assert [(p.line, p.path, p.code) for p in problems] == [
        (12, "rules[1].evidence", "rule-scope"), (12, "rules[1].applies_to.versions", "rule-scope")]


def test_unpinned_fact_keeps_its_bounds_but_needs_no_evidence():
    # a rule no released source backs (evidence_unpinned): the lower bound is still required, evidence is not
    assert scope_problems({"engines": ["trtllm"], "versions": ">=0.16.0"}, [], unpinned=True) == []
    assert [f for f, _ in scope_problems({"engines": ["trtllm"], "versions": "<1.0"}, [], unpinned=True)] == ["applies_to.versions"]
    assert [f for f, _ in scope_problems({"engines": ["trtllm"], "versions": ">=0.16.0"}, [])] == ["evidence"]


def test_unpinned_rule_with_evidence_is_refused(tmp_path: Path):
    (tmp_path / "r.yaml").write_text(
        "ruleset: check\nrules:\n"
        "  - id: both\n    title: t\n    severity: error\n    applies_to: {engines: [vllm], versions: \">=0.10.2,<0.11.1\"}\n"
        "    evidence_unpinned: \"the wheel could not be downloaded from the index\"\n"
        "    evidence:\n      - {package: vllm, release: \"0.11.0\", path: vllm/a.py, snippet: \"abc\"}\n"
        "    match: [{kind: model}]\n    message: m\n    sources: [{title: s, url: \"https://x.org\"}]\n")
    _, problems = load_rules("check", tmp_path)
    assert [(p.path, p.code) for p in problems] == [("rules[0].evidence_unpinned", "rule-scope")]


# trtllm-drafter-with-pipeline-parallel: the TRT-LLM 1.2.x wheel is not reachable from here (cases lane, issue 27 class 4)
# trtllm-option-refused: the trtllm-serve option list is read at a TensorRT-LLM commit for the same reason
# trtllm-tp-not-divisible-by-ep: Mapping read at a TensorRT-LLM commit (05ebebb2), the same reason
UNPINNED = {"fp8-kv-cache-reuse-accuracy", "int8-kv-cache-reuse", "sglang-attention-backend-no-fp8-kv",
            "trtllm-drafter-with-pipeline-parallel", "trtllm-option-refused", "trtllm-tp-not-divisible-by-ep"}


def test_shipped_engine_rules_have_evidence_or_say_why_not():
    """No engine rule is left with evidence_todo: each carries wheel evidence, or evidence_unpinned saying why none."""
    from kg.engine.rules import RULESET_KINDS
    todo = []
    for kind in RULESET_KINDS:
        rs, problems = load_rules(kind)
        assert not problems, [p.one_line() for p in problems]
        todo += [r.id for r in rs.rules if r.evidence_todo]
    assert todo == [], f"rules still marked evidence_todo: {todo}"
    rs, _ = load_rules("check")
    engine_rules = [r for r in rs.rules if set((r.applies_to or {}).get("engines") or []) & set(PINNED_RELEASES)
                    and r.kind != "runtime-failure"]
    scoped = [r for r in engine_rules if r.evidence]
    unpinned = {r.id for r in engine_rules if r.evidence_unpinned}
    assert [r.id for r in engine_rules if not r.evidence and not r.evidence_unpinned] == []
    assert unpinned == UNPINNED
    assert len(scoped) >= 180, len(scoped)
    for r in scoped:
        assert all(e["release"] and e["snippet"] for e in r.evidence), r.id


def test_unpinned_rules_are_listed_as_unpinned_in_engine_checks_doc():
    text = (Path(__file__).resolve().parents[1] / "docs" / "engine-checks.md").read_text()
    section = text[text.index("## Engine rules without release evidence (unpinned)"):]
    assert f"{len(UNPINNED)} engine rule(s) rest on a public document or issue only" in section
    for rid in sorted(UNPINNED):
        assert f"[`{rid}`](rules.md#r-{rid})" in section


# The audit's stale rules: each rejected stacks on old releases that the newest release accepts. Every must-fire
# fixture case of these rules, moved to the newest pinned release of its engine, must not fire any more.
STALE = {
    "vllm": ["dcp-flashinfer-before-support", "dcp-attention-backend-no-lse-before-0-11", "dcp-attention-backend-no-lse-0-11-0",
             "dcp-attention-backend-no-lse-0-11-1", "dcp-attention-backend-no-lse-0-25", "marlin-shape-misaligned",
             "quantized-moe-kernel-misaligned", "fp8-block-moe-misaligned", "quantization-unsupported-on-gpu-before-0-14",
             "awq-requires-float16", "bnb-8bit-forces-eager", "prefix-caching-fp8-kv-v0", "eagle3-unsupported-target",
             "flashinfer-head-size-before-0-22", "flashmla-sparse-kv-dtype-before-0-18", "swap-space-exceeds-host-memory",
             "partial-prefills-without-chunked-prefill", "dcp-a2a-without-dcp", "pcp-with-data-parallel",
             "ep-experts-not-divisible",
             # vLLM 0.34.0 removed Model Runner V1, use_heterogeneous_vocab and the watermark x parallel drafting check
             "dynamic-spec-decode-method-on-v1-runner", "async-scheduling-speculative-method-v1-runner",
             "spec-heterogeneous-vocab-with-local-argmax", "watermark-with-parallel-drafting"],
    "sglang": ["sglang-trtllm-mha-requires-sm100", "sglang-eagle-topk-page-size-before-0-5-13",
               "sglang-fp4-kv-backend-before-0-5-20", "sglang-attention-backend-page-size-before-0-5-17",
               "sglang-dual-chunk-attention-disables-radix-cache"],
}
_ALL_CASES = load_fixture_cases()  # read once (it parses every rules/fixtures file; was once per engine)
STALE_CASES = [(eng, c) for eng, ids in STALE.items() for c in _ALL_CASES
               if c.rule in ids and c.expect_fire and isinstance(c.input, dict)
               and (c.input.get("engine") or {}).get("name") == eng
               # ep-experts-not-divisible stays for vLLM only with EPLB; its SGLang case keeps firing
               and not (c.rule == "ep-experts-not-divisible")]


@pytest.fixture(scope="module")
def check_rules():
    return load_rules("check")[0]


@pytest.mark.parametrize("eng,case", STALE_CASES, ids=lambda x: x if isinstance(x, str) else f"{x.rule}:{x.name[:50]}")
def test_stale_rule_does_not_fire_on_the_newest_release(eng, case, catalog, check_rules):
    rs = check_rules
    inp = copy.deepcopy(case.input)
    inp["engine"] = {"name": eng, "version": PINNED_RELEASES[eng]}
    firings = runner("check")(inp, catalog, rs, Path(case.file).parent)
    mine = [f for f in firings if f.rule.id == case.rule]
    assert mine and not mine[0].fired, mine[0].reason if mine else "rule missing"
    assert f"the stack runs {PINNED_RELEASES[eng]}" in mine[0].reason


def test_stale_cases_cover_every_stale_rule():
    covered = {c.rule for _, c in STALE_CASES}
    assert covered == {r for ids in STALE.values() for r in ids} - {"ep-experts-not-divisible"}


def test_uneven_expert_split_is_fine_on_vllm_without_eplb(catalog, check_rules):
    rs = check_rules
    base = {"model": "deepseek-ai/DeepSeek-V3", "engine": {"name": "vllm", "version": "0.33.0"},
            "techniques": [{"data-parallelism": {"dp_size": 3}}, "expert-parallelism"]}
    fx = Path(load_fixture_cases()[0].file).parent
    def fired(inp):
        return {f.rule.id for f in runner("check")(inp, catalog, rs, fx) if f.fired}
    assert "ep-experts-not-divisible" not in fired(base)  # 256 experts over 3 ranks: 86 / 85 / 85
    with_eplb = copy.deepcopy(base)
    with_eplb["techniques"].append("expert-load-balancing-eplb")
    assert "ep-experts-not-divisible" in fired(with_eplb)  # EPLB: "only supports even distribution"
