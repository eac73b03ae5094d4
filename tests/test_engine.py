"""The durable-rules wrapper: structural matching, isolation between calls, partitioning, type safety."""
import resource

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
