"""Checked expression trees from the cache (kg.engine.exprtrees): an expression built from its cached tree evaluates
exactly as the parsed text does, a tree is used only where every function it calls is allowed, and a warm check
parses none of its rules' and rows' expressions again."""
from __future__ import annotations

import json

import pytest

from kg.engine import expr, exprtrees

FNS = {**expr.FUNCTIONS, "has": lambda t: t == "tp", "truthy": lambda v: bool(v) and v != "__none__"}
TEXTS = ["a and not b", "x ** 2 + y ** -3", "min(a, b) >= 8 or c in ('x', 'y')", "has('tp') if p else q",
         "-(a % 4) // 2 != 0", "{1, 2} and [3] and (4,)", "1 < a <= 3 < b", "a / b", "true or a", "False and a",
         "x == 1.0", "x == True", "s + 'k'", "-s", "truthy(s) and lower(s) == 'ab'", "None if a else 2.5e3",
         # one-operator comparisons and literals of constants (kg.engine.exprcmp): 1, 1.0 and True are equal members,
         # a list is looked for in a list literal and is unhashable for a set literal, orderings check their types
         "x in [1, 'x', None]", "x not in (1.0,)", "c in {1, 'x'}", "a >= b", "s < 'b'", "[1, 'x'] + [c]"]
FACTS = [{"a": 1, "b": 2, "c": "x", "p": True, "q": 0, "x": 1, "y": 2, "s": "AB"},
         {"a": 2, "b": 0, "c": "z", "p": False, "q": None, "x": True, "y": 1.0, "s": 3},
         {"a": "1", "b": 5, "x": 1.0}, {}, {"a": [1], "b": 1, "c": [1], "s": "a", "x": [2]}]


def _outcome(fn, facts):
    try:
        v = fn(facts, FNS)
        return "value", type(v).__name__, v
    except (expr.MissingFact, expr.ExprTypeError, ZeroDivisionError, TypeError) as e:
        return "error", type(e).__name__, str(e)


@pytest.mark.parametrize("text", TEXTS)
def test_a_closure_built_from_the_cached_tree_evaluates_as_the_parsed_text_does(text):
    names = ("has", "truthy")
    tree = expr.tree_json(text)
    assert tree is not None
    calls, body = json.loads(tree)
    from_tree = expr._build(body)
    parsed = expr._build(expr.plain(expr.compile_expr(text, names).body))
    for facts in FACTS:
        assert _outcome(from_tree, facts) == _outcome(parsed, facts), (text, facts)


def test_constants_keep_their_types_and_a_constant_json_cannot_hold_has_no_tree():
    assert json.loads(expr.tree_json("x == 1.0"))[1] == ["cmp", ["n", "x"], [["Eq", ["c", 1.0]]]]
    assert type(json.loads(expr.tree_json("x == 1.0"))[1][2][0][1][1]) is float
    assert json.loads(expr.tree_json("x != True"))[1] == ["cmp", ["n", "x"], [["NotEq", ["c", True]]]]
    assert expr.tree_json("x == 1j") is None and expr.tree_json("x == b'1'") is None  # complex, bytes
    assert expr.tree_json("x.y") is None and expr.tree_json("(") is None  # not the language / not parsed


def test_a_tree_is_used_only_where_every_function_it_calls_is_allowed(monkeypatch):
    text = "has('tp') and optkg_tree_probe > 1"
    monkeypatch.setattr(expr, "_TREES", {text: expr.tree_json(text)})
    expr.compiled.cache_clear()
    try:
        with pytest.raises(expr.ExprError, match="function 'has' is not allowed"):
            expr.compiled(text)  # ``has`` is not allowed here: parsed and refused as without the tree
        assert expr.compiled(text, ("has",))({"optkg_tree_probe": 2}, FNS) is True
    finally:
        expr.compiled.cache_clear()


