"""A lookup in a module's constant table of names, and getattr by the name it gives, as rows.

0.34.0 config/engram.py:16-20 maps an architecture to the config.json field naming its n-gram layers
(``_NGRAM_LAYER_FIELDS``); verify_model_config (:77-94) and model_has_engram_layers (:23-30) read
``field = _NGRAM_LAYER_FIELDS.get(model_config.architecture)`` and then ``getattr(model_config.hf_text_config, field,
None)``. The walk had no value for either.

1. ``NAME.get(key[, default])`` where NAME is a module-level dict literal of string keys and string values (at most
   MAX_KEYS) and not a local: the conditional ``'v1' if key == 'k1' else 'v2' if key == 'k2' ... else default``, walked
   as if the source said so (so the key's comparison is the walk's own: the architecture is ``vllm_model__arch``).
2. ``getattr(obj, name, default)`` where name's value came from 1: one ``getattr`` per value the table holds, chosen
   by the same comparison, else the default.
"""
from __future__ import annotations

import ast
import copy
from typing import Any

import checkgen as cg

MAX_KEYS = 16


def _table(w: Any, name: str, path: str) -> list[tuple[str, str]] | None:
    m = w.modules.get(path)
    if m is None:
        return None
    for s in m.tree.body:
        target = s.targets[0] if isinstance(s, ast.Assign) and len(s.targets) == 1 else (
            s.target if isinstance(s, ast.AnnAssign) else None)
        if isinstance(target, ast.Name) and target.id == name and isinstance(s.value, ast.Dict):
            pairs = list(zip(s.value.keys, s.value.values))
            if 0 < len(pairs) <= MAX_KEYS and all(
                    isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Constant)
                    and isinstance(v.value, str) for k, v in pairs):
                return [(k.value, v.value) for k, v in pairs]
            return None
    return None


def _leaves(w: Any, text: str) -> list[str] | None:
    """The attribute names a value may be: the string results of a conditional (``'a' if c else 'b' if d else
    '__none__'``, a let resolved), None where a result is anything else."""
    lets = dict(w.lets)
    out: set[str] = set()

    def walk(n: ast.AST, depth: int) -> bool:
        if depth > 8:
            return False
        if isinstance(n, ast.IfExp):
            return walk(n.body, depth + 1) and walk(n.orelse, depth + 1)
        if isinstance(n, ast.Name) and n.id in lets:
            return walk(ast.parse(lets[n.id], mode="eval").body, depth + 1)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
            out.add(n.value)
            return True
        return isinstance(n, ast.Constant) and n.value == "__none__"

    try:
        ok = walk(ast.parse(text, mode="eval").body, 0)
    except SyntaxError:
        return None
    return sorted(out - {"__none__"}) if ok and out - {"__none__"} else None


def value_hook(w: Any, node: ast.AST, fr: cg.Frame, pc: list[str]) -> Any:
    if not isinstance(node, ast.Call) or node.keywords:
        return None
    f = node.func
    if (isinstance(f, ast.Attribute) and f.attr == "get" and isinstance(f.value, ast.Name) and 1 <= len(node.args) <= 2
            and f.value.id not in fr.locals):
        table = _table(w, f.value.id, fr.path)
        if table is None:
            return None
        chain: ast.expr = node.args[1] if len(node.args) == 2 else ast.Constant(None)
        for k, v in reversed(table):
            test = ast.Compare(copy.deepcopy(node.args[0]), [ast.Eq()], [ast.Constant(k)])
            chain = ast.IfExp(test, ast.Constant(v), chain)
        try:
            got = w.value(ast.fix_missing_locations(ast.copy_location(chain, node)), fr, pc)
        except cg.Untranslatable:
            return None
        return got
    if (isinstance(f, ast.Name) and f.id == "getattr" and len(node.args) == 3
            and not isinstance(node.args[1], ast.Constant)):
        try:
            name = w.value(node.args[1], fr, pc)
        except cg.Untranslatable:
            return None
        values = _leaves(w, name.text) if isinstance(name, cg.Expr) else None
        if not values:
            return None
        try:
            text = w.text(node.args[2], fr, pc)
            for v in reversed(values):
                one = w.value(ast.Call(ast.Name("getattr", ast.Load()),
                                       [node.args[0], ast.Constant(v), node.args[2]], []), fr, pc)
                if not isinstance(one, cg.Expr):
                    return None
                text = f"({w.as_text(one)} if {name.text} == {v!r} else {text})"
        except cg.Untranslatable:
            return None
        return w.bind(text)
    return None
