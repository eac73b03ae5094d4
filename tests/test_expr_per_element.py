"""kg.engine.expr per element: ``any(... for x in L)`` / ``all(...)`` over a list with the helpers vLLM's per-element
checks need (keys / values / items of a mapping, consecutive pairs, one element, finiteness, a string's parts, the
distinct elements), bounded (MAX_ITEMS elements, MAX_LOOPS nested) and never naming a bound element as a fact."""
from __future__ import annotations

import pytest

from kg.engine.expr import (MAX_ITEMS, ExprError, ExprTypeError, MissingFact, compiled, evaluate, names_in,
                            tree_json)
from kg.frameworks.checkrows import FUNCTIONS, names_of

# compilation.py:1164-1165 (0.34.0): an entry of custom_ops that is not 'all' / 'none' / '+op' / '-op'
CUSTOM_OPS = ("any(_e1 not in ('all', 'none') and (len(_e1) < 2 or item(_e1, 0) not in ('+', '-')) "
              "for _e1 in custom_ops)")
# observability.py:203-204: a bucket list that is not strictly increasing
INCREASING = "any(any(_e2_0 >= _e2_1 for _e2_0, _e2_1 in pairs(_e1_1)) for _e1_0, _e1_1 in items(buckets))"


def test_any_over_a_list_fires_on_the_first_element_that_meets_the_condition():
    assert evaluate(CUSTOM_OPS, {"custom_ops": ["+rms_norm", "-silu_and_mul", "none"]}) is False
    assert evaluate(CUSTOM_OPS, {"custom_ops": ["+rms_norm", "rms_norm"]}) is True  # no +/- prefix
    assert evaluate(CUSTOM_OPS, {"custom_ops": ["+"]}) is True  # too short
    assert evaluate(CUSTOM_OPS, {"custom_ops": []}) is False


def test_nested_any_over_a_mappings_values_reads_consecutive_pairs():
    assert evaluate(INCREASING, {"buckets": {"time_to_first_token": [0.1, 0.5, 2.0]}}) is False
    assert evaluate(INCREASING, {"buckets": {"time_to_first_token": [0.1, 0.5], "request_latency": [1.0, 1.0]}}) is True
    assert evaluate("all(x > 0 for x in values(d))", {"d": {"a": 1, "b": 2}}) is True
    assert evaluate("all(x > 0 for x in values(d))", {"d": {"a": 1, "b": 0}}) is False
    assert evaluate("any(k not in ('a', 'b') for k in keys(d))", {"d": {"a": 1, "c": 2}}) is True
    assert evaluate("any(x > 1 for x in L if x != 5)", {"L": [1, 5]}) is False


def test_the_helpers_give_exact_values():
    assert evaluate("split(s, ',')", {"s": "0-3,8"}) == ["0-3", "8"]
    assert evaluate("split(s, '-', 1)", {"s": "0-3-5"}) == ["0", "3-5"]
    assert evaluate("unique(L)", {"L": [3, 1, 3, 1.0]}) == [3, 1]  # 1 and 1.0 are one, as in a Python set
    assert evaluate("len(unique(L)) != len(L)", {"L": ["0", "0"]}) is True
    assert evaluate("isfinite(x)", {"x": float("inf")}) is False
    assert evaluate("item(L, -1)", {"L": [4, 8]}) == 8
    assert evaluate("L + ['+rotary_embedding']", {"L": ["none"]}) == ["none", "+rotary_embedding"]
    assert evaluate("pairs(L)", {"L": [1, 2, 3]}) == [[1, 2], [2, 3]]


def test_a_bound_element_is_not_a_fact_the_row_needs():
    assert names_in(INCREASING) == frozenset({"buckets"})
    assert names_of(CUSTOM_OPS) == ("custom_ops",)
    with pytest.raises(MissingFact) as e:
        evaluate(CUSTOM_OPS, {})
    assert e.value.name == "custom_ops"


