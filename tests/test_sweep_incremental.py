"""A sweep keeps the results of rules and generated engine-check rows whose inputs did not change since an earlier
stack (kg.engine.incremental): every stack's check report must equal the one a fresh evaluation gives.

Small real sweeps (the shipped catalog and rules): Qwen3-235B-A22B on vLLM with TP x DCP x KV dtype x PP, and
DeepSeek-V3 with expert parallelism over TP x DP x KV dtype (MLA, experts: other rules fire), on 16 H200.
"""
from __future__ import annotations

import pytest

from kg.analyses.sweep import build_plan
from kg.analyses.sweep_eval import Evaluator
from kg.engine.incremental import freeze, same
from sweep_reports import incremental_and_fresh

# make test (xdist --dist loadgroup) runs this module's tests on one worker:
# each sweep's reports (a module fixture per sweep) are built once
pytestmark = pytest.mark.xdist_group("sweep-incremental")

SWEEPS = {
    "qwen3-235b": ("vllm serve Qwen/Qwen3-235B-A22B --max-model-len 32768",
                   {"tp_size": [1, 2, 3, 8], "dcp_size": [1, 2, 4], "kv_cache_dtype": ["auto", "fp8"],
                    "pp_size": [1, 2]}),
    "deepseek-v3-ep": ("vllm serve deepseek-ai/DeepSeek-V3 --enable-expert-parallel",
                       {"tp_size": [4, 8, 16], "dp_size": [1, 2], "kv_cache_dtype": ["auto", "fp8"]}),
    # speculative decoding: 35 vLLM 0.34.0 rows ask `'speculative-decoding' in techniques` while TP and the KV dtype
    # change the technique set (kg.analyses.enginerows keys those rows on that answer, not the whole list)
    "qwen3-32b-ngram": ("vllm serve Qwen/Qwen3-32B --max-model-len 8192 --speculative-config "
                        "'{\"method\": \"ngram\", \"num_speculative_tokens\": 3, \"prompt_lookup_max\": 4}'",
                        {"tp_size": [1, 3, 8], "kv_cache_dtype": ["auto", "fp8"], "dcp_size": [1, 2]}),
}


@pytest.fixture(scope="module", params=sorted(SWEEPS))
def reports(request, catalog, check_rules):
    """(incremental reports, fresh reports) of every combination, in sweep order."""
    cmd, axes = SWEEPS[request.param]
    return incremental_and_fresh(catalog, check_rules, cmd, axes, 16)


def test_incremental_sweep_reports_equal_fresh_ones(reports):
    inc, fresh = reports
    assert len(inc) == len(fresh) >= 12
    for a, b in zip(inc, fresh):
        assert a["findings"] == b["findings"]  # rule, severity, message, numbers, facts, in order
        assert a == b  # and everything else: not fired (with reasons), not evaluable, derived, check rows


def test_the_sweeps_exercise_changing_findings(reports):
    """The comparison means something: findings differ between the sweep's stacks and some rule fires."""
    inc, _ = reports
    kinds = {tuple(f["rule_id"] for f in r["findings"]) for r in inc}
    assert len(kinds) > 3 and any(kinds)


def test_values_of_other_types_are_not_the_same():
    assert not same(1, True) and not same(1, 1.0) and not same(0.0, -0.0) and not same([1], [True])
    assert same([1, "a", {"x": 2.5}], [1, "a", {"x": 2.5}]) and same(None, None)
    assert freeze(1) != freeze(True) and freeze(0.0) != freeze(-0.0) and freeze([1, 2]) == freeze([1, 2])
    assert freeze({"a": [1]}) != freeze({"a": (1,)})


def test_incremental_combinations_equal_ones_from_fresh_reports(catalog, check_rules):
    """A sweep keeps only each combination's findings and KV numbers, without writing the whole check report
    (kg.analyses.check.check_parts): the rows equal those read from fresh, whole reports."""
    from kg.engines.launch import parse_command
    for cmd, axes in SWEEPS.values():
        base = parse_command(cmd, catalog, "vllm")
        base.hardware, base.gpu_count = catalog.resolve_hardware("H200"), 16
        plan = build_plan(base, catalog, axes)
        inc, fresh = Evaluator(plan, catalog, check_rules), Evaluator(plan, catalog, check_rules, incremental=False)
        rows = [inc.evaluate(i) for i in range(plan.size())]
        assert rows == [fresh.evaluate(i) for i in range(plan.size())]
        assert {r["valid"] for r in rows} == {True, False} and any(r["findings"] for r in rows)


