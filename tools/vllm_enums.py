"""Enums whose members are not all literals, and their methods, for the vLLM walk (tools/vllm_generated_checks.py).

``CUDAGraphMode`` (config/compilation.py:129-199 at 0.34.0, :53-123 at 0.33.0) has the scalar members NONE = 0,
PIECEWISE = 1, FULL = 2 and the tuple members FULL_DECODE_ONLY = (FULL, NONE), FULL_AND_PIECEWISE = (FULL,
PIECEWISE); checkgen's ``enum_members`` keeps literal members only, so every value that passed through a tuple member
(the optimization-level default FULL_AND_PIECEWISE, vllm.py:339) and every method call (``has_full_cudagraphs()``,
``separate_routine()`` ...) was a value the walk could not model.

Here a scalar member keeps its value (what checkgen already reads, and what ``__bool__`` = ``self != NONE`` makes
false for NONE = 0 only) and a tuple member is its own name (a string, never equal to a scalar value: checked); a
method without arguments is a table over the members, read by running the enum class's own methods on each member
(the class body alone, with no imports, run on a namespace holding ``enum`` and a few builtins). A method of a
value that is not one of the members (None, a string no member has) is ``__unknown__``, as vLLM would raise.
"""
from __future__ import annotations

import ast
import enum
from typing import Any

import checkgen as cg

ENUM_BASES = ("Enum", "IntEnum")
# what a class body may call while it is defined and its methods run (CUDAGraphMode uses these only)
BUILTINS = {"isinstance": isinstance, "tuple": tuple, "max": max, "min": min, "frozenset": frozenset, "len": len, "str": str, "int": int,
            "classmethod": classmethod, "staticmethod": staticmethod, "property": property, "bool": bool,
            "__build_class__": __build_class__, "AssertionError": AssertionError, "ValueError": ValueError}


def _members(cls: ast.ClassDef) -> list[tuple[str, ast.AST]]:
    return [(s.targets[0].id, s.value) for s in cls.body if isinstance(s, ast.Assign) and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name) and not s.targets[0].id.startswith("_")]


def _runnable(cls: ast.ClassDef) -> bool:
    """A class body that imports nothing and reaches no module name: safe and meaningful to run on its own."""
    inner = {cls.name, "self", "cls", "mode", "enum"} | set(BUILTINS)
    for n in ast.walk(cls):
        if isinstance(n, (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Lambda)):
            return False
        if isinstance(n, ast.Attribute) and n.attr.startswith("__") and n.attr != "__class__":
            return False
    for f in (s for s in cls.body if isinstance(s, ast.FunctionDef)):
        local = {a.arg for a in f.args.args + f.args.kwonlyargs}
        for n in ast.walk(f):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in inner | local:
                return False
    return True


def _strip(cls: ast.ClassDef) -> ast.ClassDef:
    """The class without annotations (``-> frozenset["CUDAGraphMode"]`` is evaluated at definition)."""
    cls = ast.parse(ast.unparse(cls)).body[0]
    for f in ast.walk(cls):
        if isinstance(f, ast.FunctionDef):
            f.returns = None
            for a in f.args.args + f.args.kwonlyargs + f.args.posonlyargs:
                a.annotation = None
    return ast.fix_missing_locations(cls)


class NamedEnum:
    """One enum with a non-literal member: ``values`` member -> its walk value, ``methods`` name -> {member: result
    as a walk value (bool or a member's walk value)}."""

    def __init__(self, name: str, values: dict[str, Any], methods: dict[str, dict[str, Any]]):
        self.name, self.values, self.methods = name, values, methods

    def call(self, method: str, x: str) -> str:
        """``x.method()`` for the value text ``x``: the table's result, ``__unknown__`` off the members."""
        table = self.methods[method]
        reprs = {m: repr(v) for m, v in self.values.items()}
        every = "(" + ", ".join(reprs.values()) + ")"
        outs = list(table.values())
        if all(isinstance(o, bool) for o in outs):
            yes = [reprs[m] for m, o in table.items() if o]
            got = "False" if not yes else f"{x} in ({', '.join(yes)}{',' if len(yes) == 1 else ''})"
            return f"(({got}) if {x} in {every} else {cg.UNK})"
        text = f"({x} if {x} in {every} else {cg.UNK})"
        for m, o in reversed(table.items()):
            if o != self.values[m]:
                text = f"({o!r} if {x} == {reprs[m]} else {text})"
        return text


