"""The durable-rules wrapper: structural matching, isolation between calls, partitioning, type safety."""
import resource

import pytest

from kg.engine.durable import CompiledRules


def test_match_and_isolation():
    rules = [("both", [{"kind": "technique", "technique": "tp"}, {"kind": "model", "attention": "gqa"}]),
             ("stack", [{"kind": "stack"}])]
    cr = CompiledRules(rules, "t1")
    a = [{"kind": "stack"}, {"kind": "technique", "technique": "tp"}, {"kind": "model", "attention": "gqa"}]
    b = [{"kind": "stack"}, {"kind": "model", "attention": "gqa"}]
    ra = cr.match(a)
    assert [r for r, _ in ra] == ["both", "stack"]
    assert [r for r, _ in cr.match(b)] == ["stack"]   # nothing left over from the previous call
    assert cr.match(a) == ra


def test_types_do_not_mix():
    cr = CompiledRules([("eight", [{"kind": "x", "n": 8}])], "t2")
    assert cr.match([{"kind": "x", "n": "8"}]) == []
    assert len(cr.match([{"kind": "x", "n": 8}])) == 1
    assert cr.match([{"kind": "x", "n": True}]) == []


def test_partitioning_at_scale_and_flat_memory():
    # 600 rules -> 15 rulesets of 40; 300 hanging off one shared condition (above durable's 64/257 limits per ruleset)
    rules = [(f"r{i}", [{"kind": "technique", "technique": f"t{i % 30}"}, {"kind": "stack"}]) for i in range(600)]
    cr = CompiledRules(rules, "t3")
    facts = [{"kind": "stack"}] + [{"kind": "technique", "technique": f"t{j}"} for j in range(0, 30, 3)]
    first = cr.match(facts)
    assert len(first) == 200  # 10 of 30 techniques present -> 600 / 3
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(100):
        assert cr.match(facts) == first
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0 < 20_000  # KiB


def _rules_and_facts():
    rules = [("both", [{"kind": "technique", "technique": "tp"}, {"kind": "model", "attention": "gqa"}]),
             ("stack", [{"kind": "stack"}]), ("mla", [{"kind": "model", "attention": "mla"}])]
    facts = [{"kind": "stack"}, {"kind": "technique", "technique": "tp"}, {"kind": "model", "attention": "gqa"}]
    return rules, facts


def test_a_later_process_reads_the_kept_matches_without_registering_rulesets(monkeypatch):
    """``compiled_rules(...).match`` keeps its answer per list of facts in the cache: the same rules in a fresh
    process (a new compiled object) answer those facts from it, equal, without durable-rules."""
    from kg.engine import durable
    rules, facts = _rules_and_facts()
    monkeypatch.setattr(durable, "_registry", {})
    first = durable.compiled_rules(rules, "kept1").match(facts)
    assert first == [("both", [facts[1], facts[2]]), ("stack", [facts[0]])]
    monkeypatch.setattr(durable, "_registry", {})  # as a new process has it
    again = durable.compiled_rules(rules, "kept1")

    def no_durable(self):
        raise AssertionError("registered with durable-rules")
    monkeypatch.setattr(durable.CompiledRules, "_register", no_durable)
    assert again.match(facts) == first
    other = [{"kind": "model", "attention": "mla"}]  # other facts: not kept, so computed
    with pytest.raises(AssertionError, match="registered"):
        again.match(other)


def test_kept_matches_naming_a_rule_or_fact_not_there_are_computed_again(monkeypatch):
    from kg.core import cache
    from kg.engine import durable
    rules, facts = _rules_and_facts()
    monkeypatch.setattr(durable, "_registry", {})
    cr = durable.compiled_rules(rules, "kept2")
    path, key = cr._entry(facts)
    for bad in ([["nosuch", [0]]], [["stack", [7]]], [["stack", ["0"]]], {"stack": [0]}):
        assert cache.write_data(path, "rule-matches", key, bad)
        assert cr._kept_matches(facts) is None
        assert cr.match(facts) == [("both", [facts[1], facts[2]]), ("stack", [facts[0]])]
