"""``optkg matrix`` and ``optkg check`` agree by construction (issue 12): every ❌ and conditional cell
names a rule of the check ruleset; the smallest stack the cell's condition describes makes check fire
that rule, and a stack that violates the condition does not; every check rule relating two techniques
appears in the matrix."""
import pytest

from kg.analyses.check import _functions, stack_facts
from kg.analyses.matrix import compatibility_matrix
from kg.engine.rules import evaluate_rules
from kg.engine.witness import witness
from kg.inputs.modelcfg import resolve_model
from kg.inputs.stack import Stack
from kg.knowledge.couplings import check_ruleset

RELEASES = {"vllm": ["0.4.0", "0.5.0", "0.6.4", "0.7.3", "0.8.2", "0.9.2", "0.10.2", "0.11.0", "0.12.0", "0.33.0"],
            "sglang": ["0.4.0", "0.5.5", "0.5.23"], "trtllm": ["0.20.0"]}


@pytest.fixture(scope="module")
def combined(catalog, check_rules):
    return check_ruleset(catalog, check_rules)


@pytest.fixture(scope="module")
def matrix(catalog, combined):
    return compatibility_matrix(catalog, combined)


def _release(engine, spec):
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version
    if not spec:
        return None
    from kg.inputs.effective import known_releases
    spec_set = SpecifierSet(spec)
    # the release lists as data (catalog/engines/releases/), plus a few for engines without a table
    return next(v for v in known_releases(engine) + RELEASES.get(engine, []) if Version(v) in spec_set)


# the smallest real model whose shape the rule's model pattern describes (bundled configs)
MODEL_FOR = [("has_sliding_window", True, "google/gemma-2-9b-it"), ("attention", "mla", "deepseek-ai/DeepSeek-V3"),
             ("is_moe", True, "Qwen/Qwen3-30B-A3B")]


def _model_for(rule):
    for p in rule.match:
        for key, value, model in MODEL_FOR:
            if p.get("kind") == "model" and p.get(key) == value:
                return model
    return "meta-llama/Meta-Llama-3.1-8B"


def _outcome(rule, combined, techniques, want):
    """Check a stack holding ``techniques`` whose facts satisfy (``want`` True) or violate the rule's condition."""
    engine = (rule.applies_to.get("engines") or [None])[0]
    # without a condition, a model pattern is what the rule asks of the stack: violate it with a model lacking it
    shaped = want or bool(rule.condition)
    st = Stack(name="smallest", model=resolve_model(_model_for(rule) if shaped else "meta-llama/Meta-Llama-3.1-8B"),
               engine=engine,
               engine_version=_release(engine, rule.applies_to.get("versions")) if engine else None)
    for t in techniques:
        st.techniques[t] = {}
    facts, ns = stack_facts(st)
    for p in rule.match:  # model-shaped patterns (has_sliding_window: true, attention: mla) describe the model
        if p.get("kind") == "model" and shaped:
            next(f for f in facts if f["kind"] == "model").update(p)
            ns.update({k: v for k, v in p.items() if k != "kind"})
    if rule.condition:
        w = witness(rule.condition, want, functions=_functions(st))
        if w is None:
            return None
        ns.update(w)
    firing = evaluate_rules(combined, facts, ns, _functions(st), st.engine, st.engine_version)
    return next(f for f in firing if f.rule.id == rule.id)


def test_every_cell_names_a_check_rule(matrix, combined):
    ids = {r.id for r in combined.rules}
    assert matrix["cells"], "empty matrix"
    assert [c for c in matrix["cells"] if c["rule"] not in ids] == []


def test_every_cell_fires_in_check_and_not_when_violated(matrix, combined):
    bad = []
    for c in matrix["cells"]:
        r = combined.by_id(c["rule"])
        techs = [p["technique"] for p in r.match if p.get("kind") == "technique"]
        if "requires" not in r.tags:
            techs += [t for t in r.involves if t not in techs]
        fired = _outcome(r, combined, techs, True)
        if fired is None or not fired.fired:
            bad.append(f"{c['a']} x {c['b']} [{r.id}]: {getattr(fired, 'outcome', 'no witness')} "
                       f"{getattr(fired, 'reason', '')}")
            continue
        if r.condition:
            held = _outcome(r, combined, techs, False)
        elif any(p.get("kind") == "model" and len(p) > 1 for p in r.match):  # the model pattern is the condition
            held = _outcome(r, combined, techs, False)
        elif "requires" in r.tags:  # unconditional requires: the stack that holds the target satisfies it
            held = _outcome(r, combined, techs + r.involves, False)
        else:  # unconditional conflict: the stack without the second technique
            held = _outcome(r, combined, techs[:1], False)
        if held is not None and held.fired:
            bad.append(f"{c['a']} x {c['b']} [{r.id}]: fires on a stack that violates its condition")
    assert not bad, "\n".join(bad)


def test_every_two_technique_check_rule_is_in_the_matrix(matrix, combined, catalog):
    pairs = {(c["a"], c["b"]) for c in matrix["cells"]}
    missing = []
    for r in combined.rules:
        sevs = {r.severity} | {b["severity"] for b in r.severity_bands}
        if sevs <= {None, "info", "none"}:
            continue
        if r.coupling and r.tags[1] not in ("conflicts_with", "requires"):
            continue  # effects (causes, mitigates, ...) are not compatibility: the matrix lists conflicts
        if r.coupling and r.tags[1] == "requires" and not catalog.techniques[r.techniques[0]]:
            continue
        techs = [catalog.resolve(t) or t for t in r.techniques]
        if len(techs) < 2:
            continue
        if r.coupling and r.tags[1] == "requires" and "and not (" not in (r.condition or ""):
            continue  # an unconditional requires is compatibility, not a cell (kg.analyses.matrix)
        for other in techs[1:]:
            if tuple(sorted((techs[0], other))) not in pairs:
                missing.append(f"{r.id}: {techs[0]} x {other}")
    assert not missing, missing