def named_enums(modules: list[cg.Module]) -> dict[str, NamedEnum]:
    """class name -> NamedEnum for every Enum class of ``modules`` with a member that is not a literal scalar (and
    whose members' names are not among its scalar values); {} for a class whose body cannot be run on its own."""
    out: dict[str, NamedEnum] = {}
    for m in modules:
        for cls in m.classes.values():
            if not any(ast.unparse(b).split(".")[-1] in ENUM_BASES for b in cls.bases):
                continue
            values: dict[str, Any] = {}
            for name, node in _members(cls):
                try:
                    v = ast.literal_eval(node)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    v = None
                values[name] = v if isinstance(v, (str, int)) and not isinstance(v, bool) else name
            named = [k for k, v in values.items() if v == k]
            scalars = {v for k, v in values.items() if v != k}
            if not named or scalars & set(named) or not _runnable(cls):
                continue
            got = _run(cls, values)
            if got is not None:
                out[cls.name] = NamedEnum(cls.name, values, got)
    return out


def _run(cls: ast.ClassDef, values: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    ns: dict[str, Any] = {"enum": enum, "__builtins__": BUILTINS, "__name__": "vllm_enums"}
    try:
        exec(compile(ast.Module([_strip(cls)], []), f"<{cls.name}>", "exec"), ns)  # noqa: S102 (see _runnable)
        klass = ns[cls.name]
        members = {name: klass[name] for name in values}
    except Exception:  # noqa: BLE001 - a class that does not run on its own is not read
        return None
    back = {v: values[k] for k, v in members.items()}
    out: dict[str, dict[str, Any]] = {}
    for f in cls.body:
        if not (isinstance(f, ast.FunctionDef) and not f.name.startswith("_") and not f.decorator_list
                and len(f.args.args) == 1 and not f.args.kwonlyargs and not f.args.vararg):
            continue
        table: dict[str, Any] = {}
        for name, member in members.items():
            try:
                r = getattr(member, f.name)()
            except Exception:  # noqa: BLE001 - a method that raises on a member is not a table
                break
            if isinstance(r, bool):
                table[name] = r
            elif r in back:
                table[name] = back[r]
            else:
                break
        else:
            out[f.name] = table
    return out


def method_owner(w: Any, method: str) -> NamedEnum | None:
    """The named enum whose method ``method`` is, when no other class of the walked modules defines a method of that
    name (a call ``x.method()`` on a value the walk holds as text is then that enum's)."""
    cache = w.__dict__.setdefault("_enum_method_owner", {})
    if method not in cache:
        hits = [e for e in w.named_enums.values() if method in e.methods]
        others = len(hits) == 1 and any(c.name != hits[0].name and any(
            isinstance(f, ast.FunctionDef) and f.name == method for f in c.body)
            for m in w.modules.values() for c in m.classes.values())
        cache[method] = hits[0] if len(hits) == 1 and not others else None
    return cache[method]


def method_call(w: Any, method: str, node: ast.Call, fr: Any, pc: list[str]) -> Any:
    """``x.method()`` of a named enum's value (method_owner), None for any other call."""
    if node.args or node.keywords or not isinstance(node.func, ast.Attribute):
        return None
    owner = method_owner(w, method)
    if owner is None:
        return None
    try:
        base = w.value(node.func.value, fr, pc)
    except cg.Untranslatable:
        return None
    if not isinstance(base, cg.Expr) or base.ref:
        return None
    return cg.Expr(owner.call(method, w.as_text(base)))
