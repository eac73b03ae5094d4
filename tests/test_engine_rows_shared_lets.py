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
