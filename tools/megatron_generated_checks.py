"""Generate Megatron's mechanical startup checks as table rows optkg evaluates (used by tools/training_check_sites.py).

Three functions are read from the released source: Megatron-LM's ``validate_args`` (arguments.py) and the
``__post_init__`` of megatron-core's ``ModelParallelConfig`` and ``TransformerConfig``. Walking each body in order,
a ``raise`` / ``assert`` becomes a row when its guarding ``if`` tests and its own test translate into optkg's
expression language over argument names (``self.x`` / ``args.x`` -> ``x``):

- comparisons, ``and`` / ``or`` / ``not``, ``+ - * // %``, literals, tuples; ``is None`` against the sentinel
  ``'__none__'``; a name used as a truth value becomes ``truthy(x)``; ``Enum.member`` becomes the member's
  string value when megatron/core/enums.py defines it;
- a row is written only when no name it reads was assigned earlier in the same function (validate_args and
  __post_init__ rewrite arguments before later checks), no ``return`` was passed on the way, and, for the
  config classes, no name is one that validate_args assigns at all (it runs before the configs are built) or
  that core_transformer_config_from_args fills from an expression.

Defaults per release: every ``add_argument`` of arguments.py (dest, default, store_true / store_false) and the
dataclass fields ArgumentGroupFactory turns into arguments (TransformerConfig and ModelParallelConfig: field
name, literal default). Rows and defaults are written into the framework package's check tables.
"""
from __future__ import annotations

import ast
from typing import Any

NONE = "__none__"
UNKNOWN = object()


class Untranslatable(Exception):
    pass


def enum_values(enums_src: str) -> dict[str, str]:
    """``Class.member`` -> string value for the str-valued enums of megatron/core/enums.py."""
    out = {}
    for node in ast.walk(ast.parse(enums_src)):
        if isinstance(node, ast.ClassDef):
            for s in node.body:
                if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                        and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
                    out[f"{node.name}.{s.targets[0].id}"] = s.value.value
    return out


def translate(node: ast.AST, enums: dict[str, str], names: set[str], boolean: bool = False) -> str:
    """optkg expression text for ``node``; Untranslatable for anything else. ``names`` collects the names read."""
    def t(n: ast.AST, b: bool = False) -> str:
        return translate(n, enums, names, b)
    if isinstance(node, ast.BoolOp):
        op = " and " if isinstance(node.op, ast.And) else " or "
        return "(" + op.join(t(v, True) for v in node.values) + ")"
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.Not):
            return f"(not {t(node.operand, True)})"
        if isinstance(node.op, ast.USub):
            return f"(-{t(node.operand)})"
        raise Untranslatable("unary op")
    if isinstance(node, ast.Compare):
        parts = [t(node.left)]
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.Is, ast.IsNot)):
                if not (isinstance(right, ast.Constant) and right.value is None):
                    raise Untranslatable("is with a non-None")
                parts.append("==" if isinstance(op, ast.Is) else "!=")
                parts.append(repr(NONE))
                continue
            sym = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
                   ast.In: "in", ast.NotIn: "not in"}.get(type(op))
            if sym is None:
                raise Untranslatable("comparison")
            parts += [sym, t(right)]
        return "(" + " ".join(parts) + ")"
    if isinstance(node, ast.BinOp):
        sym = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}.get(type(node.op))
        if sym is None:
            raise Untranslatable("binary op")
        return f"({t(node.left)} {sym} {t(node.right)})"
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "args"):
            names.add(node.attr)
            return f"truthy({node.attr})" if boolean else node.attr
        if isinstance(node.value, ast.Name) and f"{node.value.id}.{node.attr}" in enums:
            return repr(enums[f"{node.value.id}.{node.attr}"])
        raise Untranslatable(f"attribute {ast.unparse(node)}")
    if isinstance(node, ast.Constant):
        if node.value is None:
            return repr(NONE)
        if isinstance(node.value, (bool, int, float, str)):
            return repr(node.value)
        raise Untranslatable("constant")
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return "(" + ", ".join(t(e) for e in node.elts) + ("," if len(node.elts) == 1 else "") + ")"
    raise Untranslatable(type(node).__name__)


def _targets(node: ast.AST) -> set[str]:
    """Names assigned by a statement: ``self.x = ``, ``args.x = ``, ``setattr(args, 'x', ...)``."""
    out = set()
    for n in ast.walk(node):
        tgts = []
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            tgts = n.targets if isinstance(n, ast.Assign) else [n.target]
        for tg in tgts:
            for e in ast.walk(tg):
                if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id in ("self", "args"):
                    out.add(e.attr)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" and len(n.args) > 1 \
                and isinstance(n.args[1], ast.Constant):
            out.add(str(n.args[1].value))
    return out


