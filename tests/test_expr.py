"""The safe expression language of rule conditions."""
import pytest

from kg.engine.expr import ExprError, ExprTypeError, MissingFact, evaluate, names_in


def test_arithmetic_and_logic():
    f = {"tp_size": 8, "num_key_value_heads": 4, "attention": "gqa", "sizes": [1, 2]}
    assert evaluate("tp_size > num_key_value_heads and attention != 'mla'", f) is True
    assert evaluate("tp_size // num_key_value_heads", f) == 2
    assert evaluate("2 in sizes and 4 not in sizes", f) is True
    assert evaluate("divisors(28)", {}) == [1, 2, 4, 7, 14, 28]
    assert evaluate("1 < tp_size <= 8", f) is True
    assert evaluate("'x' if tp_size > 4 else 'y'", f) == "x"
    assert names_in("has('a') and tp_size > n") == {"tp_size", "n"}


@pytest.mark.parametrize("text", ["__import__('os')", "a.b", "x[0]", "[i for i in y]", "lambda: 1", "open('f')"])
def test_rejects(text):
    with pytest.raises(ExprError):
        evaluate(text, {"a": 1, "x": [1], "y": [1]})


def test_missing_and_types():
    with pytest.raises(MissingFact) as e:
        evaluate("tp_size > 1", {})
    assert e.value.name == "tp_size"
    with pytest.raises(ExprTypeError):
        evaluate("tp > 4", {"tp": "8"})  # durable would match "8" > 4; we refuse
