"""A generated check row missing a name it always reads is counted as not evaluable without being run
(kg.analyses.enginechecks._always_read): the skip must agree with what evaluating the row would do, or a
refusal would be lost. The names are worked out by hand from kg.engine.expr._eval's order of evaluation."""
from __future__ import annotations

import ast

import pytest

from kg.analyses.enginechecks import _always_read, check_rows, load_sites, sites_dir
from kg.engine.expr import MissingFact, evaluate
from kg.frameworks.checkrows import FUNCTIONS

CASES = [
    ("a and b", {"a"}),  # `and` reads its second operand only when the first is true
    ("a or b or c", {"a"}),
    ("a < b < c", {"a", "b"}),  # a chain stops at the first false comparison
    ("x if c else y", {"c"}),
    ("truthy(a) + b * -c", {"a", "b", "c"}),  # arithmetic and a call's arguments: every operand
    ("not (a in (b, 'k', [d]))", {"a", "b", "d"}),
    ("True and false or None", set()),  # constants, not facts
    ("__unknown__ if p == '__none__' else q", {"p"}),
]


@pytest.mark.parametrize("text,names", CASES)
def test_names_a_row_always_reads(text, names):
    assert _always_read(ast.parse(text, mode="eval")) == names


@pytest.mark.parametrize("text,names", CASES)
def test_a_missing_always_read_name_makes_the_row_raise_missing_fact(text, names):
    every = {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}
    for gone in names:
        facts = {n: 1 for n in every if n != gone}
        with pytest.raises(MissingFact):
            evaluate(text, facts, FUNCTIONS)


def test_shipped_rows_carry_the_names_they_always_read():
    t = check_rows(sites_dir() / "vllm-0.34.0.yaml")
    d = load_sites(sites_dir() / "vllm-0.34.0.yaml")
    assert t["release"] == "0.34.0"
    assert [r["id"] for r in t["rows"]] == [s["id"] for s in d["sites"] if s["class"] == "table" and s.get("expr")]
    lets = {x[0] for x in t["lets"]}
    for r in t["rows"]:
        names = _always_read(ast.parse(r["expr"].strip(), mode="eval"))
        assert (set(r["needs"]), set(r["needs_lets"])) == (names - lets, names & lets)
