"""Catalog couplings compiled into check rules (issue 12, step 3): one source of truth.

- every checkable coupling has a generated rule carrying its mechanism, dimensions, severity, sources;
- generated fixtures (witnesses of each rule's condition) fire / do not fire through the real engine;
- hand-written fire/pass pairs per coupling kind (rules/fixtures/couplings/) on real stacks;
- refines: a hand rule replaces the coupling's generated rule; validate flags disagreement;
- done-when: DeepSpeed ZeRO-2 + PP errors naming both techniques with the coupling's source, ZeRO-1 does
  not; speculative decoding with --max-num-seqs 256 fires its coupling.
"""
import json
from pathlib import Path

import pytest

from conftest import REPO
from kg.analyses.fixtures import run_case
from kg.engine.fixtures import load_fixture_cases
from kg.engine.rules import RuleSet, evaluate_rules
from kg.knowledge.couplings import (check_ruleset, compile_coupling, generated_fixtures, iter_couplings,
                                    refine_problems)


@pytest.fixture(scope="module")
def combined(catalog, check_rules):
    return check_ruleset(catalog, check_rules)


@pytest.fixture(scope="module")
def generated(combined):
    return RuleSet("check", [r for r in combined.rules if r.coupling], {})


def test_every_checkable_coupling_has_a_rule(catalog, check_rules, combined):
    refined = {ref for r in check_rules.rules for ref in r.refines}
    by_ref = {r.coupling: r for r in combined.rules if r.coupling}
    n = 0
    for cp in iter_couplings(catalog):
        r = compile_coupling(cp, catalog)
        if r is None:  # unconditional effect on a property (nothing to check) or a self-coupling
            assert (not cp.condition and (cp.target is None or cp.kind in ("causes", "amplifies", "mitigates",
                                                                         "replaces"))) or cp.target == cp.technique
            continue
        n += 1
        if cp.ref in refined:
            assert cp.ref not in by_ref  # the hand rule is the check
            continue
        g = by_ref[cp.ref]
        assert g.mechanism and g.sources == cp.data["sources"]
        assert (g.from_dimension, g.cost_dimension) == (cp.data["from_dimension"], cp.data["to_dimension"])
        assert g.severity == cp.data.get("severity", "info")
        assert g.techniques[0] == cp.technique
    assert n == len(by_ref) + len(refined)


def _run_generated(generated, case):
    facts = [{"kind": "stack", "engine": case.engine or "unknown"}]
    facts += [{"kind": "technique", "technique": t} for t in case.techniques]
    ns = {**case.facts, "techniques": case.techniques}
    return next(f for f in evaluate_rules(generated, facts, ns, None, case.engine, None) if f.rule.id == case.rule_id)


def test_generated_fixtures_fire_and_pass(generated):
    bad = []
    for r in generated.rules:
        cases = generated_fixtures(r)
        if [c.expect_fire for c in cases] != [True, False]:
            bad.append(f"{r.id}: no fixtures from its condition {r.condition!r}")
            continue
        for c in cases:
            f = _run_generated(generated, c)
            if f.fired != c.expect_fire:
                bad.append(f"{r.id} {c.name}: {f.outcome} ({f.reason}) with {c.facts}")
    assert not bad, bad


HAND = load_fixture_cases(REPO / "rules" / "fixtures" / "couplings")


def test_a_hand_written_pair_per_coupling_kind(combined):
    kinds = set()
    for c in HAND:
        r = combined.by_id(c.rule)
        kinds.add((r.tags[1], c.expect_fire))
    want = {(k, b) for k in ("conflicts_with", "requires", "causes", "amplifies", "mitigates", "replaces")
            for b in (True, False)}
    assert want <= kinds


@pytest.mark.parametrize("case", HAND, ids=lambda c: f"{c.rule}:{'fire' if c.expect_fire else 'pass'}:{c.name}")
def test_hand_written_coupling_fixture(case, catalog, combined):
    ok, detail = run_case(case, catalog, combined)
    assert ok, f"{case.name}: {getattr(detail, 'outcome', '')} {getattr(detail, 'reason', detail)}"


