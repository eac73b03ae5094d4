"""Every rule in rules/ ships fixtures that must fire and fixtures that must not, checked both ways."""
from collections import defaultdict

import pytest

from kg.analyses.fixtures import run_case
from kg.engine.fixtures import load_fixture_cases
from kg.engine.rules import RULESET_KINDS, load_rules

CASES = load_fixture_cases()


@pytest.fixture(scope="module")
def rulesets():
    out = {}
    for kind in RULESET_KINDS:
        rs, problems = load_rules(kind)
        assert not problems, [p.one_line() for p in problems]
        out[kind] = rs
    return out


def _kind_of(rulesets, rule_id):
    for kind, rs in rulesets.items():
        if any(r.id == rule_id for r in rs.rules):
            return rs
    raise AssertionError(f"fixture for unknown rule {rule_id}")


def test_every_rule_has_both_kinds_of_fixture(rulesets):
    have = defaultdict(set)
    for c in CASES:
        have[c.rule].add(c.expect_fire)
    missing = [r.id for rs in rulesets.values() for r in rs.rules if have.get(r.id) != {True, False}]
    assert not missing, f"rules without must-fire and must-not-fire fixtures: {missing}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.rule}:{'fire' if c.expect_fire else 'pass'}:{c.name}")
def test_fixture(case, catalog, rulesets):
    ok, detail = run_case(case, catalog, _kind_of(rulesets, case.rule))
    assert ok, f"{case.file}: {case.name}: {getattr(detail, 'reason', detail)} " \
               f"severity={getattr(detail, 'severity', None)} numbers={getattr(detail, 'numbers', None)}"
