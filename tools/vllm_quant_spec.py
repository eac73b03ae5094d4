"""The ``--quantization-config`` ``linear`` / ``moe`` specs in vLLM's generated rows: the online shorthand and
quantization-key names (0.33.0 / 0.34.0 vllm/config/quantization.py).

``QuantizationConfigArgs`` (built from the JSON by ``resolve_quantization_config``, which EngineArgs.__post_init__
calls: 0.34.0 engine/arg_utils.py:929-932) runs ``_coerce_spec`` on ``linear`` and ``moe`` (``@field_validator(
"linear", "moe", mode="before")``: the walk runs single-field before-validators only). For a field ``F`` given as:

- a string ``v`` that names an online shorthand (``_ONLINE_SHORTHANDS``): ``getattr(shorthand, F)``; a shorthand
  built without ``F`` (``QuantizationConfigArgs(moe=...)``) leaves it None, refused ("online shorthand does not
  define a F spec", 0.34.0 :210-215);
- any other string: ``QuantSpec(weight=_coerce_quant_key(v))``: a name not in ``QUANT_KEY_NAMES`` is refused
  (``except KeyError``, :74-80);
- a JSON object: pydantic builds the ``QuantSpec`` from it; its ``QuantKeyField`` fields (``weight``,
  ``activation``: ``GetPydanticSchema`` plain validator ``_coerce_quant_key``, :85-91, :116-119) refuse a value
  that is not a string, None or a QuantKey (a JSON number, list, object or boolean: TypeError, :72-73) and a string
  not in ``QUANT_KEY_NAMES`` (:77).

The names and which fields each shorthand builds are read from the module's own dict literals (so a release that
adds one changes the rows); nothing is written when the functions do not have the shape read here. The rows hold
where ``--quantization-config`` is given (a JSON object: arg_utils.py parses it, :1001).
"""
from __future__ import annotations

import ast
from typing import Any

import checkgen as cg

QUANT_PATH = "vllm/config/quantization.py"
NONE = cg.NONE


def _dict_literal(tree: ast.Module, name: str) -> ast.Dict | None:
    for s in tree.body:
        target = s.targets[0] if isinstance(s, ast.Assign) and len(s.targets) == 1 else \
            s.target if isinstance(s, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == name and isinstance(s.value, ast.Dict):
            return s.value
    return None


def _keys(d: ast.Dict) -> list[str] | None:
    out = [k.value for k in d.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return out if len(out) == len(d.keys) else None


def _func(tree: ast.Module, name: str, cls: str | None = None) -> ast.FunctionDef | None:
    body = tree.body
    if cls is not None:
        c = next((s for s in body if isinstance(s, ast.ClassDef) and s.name == cls), None)
        body = c.body if c else []
    return next((s for s in body if isinstance(s, ast.FunctionDef) and s.name == name), None)


def _raise_lines(f: ast.FunctionDef) -> list[tuple[int, str, bool]]:
    """(line, exception name, inside an except handler) of every raise in ``f``."""
    out = []
    handlers = {id(n) for h in ast.walk(f) if isinstance(h, ast.ExceptHandler) for n in ast.walk(h)}
    for n in ast.walk(f):
        if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call):
            out.append((n.lineno, ast.unparse(n.exc.func), id(n) in handlers))
    return sorted(out)


def read(tree: ast.Module) -> dict[str, Any] | None:
    """What the rows need from quantization.py's tree (its own line numbers), or None when it does not have the
    shape the module doc reads."""
    shorthands, names = _dict_literal(tree, "_ONLINE_SHORTHANDS"), _dict_literal(tree, "QUANT_KEY_NAMES")
    coerce_key, coerce_spec = _func(tree, "_coerce_quant_key"), _func(tree, "_coerce_spec", "QuantizationConfigArgs")
    if None in (shorthands, names, coerce_key, coerce_spec) or _keys(shorthands) is None or _keys(names) is None:
        return None
    builds: dict[str, set[str]] = {}
    for k, v in zip(_keys(shorthands), shorthands.values):
        if not (isinstance(v, ast.Call) and ast.unparse(v.func) == "QuantizationConfigArgs" and not v.args):
            return None
        builds[k] = {kw.arg for kw in v.keywords if kw.arg}
    key_raises, spec_raises = _raise_lines(coerce_key), _raise_lines(coerce_spec)
    # _coerce_quant_key: TypeError (not a str), then ValueError in the KeyError handler; _coerce_spec: one ValueError
    if [(e, h) for _, e, h in key_raises] != [("TypeError", False), ("ValueError", True)] or \
            [(e, h) for _, e, h in spec_raises] != [("ValueError", False)]:
        return None
    text = ast.unparse(coerce_spec)
    if "_ONLINE_SHORTHANDS[v]" not in text or "_coerce_quant_key(v)" not in text or "info.field_name" not in text:
        return None
    fields = next((list(d.args) for d in coerce_spec.decorator_list if isinstance(d, ast.Call)
                   and ast.unparse(d.func).endswith("field_validator")), [])
    fields = [a.value for a in fields if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    spec = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == "QuantSpec"), None)
    key_fields = [s.target.id for s in (spec.body if spec else []) if isinstance(s, ast.AnnAssign)
                  and isinstance(s.target, ast.Name) and ast.unparse(s.annotation) == "QuantKeyField"]
    alias = next((s for s in tree.body if isinstance(s, ast.Assign) and len(s.targets) == 1
                  and ast.unparse(s.targets[0]) == "QuantKeyField"), None)
    if not fields or not key_fields or alias is None or "_coerce_quant_key" not in ast.unparse(alias.value):
        return None
    # a QuantSpec before-validator of a key field that maps names of another module dict first (0.34.0 :133-138
    # _coerce_weight_quant_key: ``weight`` also takes _WEIGHT_QUANT_KEY_NAMES): those names pass too
    extra: dict[str, list[str]] = {k: [] for k in key_fields}
    for f in (s for s in spec.body if isinstance(s, ast.FunctionDef)):
        deco = [d for d in f.decorator_list if isinstance(d, ast.Call) and ast.unparse(d.func).endswith("field_validator")]
        for d in deco:
            mode = {k.arg: k.value for k in d.keywords}.get("mode")
            targets = [a.value for a in d.args if isinstance(a, ast.Constant)]
            if not (isinstance(mode, ast.Constant) and mode.value == "before"):
                continue
            used = {n.id for n in ast.walk(f) if isinstance(n, ast.Name)}
            for t in targets:
                if t not in key_fields:
                    continue
                for u in sorted(used - {"QUANT_KEY_NAMES"}):
                    d2 = _dict_literal(tree, u)
                    if d2 is None or _keys(d2) is None:
                        if u.isupper() or u.startswith("_") and u[1:].isupper():
                            return None  # a module table the reading cannot list
                        continue
                    extra[t] += _keys(d2)
    return {"shorthands": builds, "names": _keys(names), "fields": fields, "key_fields": key_fields, "extra": extra,
            "not_str": key_raises[0][0], "unknown": key_raises[1][0], "no_spec": spec_raises[0][0]}