def test_a_warm_check_parses_none_of_its_rules_and_rows_expressions(monkeypatch):
    from kg.cli import main
    import contextlib
    import io
    example = ["check", "examples/qwen3-235b-tp8.yaml", "--fail-on", "never"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(example) == 0  # fills this session's cache (if no test did)
    parsed: list[str] = []
    real = expr.compile_expr

    def counting(text, extra=()):
        parsed.append(text)
        return real(text, extra)
    monkeypatch.setattr(expr, "compile_expr", counting)
    monkeypatch.setattr(expr, "_TREES", {})
    monkeypatch.setattr(exprtrees, "_DONE", set())
    expr.compiled.cache_clear()
    try:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            assert main(example) == 0
        assert "1 finding(s)" in out.getvalue()
        assert len(expr._TREES) > 200  # the rules' and the release rows' trees were read from the cache
        assert [t for t in parsed if t in expr._TREES] == []  # and none of those texts was parsed
    finally:
        expr.compiled.cache_clear()


@pytest.mark.parametrize("text", TEXTS)
def test_the_first_evaluation_walking_the_tree_gives_what_the_closures_give(text):
    calls, body = json.loads(expr.tree_json(text))
    built = expr._build(body)
    for facts in FACTS:
        assert _outcome(lambda f, fns: expr._run(body, f, fns), facts) == _outcome(built, facts), (text, facts)


def test_a_text_is_walked_on_its_first_evaluation_and_runs_built_closures_from_its_second(monkeypatch):
    text = "optkg_lazy_probe * 2 > 3"
    builds: list[list] = []
    real = expr._build

    def counting(p):
        builds.append(p)
        return real(p)
    monkeypatch.setattr(expr, "_build", counting)
    expr.compiled.cache_clear()
    try:
        assert expr.evaluate(text, {"optkg_lazy_probe": 1}) is False and builds == []
        assert expr.evaluate(text, {"optkg_lazy_probe": 2}) is True and len(builds) > 0
        n = len(builds)
        assert expr.evaluate(text, {"optkg_lazy_probe": 3}) is True and len(builds) == n  # built once
        assert expr.compiled(text) is expr._BUILT[(text, ())]  # later callers get the closures themselves
    finally:
        expr.compiled.cache_clear()


def compare_every_evaluation_of_one_check() -> int:
    """Run one check in this process, recording each (expression, facts) it evaluates, and compare the tree walk
    with the closures on each; returns how many were compared. Meant for a fresh process (the test below): an
    earlier check in the same process keeps row lets, rule memos and kept matches, and evaluates far fewer."""
    from kg.cli import main
    import contextlib
    import io
    import sys
    seen: list[tuple[str, dict, dict]] = []
    real = expr.evaluate

    def recording(text, facts, functions=None):
        seen.append((text, dict(facts) if isinstance(facts, dict) else facts, functions))
        return real(text, facts, functions)
    expr.evaluate = recording
    for mod in list(sys.modules.values()):  # modules that bound the function by name (from ... import evaluate)
        if getattr(mod, "__name__", "").startswith("kg.") and getattr(mod, "evaluate", None) is real:
            mod.evaluate = recording
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8 --max-model-len 32768", "--fail-on",
                     "never", "--explain"]) == 0
    outcomes = set()
    for text, facts, functions in seen:
        fns, names = expr._merged(functions)
        known = expr._TREES.get(text)
        body = json.loads(known)[1] if known else expr.plain(expr.compile_expr(text, names).body)

        def outcome(fn):
            try:
                return "value", fn()
            except (expr.MissingFact, expr.ExprTypeError, expr.ExprError, ZeroDivisionError, TypeError,
                    ValueError) as e:
                return "error", type(e).__name__, str(e)
        walked = outcome(lambda: expr._run(body, facts, fns))
        assert walked == outcome(lambda: expr._build(body)(facts, fns)), text
        outcomes.add(walked[0])
    assert outcomes == {"value", "error"}  # both kinds were compared
    return len(seen)


def test_every_evaluation_of_a_check_walking_the_tree_gives_what_the_closures_give(cache_dir):
    """Each (expression, facts) a check evaluates (rules, the release's generated rows and their lets, the
    report's numbers): the tree walk and the closures return the same value or raise the same error. In a fresh
    process with a cache folder of its own, so that no earlier check's kept results stand in for evaluations."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    here = Path(__file__).resolve().parent
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import test_expr_trees as t; "
            "print(t.compare_every_evaluation_of_one_check())")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parent), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", code, str(here)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert int(r.stdout.split()[-1]) > 200  # 284-371 at 78e25f1 (the rows share their lets: 606 before)
