"""A stack's generated check rows share their lets (kg.analyses.enginerows._SharedLets): a let is evaluated once per
values of the names it reads, not once per row reading it, and every row's outcome and refusal are those of
evaluating each row's lets on its own."""
from __future__ import annotations

import contextlib
import io
import json

import pytest

from kg.analyses import enginerows

COMMANDS = [
    ["check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8 --max-model-len 32768 --kv-cache-dtype fp8"],
    ["check", "--vllm", "vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --enable-expert-parallel --max-num-seqs 512"],
]


def _rows(argv):
    from kg.cli import main
    with contextlib.redirect_stdout(io.StringIO()) as out:
        main([*argv, "--format", "json", "--fail-on", "never"])
    return json.loads(out.getvalue())  # the whole report: findings (the refusals among them), notes, outcomes


@pytest.mark.parametrize("argv", COMMANDS, ids=["qwen3-fp8", "dsv3-ep"])
def test_shared_let_values_give_each_row_what_its_own_lets_give(monkeypatch, argv):
    shared = _rows(argv)
    evaluated: list[str] = []
    real = enginerows._LetValues.value

    def counting(self, name, expr, facts):
        evaluated.append(name)
        return real(self, name, expr, facts)
    monkeypatch.setattr(enginerows._LetValues, "value", counting)
    assert _rows(argv) == shared
    assert evaluated  # the rows read lets through the shared values

    def alone(self, name, expr, facts):  # each row's lets evaluated on its own facts, as before sharing
        from kg.engine.expr import ExprTypeError, MissingFact, evaluate
        from kg.frameworks.checkrows import FUNCTIONS
        try:
            return evaluate(expr, facts, FUNCTIONS)
        except (MissingFact, ExprTypeError, TypeError, ValueError, ZeroDivisionError):
            return enginerows._FAILED
    monkeypatch.setattr(enginerows._SharedLets, "value", alone)
    assert _rows(argv) == shared


def test_a_sweep_row_evaluates_only_the_lets_its_expression_reaches(monkeypatch):
    """kg.analyses.enginerows._row_lazy: a let is evaluated when the row's expression reaches it (``and`` stops at a
    false flag), a let it reads (defined before it) first; on the next stack only the lets reading a changed value
    run again; each outcome is row_outcome's (every let first)."""
    lets = {"_v0": ["_v0", "a * 2", ["a"], []], "_v1": ["_v1", "_v0 + b", ["b"], ["_v0"]]}
    row = {"expr": "flag and _v1 > 5", "needs": ["flag"], "needs_lets": [], "lets": ["_v0", "_v1"]}
    values = enginerows._LetValues(lets, {"_v0": ("a",), "_v1": ("_v0", "b")})
    ran: list[str] = []
    real = enginerows._LetValues.value
    monkeypatch.setattr(enginerows._LetValues, "value", lambda self, n, e, f: ran.append(n) or real(self, n, e, f))
    last = [None]
    stacks = [({"flag": False, "a": 2, "b": 3}, 1, []),        # the flag decides: no let evaluated
              ({"flag": True, "a": 2, "b": 3}, 2, ["_v0", "_v1"]),  # 2 * 2 + 3 = 7 > 5: refused
              ({"flag": True, "a": 2, "b": 0}, 1, ["_v1"]),        # b changed: _v0 kept, 4 + 0 = 4
              ({"flag": True, "a": 2}, 0, [])]                     # b missing: _v1 fails, not evaluable
    for facts, outcome, lets_run in stacks:
        ran.clear()
        assert enginerows._row_lazy(row, dict(facts), values, last, 0) == outcome
        assert ran == lets_run
        assert enginerows.row_outcome(row, lets, dict(facts)) == outcome