def quant_spec_walk(w: Any, args: cg.Obj) -> None:
    """Record the three sites' rows (module doc) for the stack's ``--quantization-config`` ``linear`` / ``moe``."""
    m = w.modules.get(QUANT_PATH)
    got = read(m.tree) if m is not None else None
    raw = args.free("quantization_config") if args.free else None
    if got is None or not isinstance(raw, cg.Obj) or not raw.free:
        return
    given = raw.truth or "True"
    names, shorthands = tuple(got["names"]), tuple(sorted(got["shorthands"]))

    def site(line: int, conds: list[str]) -> None:
        v = w.bind(cg.conj([given] + conds))  # a long test is a let of its own (the rows stay under the limit)
        if isinstance(v, cg.Expr):
            w.site(QUANT_PATH, line, [v.text])

    for field in got["fields"]:
        x = f"quantization_config__{field}"  # the JSON key's input (the walk's name, mapped to the table's later)
        if x not in w.input_info:
            continue
        lacking = tuple(sorted(k for k, b in got["shorthands"].items() if field not in b))
        is_str, is_dict = f"is_a({x}, 'str')", f"is_a({x}, 'dict')"
        if lacking:
            site(got["no_spec"], [is_str, f"({x} in {lacking!r})"])
        site(got["unknown"], [is_str, f"({x} not in {shorthands!r})", f"({x} not in {names!r})"])
        for k in got["key_fields"]:
            item = f"item({x}, {k!r})"
            allowed = tuple(dict.fromkeys(names + tuple(got["extra"][k])))
            site(got["unknown"], [is_dict, f"({k!r} in keys({x}))", f"is_a({item}, 'str')",
                                  f"({item} not in {allowed!r})"])
            site(got["not_str"], [is_dict, f"({k!r} in keys({x}))", "(" + " or ".join(
                f"is_a({item}, {t!r})" for t in ("int", "float", "bool", "list", "dict")) + ")"])


# --------------------------------------------------------------------------------------------- merge_spec
# resolve_quantization_config (0.34.0 quantization.py:330-372) merges the JSON onto the --quantization online
# shorthand's config (merge_quantization_config, :375-410) unless the shorthand is deferred
# (_DEFERRED_ONLINE_SHORTHANDS, :327); merge_spec refuses an override that sets ``weight`` to another key than a
# Hadamard-rotated base spec's (:385-398). The override spec of a field is: for a string, the shorthand's spec of
# that field or QuantSpec(weight=QUANT_KEY_NAMES[s]) (_coerce_spec); for an object, its ``weight`` (None for a JSON
# null) after the weight before-validator's names. Keys are compared by the constant each name is bound to.