def function_rows(func: ast.FunctionDef, enums: dict[str, str], tainted: set[str]) -> dict[int, dict[str, Any]]:
    """line -> {expr (fires when true), names} for the translatable sites of ``func`` (see module doc)."""
    rows: dict[int, dict[str, Any]] = {}
    assigned: set[str] = set()
    state = {"returned": False}

    def site(line: int, guards: list[ast.AST], fires: ast.AST | None, test_negated: ast.AST | None) -> None:
        if state["returned"]:
            return
        names: set[str] = set()
        try:
            parts = [translate(g, enums, names, True) for g in guards]
            if fires is not None:
                parts.append(translate(fires, enums, names, True))
            if test_negated is not None:
                parts.append(f"(not {translate(test_negated, enums, names, True)})")
        except Untranslatable:
            return
        if not parts or names & (assigned | tainted):
            return
        rows[line] = {"expr": " and ".join(parts), "names": sorted(names)}

    def walk(stmts: list[ast.stmt], guards: list[ast.AST]) -> None:
        for s in stmts:
            if isinstance(s, ast.If):
                neg = ast.UnaryOp(op=ast.Not(), operand=s.test)
                walk(s.body, guards + [s.test])
                walk(s.orelse, guards + [neg])
                continue
            if isinstance(s, ast.Raise):
                site(s.lineno, guards, None, None)
            elif isinstance(s, ast.Assert):
                site(s.lineno, guards, None, s.test)
            elif isinstance(s, ast.Return):
                state["returned"] = True
            elif isinstance(s, (ast.For, ast.While, ast.With, ast.Try)):
                inner = [n for n in ast.walk(s) if isinstance(n, ast.Return)]
                if inner:
                    state["returned"] = True
            assigned.update(_targets(s))
    walk(func.body, [])
    return rows


def find_function(src: str, name: str, cls: str | None = None) -> ast.FunctionDef | None:
    for node in ast.walk(ast.parse(src)):
        if cls and isinstance(node, ast.ClassDef) and node.name == cls:
            for s in node.body:
                if isinstance(s, ast.FunctionDef) and s.name == name:
                    return s
        if not cls and isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def assigned_in(func: ast.FunctionDef | None) -> set[str]:
    return _targets(func) if func is not None else set()


def config_renames(arguments_src: str) -> tuple[dict[str, str], set[str]]:
    """core_transformer_config_from_args: {config field: arg name} for ``kw_args['f'] = args.a`` and the
    fields it fills from anything else (tainted)."""
    func = find_function(arguments_src, "core_transformer_config_from_args")
    renames, computed = {}, set()
    for n in ast.walk(func) if func else []:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Subscript) \
                and isinstance(n.targets[0].slice, ast.Constant):
            f = str(n.targets[0].slice.value)
            v = n.value
            if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == "args" and f not in computed:
                if renames.get(f, v.attr) != v.attr:
                    computed.add(f)
                renames[f] = v.attr
            else:
                computed.add(f)
    for f in computed:
        renames.pop(f, None)
    return renames, computed


def literal(node: ast.AST | None) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return UNKNOWN


def _annotation_type(ann: ast.AST) -> str:
    text = ast.unparse(ann)
    for t in ("bool", "int", "float", "str"):
        if t in text.replace("Optional[", "").split("[")[0].replace("|", " ").split() or text in (t, f"Optional[{t}]"):
            return t
    return "str"


def dataclass_defaults(src: str, cls: str) -> dict[str, tuple[Any, str]]:
    """field -> (literal default, annotated type) of ``cls`` (fields without a literal default are left out)."""
    out = {}
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for s in node.body:
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                    v = s.value
                    if isinstance(v, ast.Call) and getattr(v.func, "id", getattr(v.func, "attr", "")) == "field":
                        v = next((k.value for k in v.keywords if k.arg == "default"), None)
                        if v is None:
                            continue
                    val = literal(v) if v is not None else UNKNOWN
                    if val is not UNKNOWN:
                        out[s.target.id] = (val, _annotation_type(s.annotation))
    return out


def argparse_args(arguments_src: str) -> dict[str, dict[str, Any]]:
    """``--flag`` -> {dest, kind (value / true / false), type, default} for every add_argument of arguments.py."""
    out: dict[str, dict[str, Any]] = {}
    for n in ast.walk(ast.parse(arguments_src)):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"):
            continue
        flags = [a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        longs = [f for f in flags if f.startswith("--")]
        if not longs:
            continue
        kw = {k.arg: k.value for k in n.keywords if k.arg}
        dest = literal(kw.get("dest")) if "dest" in kw else longs[0][2:].replace("-", "_")
        action = literal(kw.get("action")) if "action" in kw else None
        if "nargs" in kw or action not in (None, "store_true", "store_false"):
            continue  # lists and custom actions: not modelled (their checks stay untranslated or unknown)
        kind = {"store_true": "true", "store_false": "false"}.get(action, "value")
        default = literal(kw.get("default")) if "default" in kw else ({"true": False, "false": True}.get(kind))
        typ = kw.get("type")
        typ = typ.id if isinstance(typ, ast.Name) and typ.id in ("int", "float", "str") else "str"
        if default is UNKNOWN or not isinstance(dest, str):
            continue
        for f in longs:
            out[f] = {"dest": dest, "kind": kind, "type": typ, "default": default}
    return out


def factory_args(fields_defaults: dict[str, tuple[Any, str]]) -> dict[str, dict[str, Any]]:
    """Arguments ArgumentGroupFactory builds from dataclass fields (argument_utils.py:82, :165-171 at core_v0.16.1):
    ``--field-name``; a bool field defaulting to False is a store_true switch, one defaulting to True ``--no-...``."""
    out = {}
    for name, (default, typ) in fields_defaults.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(default, bool) or typ == "bool":
            default = bool(default)
            if default:
                out["--no-" + name.replace("_", "-")] = {"dest": name, "kind": "false", "type": "bool", "default": True}
                out["--disable-" + name.replace("_", "-")] = {"dest": name, "kind": "false", "type": "bool", "default": True}
            else:
                out[flag] = {"dest": name, "kind": "true", "type": "bool", "default": False}
        else:
            out[flag] = {"dest": name, "kind": "value", "type": typ, "default": default}
    return out
