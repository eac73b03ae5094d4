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


FUNCTIONS = {"truthy": truthy, "is_a": is_a, "upper": lambda v: str(v).upper(), "str": lambda v: str(v),
             "startswith": lambda v, p: isinstance(v, str) and v.startswith(p),
             "endswith": lambda v, p: isinstance(v, str) and v.endswith(p)}


@lru_cache(maxsize=32)
def _table(path: Path) -> dict[str, Any]:
    return load_yaml(path).data if path.exists() else {"sites": [], "lets": []}


def table_rows(path: Path) -> tuple[dict[str, Any], ...]:
    """The generated rows of one check table, each with its package, release, table file name and source URL."""
    t = _table(path)
    url = t.get("source_url", "")
    return tuple({**s, "package": t["package"], "release": str(t["release"]), "table": path.name,
                  "url": url.format(path=s["path"], line=s["line"])}
                 for s in t["sites"] if s["status"] == "table" and s.get("expr"))


def table_lets(path: Path) -> tuple[tuple[str, str], ...]:
    """The named intermediate values the table's rows read (``lets``), in definition order."""
    return tuple((x["name"], x["expr"]) for x in _table(path).get("lets") or [])


@lru_cache(maxsize=4096)
def names_of(expr: str) -> tuple[str, ...]:
    from kg.engine.expr import read_names
    tree = ast.parse(expr, mode="eval")
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return tuple(sorted(read_names(tree) - calls - {"True", "False"}))


def lets_read_by(names: Iterable[str], lets: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The lets ``names`` read, directly or through other lets, in definition order."""
    lets = list(lets)
    table = dict(lets)
    need: set[str] = set()
    todo = [n for n in names if n in table]
    while todo:
        n = todo.pop()
        if n not in need:
            need.add(n)
            todo += [m for m in names_of(table[n]) if m in table]
    return [(n, e) for n, e in lets if n in need]


def inputs(expr: str, lets: Iterable[tuple[str, str]]) -> list[str]:
    """The input names ``expr`` reads, through the lets it uses (for showing the values that made a row fire)."""
    table = dict(lets)
    out, todo, seen = [], list(names_of(expr)), set()
    while todo:
        n = todo.pop(0)
        if n in seen:
            continue
        seen.add(n)
        if n in table:
            todo += list(names_of(table[n]))
        else:
            out.append(n)
    return sorted(out)


def findings(rows: Iterable[Mapping[str, Any]], ns: Mapping[str, Any], table_dir: Path,
             lets: Iterable[tuple[str, str]] = ()) -> list[dict[str, Any]]:
    """The rows that fire on ``ns`` (None values read as the sentinel), with the framework's own message. ``ns``
    holds only what the job gives (absent names are not evaluated); ``lets`` are evaluated first, in order (a let
    that cannot be evaluated is left out, so the rows reading it are not evaluated either)."""
    from kg.engine.expr import ExprError, ExprTypeError, MissingFact, evaluate
    lets = list(lets)
    facts = {k: (NONE if v is None else v) for k, v in ns.items()}
    for name, expr in lets:
        try:
            facts[name] = evaluate(expr, facts, FUNCTIONS)
        except (MissingFact, ExprTypeError, ExprError, ZeroDivisionError, TypeError, ValueError):
            facts.pop(name, None)
    out = []
    for r in rows:
        try:
            fired = evaluate(r["expr"], facts, FUNCTIONS)
        except (MissingFact, ExprTypeError, ExprError, ZeroDivisionError, TypeError, ValueError):
            continue
        if fired is True:
            vals = ", ".join(f"{n} = {None if facts[n] == NONE else facts[n]!r}" for n in inputs(r["expr"], lets)
                             if n in facts and not (n.startswith("has__") and facts[n] is False))
            out.append({"rule_id": r["id"], "path": r["path"], "line": r["line"], "package": r["package"],
                        "release": r["release"], "message": r["message"] or r["condition"], "expr": r["expr"],
                        "values": vals, "table": str(table_dir / r["table"]), "url": r.get("url", "")})
    return out


def evaluable(rows: Iterable[Mapping[str, Any]], ns: Mapping[str, Any]) -> int:
    """How many rows have every name they read in ``ns`` (the rows a job could be checked against)."""
    return sum(1 for r in rows if all(n in ns for n in names_of(r["expr"])))


TRUE, FALSE = ("yes", "true", "t", "y", "1"), ("no", "false", "f", "n", "0")


def argument_value(raw: Any, typ: str) -> Any:
    """A flag's raw value as HfArgumentParser converts it (transformers hf_argparser.py: string_to_bool for bools,
    the annotated type for numbers); a bare switch is True. A value that does not convert is returned as given."""
    if raw is True:
        return True if typ == "bool" else None
    if not isinstance(raw, str):
        return raw
    if typ == "bool":
        low = raw.lower()
        return True if low in TRUE else False if low in FALSE else raw
    if typ in ("int", "float"):
        try:
            return int(raw) if typ == "int" else float(raw)
        except ValueError:
            return None if raw == "None" else raw
    if typ == "list":
        return raw.split(",") if "," in raw else [raw]
    return None if raw == "None" else raw


def dataclass_namespace(given: Mapping[str, Any], fields: Mapping[str, Mapping[str, Any]], prefix: str
                        ) -> dict[str, Any]:
    """``<prefix>__<field>`` for every field of an argument dataclass: the value the job gives, else the field's
    literal default (a field with neither is left out: rows reading it are not evaluated)."""
    ns: dict[str, Any] = {}
    for name, spec in fields.items():
        if name in given:
            ns[f"{prefix}__{name}"] = argument_value(given[name], spec.get("type", "str"))
        elif "default" in spec:
            ns[f"{prefix}__{name}"] = spec["default"]
    return ns


def unknown_keys_finding(bad: list[list[str]], what: str, *, rule_id: str, package: str, release: str, path: str,
                         line: int, values: str, expr: str, url: str, table: str, hint: str = "") -> list[dict[str, Any]]:
    """One finding for the keys a framework refuses at startup (``bad``: [where, nearest known key or ""]), each
    "<where> is not <what> (did you mean <near>?)", in the shape of ``findings``; [] when there are none."""
    if not bad:
        return []
    message = "; ".join(f"{where} is not {what}" + (f" (did you mean {near}?)" if near else "") for where, near in bad) \
        + "; this report reads the job without " + ("it" if len(bad) == 1 else "them") + hint
    return [{"rule_id": rule_id, "package": package, "release": release, "path": path, "line": line,
             "message": message, "values": values, "expr": expr, "url": url, "table": table}]