def test_refining_rules_agree_with_their_couplings(catalog, check_rules):
    assert refine_problems(catalog, check_rules) == []
    kvh = check_rules.by_id("kv-head-replication")
    assert kvh.refines == ["tensor-parallelism/causes/kv_head_replication"]


def test_validate_flags_a_rule_that_disagrees_with_its_coupling(catalog, check_rules):
    import dataclasses
    r = dataclasses.replace(check_rules.by_id("kv-head-replication"), severity="error")
    lost = dataclasses.replace(check_rules.by_id("kv-head-replication"), refines=["tensor-parallelism/causes/nothing"])
    probs = refine_problems(catalog, RuleSet("check", [r, lost], {}))
    msgs = [p.message for p in probs]
    assert any("is an error but the coupling 'tensor-parallelism/causes/kv_head_replication' it refines is warning" in m
               for m in msgs), msgs
    assert any("refines 'tensor-parallelism/causes/nothing', which is no catalog coupling" in m for m in msgs), msgs
    assert all(p.code == "rule-refines" for p in probs)


def test_deepspeed_zero2_with_pipeline_parallelism(cli, tmp_path, catalog, check_rules):
    # the coupling rule through kg.check (check_stack); `optkg check FILE` routes framework stacks to the
    # training report, which runs the coupling rules too, with deepspeed-zero-with-pipeline-engine refining this
    # coupling (tests/test_training_couplings.py)
    from kg.analyses.check import check_stack
    from kg.inputs.stack import load_stack_file
    f = tmp_path / "ds.yaml"
    f.write_text("model: meta-llama/Meta-Llama-3.1-8B\nframework: deepspeed\n"
                 "techniques: [zero-2, {pipeline-parallelism: {pp_size: 4}}, {data-parallelism: {dp_size: 2}}]\n")
    d = check_stack(load_stack_file(f, catalog), catalog, check_rules).to_dict()
    fs = {x["rule_id"]: x for x in d["findings"]}
    hit = fs["coupling-zero-2-conflicts-with-pipeline-parallelism"]
    assert hit["severity"] == "error" and hit["techniques"] == ["zero-2", "pipeline-parallelism"]
    assert hit["coupling"] == "zero-2/conflicts_with/pipeline-parallelism"
    assert hit["sources"][0]["url"] == "https://github.com/deepspeedai/DeepSpeed/blob/master/deepspeed/runtime/pipe/engine.py"
    f.write_text(f.read_text().replace("zero-2", "zero-1"))
    d = check_stack(load_stack_file(f, catalog), catalog, check_rules).to_dict()
    assert not [x for x in d["findings"] if x["severity"] == "error"]
    code, out, _ = cli("check", str(f))
    assert "ERROR" not in out
    f.write_text(f.read_text().replace("zero-1", "zero-2"))
    code, out, _ = cli("check", str(f))
    assert code == 1 and "ZeRO-2" in out and "pipeline" in out


def test_speculative_decoding_with_256_sequences(cli):
    cmd = ("vllm serve meta-llama/Meta-Llama-3.1-8B --speculative-config "
           "'{\"method\": \"ngram\", \"num_speculative_tokens\": 4}' --max-num-seqs {n}")
    _, out, _ = cli("check", "--vllm", cmd.replace("{n}", "256"), "--format", "json")
    ids = {x["rule_id"] for x in json.loads(out)["findings"]}
    assert "coupling-speculative-decoding-conflicts-with-larger-batch-size" in ids
    _, out, _ = cli("check", "--vllm", cmd.replace("{n}", "32"), "--format", "json")
    ids = {x["rule_id"] for x in json.loads(out)["findings"]}
    assert "coupling-speculative-decoding-conflicts-with-larger-batch-size" not in ids
