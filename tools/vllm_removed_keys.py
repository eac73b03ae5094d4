"""Removed JSON keys a config class refuses in a ``@model_validator(mode="before")`` (0.34.0
vllm/config/pooler.py:125-135, 0.33.0 :126-136, PoolerConfig.reject_removed_parameters):

    values = data.kwargs if isinstance(data, ArgsKwargs) else data
    if not isinstance(values, dict): return data
    if "normalize" in values: raise ValueError("Parameter `normalize` was removed; ...")

The walk runs single-field before-validators only (tools/vllm_generated_checks.py new_dataclass), so this reads the
validator's own ``if "<key>" in values: raise ...`` statements and records each as a site over the JSON key's input
(``pooler_config__normalize``, default None: the key given at all is the refusal, whatever its value). Other
statements of the validator (``check_removed_pooling_task``) are not read; nothing is given for another shape.
"""
from __future__ import annotations

import ast
from typing import Any

import checkgen as cg

NONE = cg.NONE
JSON_FIELD = "{field}__{key}"


def _removed_keys(fn: ast.FunctionDef) -> list[tuple[str, int]]:
    """(key, raise line) of ``if "<key>" in values: raise ValueError(...)`` where ``values`` is the validator's
    data (``values = data.kwargs if ... else data`` then ``if not isinstance(values, dict): return data``)."""
    params = [a.arg for a in fn.args.args]
    if len(params) != 2 or params[0] != "cls":
        return []
    data = params[1]
    body = fn.body
    if len(body) < 3 or not (isinstance(body[0], ast.Assign) and len(body[0].targets) == 1
                             and isinstance(body[0].targets[0], ast.Name)):
        return []
    values = body[0].targets[0].id
    if ast.unparse(body[0].value) != f"{data}.kwargs if isinstance({data}, ArgsKwargs) else {data}":
        return []
    if ast.unparse(body[1]) != f"if not isinstance({values}, dict):\n    return {data}":
        return []
    out = []
    for st in body[2:]:
        if (isinstance(st, ast.If) and not st.orelse and len(st.body) == 1 and isinstance(st.body[0], ast.Raise)
                and isinstance(st.test, ast.Compare) and len(st.test.ops) == 1 and isinstance(st.test.ops[0], ast.In)
                and isinstance(st.test.left, ast.Constant) and isinstance(st.test.left.value, str)
                and isinstance(st.test.comparators[0], ast.Name) and st.test.comparators[0].id == values):
            out.append((st.test.left.value, st.body[0].lineno))
    return out


def removed_keys_walk(w: Any, cls: str, hit: tuple, spread: list, pc: list[str], mode_of: dict) -> None:
    """Record the removed-key refusals of ``cls``'s ``@model_validator(mode="before")`` methods for the user's JSON
    object among ``spread`` (label ``json:<option field>``); nothing without one."""
    raw = next((o for o in spread if isinstance(o, cg.Obj) and o.label.startswith("json:")), None)
    if raw is None:
        return
    field = raw.label.split(":", 1)[1]
    if "__" in field:
        return  # a nested config's JSON: not read here
    for name, (vfields, mode) in mode_of.items():
        if mode != "before" or vfields:
            continue
        m = w.find_method(cls, name, hit[1])
        if m is None:
            continue
        for key, line in _removed_keys(m[0]):
            inp = JSON_FIELD.format(field=field, key=key)
            w.inputs.add(inp)
            w.input_info.setdefault(inp, {"kind": "json", "option": field, "key": key, "cls": cls,
                                          "default": NONE})
            w.site(m[1], line, list(pc) + [f"({inp} != {NONE!r})"])