def test_a_checked_tree_of_a_generator_evaluates_like_the_text():
    import json
    calls, tree = json.loads(tree_json(CUSTOM_OPS))
    assert calls == ["any", "item", "len"] and tree[:3] == ["gen", "any", "_e1"]
    fn = compiled(CUSTOM_OPS, tuple(FUNCTIONS))
    assert fn({"custom_ops": ["bad"]}, {**__import__("kg.engine.expr", fromlist=["FUNCTIONS"]).FUNCTIONS,
                                         **FUNCTIONS}) is True


@pytest.mark.parametrize("text, why", [
    ("(x for x in L)", "only as the one argument of any(), all() or select()"),
    ("max(x for x in L)", "only as the one argument of any(), all() or select()"),
    ("any(x for x in L for y in L)", "one 'for'"),
    ("any(any(any(z for z in L) for y in L) for x in L)", "nest deeper than 2"),
    ("any(x.a for x in L)", "'Attribute' is not allowed"),
    ("[x for x in L]", "'ListComp' is not allowed"),
    ("any(x for x, (y, z) in L)", "name or a tuple of names"),
])
def test_a_generator_outside_the_allowed_form_is_refused_when_loaded(text, why):
    with pytest.raises(ExprError) as e:
        evaluate(text, {"L": [1]})
    assert why in str(e.value)


def test_select_keeps_the_values_of_the_elements_its_filters_keep():
    # compilation.py:1172-1181 (0.34.0): the base modes of custom_ops, and the ops both enabled and disabled
    ops = {"custom_ops": ["all", "+rms_norm", "-rms_norm", "+silu_and_mul", "none"]}
    assert evaluate("select(o for o in custom_ops if o in ('all', 'none'))", ops) == ["all", "none"]
    enabled = "unique(select(tail(o, 1) for o in custom_ops if startswith(o, '+')))"
    disabled = "unique(select(tail(o, 1) for o in custom_ops if startswith(o, '-')))"
    both = f"sorted(unique(select(x for x in {enabled} if x in {disabled})))"
    assert evaluate(both, ops, FUNCTIONS) == ["rms_norm"]
    assert compiled(both, tuple(FUNCTIONS))(ops, {**__import__("kg.engine.expr", fromlist=["FUNCTIONS"]).FUNCTIONS,
                                                  **FUNCTIONS}) == ["rms_norm"]  # the built closures agree
    assert evaluate("select(x * 2 for x in L)", {"L": [3, 1]}) == [6, 2]
    assert evaluate("select(x for x in L if x > 5)", {"L": [3, 1]}) == []
    assert evaluate("sorted(L)", {"L": [8, 1, 4]}) == [1, 4, 8]
    assert evaluate("tail(s, 1)", {"s": "+rms_norm"}) == "rms_norm"
    assert names_in("select(x for x in L if x > m)") == {"L", "m"}  # x is bound, not a fact
    with pytest.raises(ExprTypeError, match="sorted: cannot order"):
        evaluate("sorted(L)", {"L": [1, "a"]})
    with pytest.raises(ExprTypeError, match="tail: cannot slice"):
        evaluate("tail(s, 1)", {"s": 3})


def test_a_list_over_the_limit_or_not_a_list_is_an_error_not_a_guess():
    with pytest.raises(ExprTypeError, match=f"over {MAX_ITEMS + 1} elements; the limit is {MAX_ITEMS}"):
        evaluate("any(x < 0 for x in L)", {"L": list(range(MAX_ITEMS + 1))})
    with pytest.raises(ExprTypeError, match="any needs a list, found 3"):
        evaluate("any(x < 0 for x in L)", {"L": 3})
    with pytest.raises(ExprTypeError, match="cannot unpack 1 into a, b"):
        evaluate("any(a < b for a, b in L)", {"L": [1]})
    with pytest.raises(ExprTypeError, match="items needs a mapping"):
        evaluate("any(v for k, v in items(L))", {"L": [1]})


def test_bitwise_and_of_integers_tells_a_power_of_two():
    # quantization.py:142 (0.34.0): hadamard_size & (hadamard_size - 1) is 0 only for a power of two
    assert evaluate("x & (x - 1)", {"x": 48}) == 32
    assert evaluate("x & (x - 1)", {"x": 32}) == 0
    with pytest.raises(ExprTypeError, match="& needs two integers"):
        evaluate("x & 1", {"x": 1.5})
