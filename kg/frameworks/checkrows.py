"""Evaluating a framework's generated check rows on a job (shared by the framework packages).

A generated row (``status: table`` in ``kg/frameworks/<name>/checks/<package>-<release>.yaml``, written by
tools/training_check_sites.py) carries ``expr``: the condition under which the framework's own code raises at that
``path:line``, over the framework's input names (Megatron-LM arguments, DeepSpeed JSON keys, dataclass fields).
A framework package builds the namespace of those names for a job (the values the job gives, then the release's
defaults) and calls ``findings``. A row is evaluated only when every name it reads has a value: a name the job
leaves open, or the ``__unknown__`` stand-in for a value the generator could not model on one side of a condition,
leaves the row not evaluated (never a guess). None is the sentinel ``'__none__'``.
"""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from kg.core.yamlio import load_yaml

NONE = "__none__"


def truthy(v: Any) -> bool:
    return v not in (NONE, None) and bool(v)


def is_a(v: Any, t: str) -> bool:
    """``isinstance(v, t)`` for the builtin type named ``t`` (the namespace holds plain data)."""
    if v in (NONE, None):
        return False
    kinds = {"int": int, "float": float, "str": str, "bool": bool, "list": (list, tuple), "tuple": (list, tuple),
             "dict": dict}
    if t not in kinds:
        raise ValueError(f"is_a: unknown type {t!r}")
    if t in ("int", "float") and isinstance(v, bool):
        return False
    return isinstance(v, kinds[t])


FUNCTIONS = {"truthy": truthy, "is_a": is_a}


@lru_cache(maxsize=32)
def table_rows(path: Path) -> tuple[dict[str, Any], ...]:
    """The generated rows of one check table, each with its package, release and table file name."""
    if not path.exists():
        return ()
    t = load_yaml(path).data
    return tuple({**s, "package": t["package"], "release": str(t["release"]), "table": path.name}
                 for s in t["sites"] if s["status"] == "table" and s.get("expr"))


@lru_cache(maxsize=4096)
def names_of(expr: str) -> tuple[str, ...]:
    tree = ast.parse(expr, mode="eval")
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return tuple(sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - calls - {"True", "False"}))


def findings(rows: Iterable[Mapping[str, Any]], ns: Mapping[str, Any], table_dir: Path) -> list[dict[str, Any]]:
    """The rows that fire on ``ns`` (None values read as the sentinel), with the framework's own message."""
    from kg.engine.expr import ExprError, ExprTypeError, MissingFact, evaluate
    facts = {k: (NONE if v is None else v) for k, v in ns.items()}
    out = []
    for r in rows:
        try:
            fired = evaluate(r["expr"], facts, FUNCTIONS)
        except (MissingFact, ExprTypeError, ExprError, ZeroDivisionError, TypeError, ValueError):
            continue
        if fired is True:
            vals = ", ".join(f"{n} = {None if facts[n] == NONE else facts[n]!r}" for n in names_of(r["expr"])
                             if n in facts)
            out.append({"rule_id": r["id"], "path": r["path"], "line": r["line"], "package": r["package"],
                        "release": r["release"], "message": r["message"] or r["condition"], "expr": r["expr"],
                        "values": vals, "table": str(table_dir / r["table"])})
    return out


def evaluable(rows: Iterable[Mapping[str, Any]], ns: Mapping[str, Any]) -> int:
    """How many rows have every name they read in ``ns`` (the rows a job could be checked against)."""
    return sum(1 for r in rows if all(n in ns for n in names_of(r["expr"])))