def test_a_new_technique_sets_first_stack_keeps_firings_only_where_matches_and_values_are_the_same():
    """A technique set's first stack keeps the Firings of the stack before it (another set's ruleset sharing the rule
    objects, kg.knowledge.couplings.ruleset_for) for the rules whose read values and engine matches are the same
    (kg.engine.incremental.RuleState.seeds): a rule whose technique is now among the facts is run again though
    nothing it reads changed, as is one whose value changed."""
    from kg.engine.incremental import Session, use
    from kg.engine.rules import Rule, RuleSet, evaluate_rules

    def rule(rid, match, condition):
        return Rule(id=rid, ruleset="check", title=rid, match=match, message="m", severity="warning",
                    sources=[{"title": "t", "url": "https://example.org"}], condition=condition)
    lora, wide, dcp = (rule("lora-with-tp", [{"kind": "technique", "technique": "lora"}], "tp_size > 1"),
                       rule("wide-tp", [{"kind": "model"}], "tp_size > 4"),
                       rule("dcp-on", [{"kind": "model"}], "dcp_size > 1"))
    plain, with_lora = RuleSet("check", [lora, wide, dcp], {}), RuleSet("check", [lora, wide, dcp], {})
    facts = [{"kind": "stack", "engine": "vllm"}, {"kind": "model", "attention": "gqa"}]
    lora_facts = facts + [{"kind": "technique", "technique": "lora"}]
    session = Session()
    with use(session):
        before = evaluate_rules(plain, facts, {"tp_size": 8, "dcp_size": 1}, engine="vllm")
        after = evaluate_rules(with_lora, lora_facts, {"tp_size": 8, "dcp_size": 2}, engine="vllm")
    fresh = evaluate_rules(with_lora, lora_facts, {"tp_size": 8, "dcp_size": 2}, engine="vllm")
    assert [f.outcome for f in before] == ["not_applicable", "fired", "held"]
    assert [f.outcome for f in after] == [f.outcome for f in fresh] == ["fired", "fired", "fired"]
    assert after[1] is before[1]  # kept, not run again


def test_a_technique_sets_first_stack_keeps_firings_by_rule_across_rulesets_in_another_order_or_over_another_model():
    """RuleState.seeds pairs the rules of two rulesets by rule object whatever their order or other rules (its pair
    plan is kept per pair of rule lists), and a rule whose matched fact has other values (the facts are compared by
    their numbers) is run again: the model fact's attention changes, nothing a rule reads does."""
    from kg.engine.incremental import Session, use
    from kg.engine.rules import Rule, RuleSet, evaluate_rules

    def rule(rid, match, condition):
        return Rule(id=rid, ruleset="check", title=rid, match=match, message="m", severity="warning",
                    sources=[{"title": "t", "url": "https://example.org"}], condition=condition)
    lora, wide, dcp = (rule("lora-rank", [{"kind": "technique", "technique": "lora"}], "lora_rank > 8"),
                       rule("wide-tp", [{"kind": "model"}], "tp_size > 4"),
                       rule("dcp-on", [{"kind": "model"}], "dcp_size > 1"))
    first, second, third = RuleSet("check", [wide, dcp], {}), RuleSet("check", [lora, dcp, wide], {}), \
        RuleSet("check", [dcp, wide], {})
    facts = [{"kind": "stack", "engine": "vllm"}, {"kind": "model", "attention": "gqa"}]
    lora_facts = facts + [{"kind": "technique", "technique": "lora"}]
    mla_facts = [facts[0], {"kind": "model", "attention": "mla"}]
    ns = {"tp_size": 8, "dcp_size": 2, "lora_rank": 16}
    session = Session()
    with use(session):
        a = evaluate_rules(first, facts, ns, engine="vllm")
        b = evaluate_rules(second, lora_facts, ns, engine="vllm")
        c = evaluate_rules(third, mla_facts, ns, engine="vllm")
    assert [f.outcome for f in a] == ["fired", "fired"]
    assert [f.outcome for f in b] == ["fired", "fired", "fired"]
    assert b[2] is a[0] and b[1] is a[1]  # wide-tp and dcp-on kept from the first set, at their places in the second
    assert [f.facts for f in c] == [[{"kind": "model", "attention": "mla"}]] * 2  # run again on the MLA model
    assert [f.facts for f in c] == [f.facts for f in evaluate_rules(third, mla_facts, ns, engine="vllm")]