def _spec_kwargs(v: ast.AST) -> dict[str, ast.AST] | None:
    return {kw.arg: kw.value for kw in v.keywords if kw.arg} if isinstance(v, ast.Call) and \
        ast.unparse(v.func) == "QuantSpec" and not v.args else None


def read_merge(tree: ast.Module) -> dict[str, Any] | None:
    """The Hadamard shorthands' base weights and the names giving the same key, or None (not this shape)."""
    merge = _func(tree, "merge_quantization_config")
    resolve = _func(tree, "resolve_quantization_config")
    shorthands, names = _dict_literal(tree, "_ONLINE_SHORTHANDS"), _dict_literal(tree, "QUANT_KEY_NAMES")
    deferred = next((s.value for s in tree.body if isinstance(s, ast.Assign) and len(s.targets) == 1
                     and ast.unparse(s.targets[0]) == "_DEFERRED_ONLINE_SHORTHANDS"), None)
    if None in (merge, resolve, shorthands, names, deferred):
        return None
    inner = next((f for f in ast.walk(merge) if isinstance(f, ast.FunctionDef) and f.name == "merge_spec"), None)
    raises = [n for n in ast.walk(inner)] if inner else []
    raises = [n for n in raises if isinstance(n, ast.Raise)]
    text = ast.unparse(inner) if inner else ""
    if len(raises) != 1 or "base_spec.hadamard_size is not None" not in text or \
            "'weight' in override_spec.fields_set" not in text or "override_spec.weight != base_spec.weight" not in text \
            or "merge_quantization_config(base, quantization_config)" not in ast.unparse(resolve) \
            or "quantization in _DEFERRED_ONLINE_SHORTHANDS" not in ast.unparse(resolve):
        return None
    deferred_names = {n.value for n in ast.walk(deferred) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    sym = {k: ast.unparse(v) for k, v in zip(_keys(names) or [], names.values)}
    weight_extra = _dict_literal(tree, "_WEIGHT_QUANT_KEY_NAMES")
    wsym = {**sym, **({k: ast.unparse(v) for k, v in zip(_keys(weight_extra) or [], weight_extra.values)}
                      if weight_extra is not None else {})}
    specs: dict[str, dict[str, dict[str, ast.AST]]] = {}
    for k, v in zip(_keys(shorthands) or [], shorthands.values):
        if not isinstance(v, ast.Call):
            return None
        specs[k] = {}
        for kw in v.keywords:
            sk = _spec_kwargs(kw.value)
            if sk is None:
                return None
            specs[k][kw.arg] = sk
    out: dict[str, Any] = {"line": raises[0].lineno, "bases": []}
    for k, fields in sorted(specs.items()):
        if k in deferred_names:
            continue
        for field, sk in fields.items():
            if "hadamard_size" not in sk or "weight" not in sk:
                continue
            base = ast.unparse(sk["weight"])
            # a string names a shorthand first (_coerce_spec), else a QUANT_KEY_NAMES key
            same_str = sorted({n for n, s in sym.items() if s == base and n not in specs} | {
                h for h, fs in specs.items() if field in fs and "weight" in fs[field]
                and ast.unparse(fs[field]["weight"]) == base})
            same_weight = sorted(n for n, s in wsym.items() if s == base)
            out["bases"].append((k, field, tuple(same_str), tuple(same_weight)))
    return out


def merge_walk(w: Any, args: cg.Obj) -> None:
    """The merge_spec refusal's row (notes above) for the stack's --quantization and --quantization-config."""
    m = w.modules.get(QUANT_PATH)
    got = read_merge(m.tree) if m is not None else None
    raw = args.free("quantization_config") if args.free else None
    quant = args.free("quantization") if args.free else None
    if not got or not got["bases"] or not isinstance(raw, cg.Obj) or not isinstance(quant, cg.Expr):
        return
    for shorthand, field, same_str, same_weight in got["bases"]:
        x = f"quantization_config__{field}"
        if x not in w.input_info:
            continue
        item = f"item({x}, 'weight')"
        differs = (f"(is_a({x}, 'str') and {x} not in {same_str!r}) or (is_a({x}, 'dict') and 'weight' in keys({x})"
                   f" and not (is_a({item}, 'str') and {item} in {same_weight!r}))")
        v = w.bind(cg.conj([raw.truth or "True", f"({quant.text} == {shorthand!r})", f"({differs})"]))
        if isinstance(v, cg.Expr):
            w.site(QUANT_PATH, got["line"], [v.text])
