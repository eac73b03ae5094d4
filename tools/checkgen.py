"""Symbolic walk of a training framework's validation code: every ``raise`` / ``assert`` reached from an entry
point becomes a row whose condition is an optkg expression over the framework's *inputs* (Megatron-LM argument
names, DeepSpeed JSON keys, dataclass fields), with every rewrite the code makes on the way modelled.

Used by the per-framework generators (tools/megatron_generated_checks.py, tools/deepspeed_generated_checks.py,
tools/dataclass_generated_checks.py) and tools/training_check_sites.py.

How the walk models the code (statements in order, from the entry function):

- a value is an optkg expression text (``Expr``) over input names, a symbolic object (``Obj``: the args
  namespace, ``self`` of a config class, a pydantic model over a JSON section), or ``TAINT`` (not modelled);
- ``x.attr = v`` / ``setattr(x, 'attr', v)`` / a local ``name = v`` under the path condition ``pc`` stores
  ``(v if pc else old)``: a later check reads the rewritten value, not the input (Megatron's validate_args sets
  ``args.data_parallel_size = args.world_size // total_model_size`` before checks read it);
- ``if`` splits the path condition; a test that does not translate makes everything under it unknown (its
  checks are not generated, its assignments taint what they assign);
- ``return`` under a condition adds ``not condition`` to everything after it in that function;
- loops, ``try`` bodies with handlers, and ``except`` handlers are unknown paths (loop variables, caught
  exceptions); ``with`` bodies are walked as they stand;
- calls to functions and methods found in the scanned sources are inlined (their checks are rows too, at their
  own path:line; a check reached along several call paths fires when any of them does); a function whose
  body is ``return <expr>`` is inlined as that expression; a call the walk cannot resolve taints nothing but
  is counted (``opaque``), so the generators can show what was not modelled;
- ``x is None`` -> ``x == '__none__'`` (the sentinel the evaluator gives to None), a value used as a truth value
  -> ``truthy(x)``, ``a or b`` as a value -> ``(a if truthy(a) else b)``; enum members and module constants ->
  their literal values; a name imported from another module (``F.silu``, ``torch.float32``) -> its dotted name
  as a string, so identity tests between such objects become string equality.

A row is an under-approximation: it is written only when every condition on its path translates, so it fires only
where the framework's own code raises on the same inputs.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable

NONE = "__none__"
UNKNOWN = "<unknown>"   # a path condition that did not translate; "<unknown>: why" carries the reason


def unknown(why: str) -> str:
    return f"{UNKNOWN}: {why}"


def is_unknown(c: str) -> bool:
    return c.startswith(UNKNOWN)


def has_unknown(conds: list[str]) -> str | None:
    """The first unknown path condition of ``conds`` (its text says why), or None."""
    return next((c for c in conds if c.startswith(UNKNOWN)), None)
UNK = "__unknown__"   # a value the walk could not model, on one side of a known condition
MAX_TEXT = 1900  # optkg's expression limit is 2,000 characters (kg/engine/expr.py MAX_CHARS)
LET_AT = 240     # a merged value longer than this is bound to a name (Walker.bind)
MAX_DEPTH = 12   # inlining depth


class Untranslatable(Exception):
    pass


@dataclass(frozen=True)
class Expr:
    text: str
    ref: bool = False   # the dotted name of an imported object (``torch.float32``): only == / != / is compare it


class _Taint:
    def __repr__(self) -> str:
        return "TAINT"


TAINT = _Taint()


class Obj:
    """A symbolic object: attributes assigned during the walk (``env``), else resolved by ``free(attr)``."""

    def __init__(self, label: str, free: Callable[[str], Any] | None = None, cls: str | None = None,
                 truth: str | None = None, path: str | None = None):
        self.label = label
        self.path = path  # the module ``cls`` is looked up from
        self.env: dict[str, Any] = {}
        self.free = free
        self.cls = cls
        self.truth = truth  # expression for `bool(obj)` (e.g. a JSON section is present), None: always true

    def __repr__(self) -> str:
        return f"Obj({self.label})"


class ObjIf(Obj):
    """``a`` where ``cond`` holds, else ``b`` (an object assigned on one branch only)."""

    def __init__(self, cond: str, a: Obj, b: Obj):
        super().__init__(f"({a.label} if .. else {b.label})", cls=a.cls if a.cls == b.cls else None,
                         path=a.path if a.cls == b.cls else None)
        self.cond, self.a, self.b = cond, a, b
        self.truth = f"({a.truth or 'True'} if {cond} else {b.truth or 'True'})"
        sa, sb = getattr(a, "scalar", None), getattr(b, "scalar", None)
        self.scalar = f"({sa} if {cond} else {sb})" if sa and sb else None


class LambdaVal(Obj):
    """A ``lambda`` with the locals it closes over; calling it evaluates its body."""

    def __init__(self, node: ast.Lambda, closure: "Frame"):
        super().__init__("lambda")
        self.node, self.closure = node, closure


class UnknownObj(Obj):
    """An object the walk could not model, on one side of a known condition: everything read from it is unknown."""

    def __init__(self):
        super().__init__("unknown", lambda a: Expr(UNK))
        self.truth = f"truthy({UNK})"
        self.scalar = UNK
        self.present = f"truthy({UNK})"


def _scalar(v: Any) -> Any:
    """An object that stands for a plain value (a JSON scalar) as that value's expression."""
    if isinstance(v, Obj) and getattr(v, "scalar", None):
        return Expr(v.scalar)
    return v


@dataclass
class Frame:
    path: str
    locals: dict[str, Any]
    cls: str | None = None
    base: int = 0                      # len(pc) when the function was entered
    exits: list[str] = field(default_factory=list)
    returns: list[tuple[list[str], Any]] = field(default_factory=list)
    dead: bool = False


def conj(parts: list[str]) -> str:
    return " and ".join(parts) if parts else "True"


def _paren(t: str) -> str:
    return t if t.startswith("(") and t.endswith(")") and _balanced(t[1:-1]) else f"({t})"


def _balanced(t: str) -> bool:
    d = 0
    for ch in t:
        d += ch == "("
        d -= ch == ")"
        if d < 0:
            return False
    return d == 0


@dataclass
class Module:
    path: str
    tree: ast.Module
    functions: dict[str, ast.FunctionDef]
    classes: dict[str, ast.ClassDef]
    constants: dict[str, Any]
    imports: dict[str, str]           # local name -> dotted origin


def read_module(path: str, text: str) -> Module:
    tree = ast.parse(text)
    functions, classes, constants, imports = {}, {}, {}, {}
    for s in tree.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[s.name] = s
        elif isinstance(s, ast.ClassDef):
            classes[s.name] = s
        elif isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            try:
                constants[s.targets[0].id] = _const_eval(s.value, constants)
            except (ValueError, TypeError, KeyError, SyntaxError, MemoryError, RecursionError, ZeroDivisionError):
                pass
        elif isinstance(s, ast.Import):
            for a in s.names:
                imports[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(s, ast.ImportFrom):
            pkg = path.removesuffix(".py").split("/")[:-1]  # the importer's package
            base = pkg[:len(pkg) - (s.level - 1)] if s.level else []
            origin = ".".join(base + ([s.module] if s.module else []))
            for a in s.names:
                if a.name == "*":
                    imports.setdefault("*", "")
                    imports["*"] += f" {origin}"
                else:
                    imports[a.asname or a.name] = f"{origin}.{a.name}"
    return Module(path, tree, functions, classes, constants, imports)


def _const_eval(node: ast.AST, consts: dict[str, Any]) -> Any:
    """A module-level constant: a literal, or names of earlier constants combined by tuples / lists / + - * //."""
    if isinstance(node, ast.Name):
        return consts[node.id]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        vals = [_const_eval(e, consts) for e in node.elts]
        return tuple(vals) if isinstance(node, ast.Tuple) else vals if isinstance(node, ast.List) else set(vals)
    if isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv):
        a, b = _const_eval(node.left, consts), _const_eval(node.right, consts)
        return {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                ast.FloorDiv: lambda: a // b}[type(node.op)]()
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_const_eval(node.operand, consts)
    return ast.literal_eval(node)


def enum_members(modules: list[Module]) -> dict[str, Any]:
    """``Class.member`` -> literal value for every class body assignment of a literal (str / int enums)."""
    out = {}
    for m in modules:
        for c in m.classes.values():
            for s in c.body:
                if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                    try:
                        v = ast.literal_eval(s.value)
                    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                        continue
                    if isinstance(v, (str, int, float, bool)):
                        out[f"{c.name}.{s.targets[0].id}"] = v
    return out


class Walker:
    """Walks entry functions over ``modules`` (see module doc); ``sites[(path, line)]`` -> the condition of each
    reaching (None when that reaching did not translate)."""

    let_at = LET_AT  # a walker whose rows must stay self-contained sets MAX_TEXT (no lets)
    # a call the walk cannot follow (not found, ``*args``, too deep) that is handed a symbolic object may change any
    # of its fields: with this on they become unknown after it (forget_all). Off by default so the generators that
    # have not been re-measured with it keep their tables; tools/vllm_generated_checks.py turns it on.
    opaque_calls_forget_args = False
    # the checks a call in one branch of ``a if t else b`` reaches are reached under ``t`` (under ``not t`` for b).
    # Off by default: without it those checks are written without the branch's condition (too wide); the generators
    # not yet re-measured with it keep their tables; tools/vllm_generated_checks.py turns it on.
    branch_conditions = False
    # record, at each raise / assert, the values its message's f-string fields hold there (``fills``: site ->
    # {"{field text}": expression, or None where two reachings disagree or one does not translate})
    record_fills = False
    pure_calls: frozenset[str] = frozenset()  # callee texts read to change nothing they are handed (the generator's)
    # a dataclass's ``__post_init__`` gets its InitVar fields (the parameters after ``self`` named like a field) as
    # the constructor was given them, else their defaults, as dataclasses and pydantic do. Off by default (those
    # parameters were unknown): the generators not re-measured with it keep their tables; vLLM's turns it on
    post_init_initvars = False

    def __init__(self, modules: list[Module], enums: dict[str, Any] | None = None,
                 constants: dict[str, Any] | None = None):
        self.modules = {m.path: m for m in modules}
        self.enums = enums if enums is not None else enum_members(modules)
        self.extra_constants = constants or {}
        self.sites: dict[tuple[str, int], list[str | None]] = {}
        self.names: dict[tuple[str, int], set[str]] = {}
        self.opaque: dict[str, int] = {}
        self.depth = 0
        self.inputs: set[str] = set()
        self.hooks: list[Callable] = []
        self.dicts: list[Obj] = []
        self.lets: list[tuple[str, str]] = []    # (name, expression) in definition order
        self.unknown_exits: list[tuple[str, int]] = []
        self.taints: dict[str, tuple[int, str]] = {}
        self.why: dict[tuple[str, int], str] = {}
        self.partial: dict[str, str] = {}   # unknown `a and b` test -> the conjuncts that did translate       # site -> why a reaching did not translate   # attribute -> (line, why) where the walk first lost it
        self.lineno = 0
        self.fills: dict[tuple[str, int], dict[str, str | None]] = {}
        self.ambiguous: set[str] = set()        # every empty dict literal the walk created (kwargs being built)   # (walker, node, frame, pc) -> value or None: framework-specific calls

    # ---------------------------------------------------------------------------------- lookup
    def find_function(self, name: str, path: str) -> tuple[ast.FunctionDef, str] | None:
        m = self.modules.get(path)
        if m and name in m.functions:
            return m.functions[name], path
        if m and name in m.imports:
            short = m.imports[name].rsplit(".", 1)[-1]
            origin = self.module_of(m.imports[name].rsplit(".", 1)[0], path)
            if origin is not None and short in origin.functions:
                return origin.functions[short], origin.path
            hits = [(mm.functions[short], p) for p, mm in self.modules.items() if short in mm.functions]
            if len(hits) == 1:
                return hits[0]
        return None

    def find_class(self, name: str, path: str | None = None) -> tuple[ast.ClassDef, str] | None:
        """The class ``name``: the one ``path``'s module defines or imports when several modules define it."""
        hits = [(m.classes[name], p) for p, m in self.modules.items() if name in m.classes]
        if len(hits) <= 1:
            return hits[0] if hits else None
        m = self.modules.get(path or "")
        for _ in range(4):  # follow re-exports (``from .sub import X`` in a package's __init__.py)
            if m is None:
                break
            if name in m.classes:
                return m.classes[name], m.path
            if name not in m.imports:
                break
            m = self.module_of(m.imports[name].rsplit(".", 1)[0], m.path)
        self.ambiguous.add(name)
        return None

    def module_of(self, dotted: str, importer: str) -> Module | None:
        """The scanned module ``dotted`` (imports are made absolute by read_module)."""
        dotted = dotted.replace(".", "/")
        for cand in (f"{dotted}.py", f"{dotted}/__init__.py"):
            if cand in self.modules:
                return self.modules[cand]
        return None

    def find_method(self, cls: str | None, name: str, path: str | None = None) -> tuple[ast.FunctionDef, str, str] | None:
        seen = set()
        while cls and cls not in seen:
            seen.add(cls)
            hit = self.find_class(cls, path)
            if hit is None:
                return None
            c, path = hit
            for s in c.body:
                if isinstance(s, ast.FunctionDef) and s.name == name:
                    return s, path, cls
            bases = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None
                     for b in c.bases]
            cls = next((b for b in bases if b and self.find_class(b, path)), None)
        return None

    def constant(self, name: str, path: str) -> Any:
        m = self.modules.get(path)
        if m and name in m.constants:
            return m.constants[name]
        for origin in (m.imports.get("*", "").split() if m else []):  # from .constants import *
            mm = self.module_of(origin, path)
            if mm and name in mm.constants:
                return mm.constants[name]
        if name in self.extra_constants:
            return self.extra_constants[name]
        if m and name in m.imports:
            short = m.imports[name].rsplit(".", 1)[-1]
            vals = {repr(mm.constants[short]) for mm in self.modules.values() if short in mm.constants}
            if len(vals) == 1:
                return next(mm.constants[short] for mm in self.modules.values() if short in mm.constants)
        raise KeyError(name)

    # ---------------------------------------------------------------------------------- expressions
    def text(self, node: ast.AST, fr: Frame, pc: list[str], boolean: bool = False) -> str:
        if boolean and isinstance(node, ast.BoolOp):
            op = " and " if isinstance(node.op, ast.And) else " or "
            return "(" + op.join(self.text(v, fr, pc, True) for v in node.values) + ")"
        if boolean and isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return f"(not {self.text(node.operand, fr, pc, True)})"
        v = self.value(node, fr, pc)
        return self.as_text(v, boolean)

    def as_text(self, v: Any, boolean: bool = False) -> str:
        if isinstance(v, Obj):
            if boolean:
                return v.truth or "True"
            if getattr(v, "scalar", None):
                return v.scalar
            raise Untranslatable(f"object {v.label} as a value")
        if v is TAINT or not isinstance(v, Expr):
            raise Untranslatable("tainted")
        t = v.text
        if len(t) > MAX_TEXT:
            raise Untranslatable("too long")
        if boolean and not _is_boolean(t):
            return f"truthy({t})"
        return t

    def literal(self, v: Any) -> Expr:
        if v is None:
            return Expr(repr(NONE))
        if isinstance(v, (bool, int, float, str)):
            return Expr(repr(v))
        if isinstance(v, (list, tuple, set, frozenset)):
            items = [self.literal(x).text for x in v]
            return Expr("(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")")
        raise Untranslatable(f"literal {type(v).__name__}")

    def value(self, node: ast.AST, fr: Frame, pc: list[str]) -> Any:
        v = self._value(node, fr, pc)
        if isinstance(v, Expr) and not isinstance(node, (ast.Constant, ast.Name)):
            return fold(v)
        return v

    def _value(self, node: ast.AST, fr: Frame, pc: list[str]) -> Any:
        for h in self.hooks:
            got = h(self, node, fr, pc)
            if got is not None:
                return got
        if isinstance(node, ast.Constant):
            return self.literal(node.value)
        if isinstance(node, ast.Name):
            return self.name(node.id, fr)
        if isinstance(node, ast.Attribute):
            return self.attribute(node, fr, pc)
        if isinstance(node, ast.BoolOp):
            parts = [self.value(v, fr, pc) for v in node.values]
            if all(isinstance(p, Expr) for p in parts) and all(_is_boolean(p.text) for p in parts):
                op = " and " if isinstance(node.op, ast.And) else " or "
                return Expr("(" + op.join(p.text for p in parts) + ")")
            # value semantics: a or b -> (a if truthy(a) else b); a and b -> (b if truthy(a) else a)
            acc = parts[-1]
            for p in reversed(parts[:-1]):
                pt, at = self.as_text(p), self.as_text(acc)
                cond = self.as_text(p, True)
                acc = Expr(f"({pt} if {cond} else {at})" if isinstance(node.op, ast.Or) else f"({at} if {cond} else {pt})")
            return acc
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return Expr(f"(not {self.text(node.operand, fr, pc, True)})")
            if isinstance(node.op, ast.USub):
                return Expr(f"(-{self.text(node.operand, fr, pc)})")
            raise Untranslatable("unary")
        if isinstance(node, ast.BinOp):
            sym = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%", ast.Div: "/",
                   ast.BitAnd: "&"}.get(type(node.op))
            if sym is None:
                raise Untranslatable("binop")
            return Expr(f"({self.text(node.left, fr, pc)} {sym} {self.text(node.right, fr, pc)})")
        if isinstance(node, ast.Compare):
            parts = []
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                if isinstance(op, (ast.Eq, ast.NotEq)) and any(isinstance(x, ast.Constant) and x.value is None
                                                               for x in (left, right)):
                    op = ast.Is() if isinstance(op, ast.Eq) else ast.IsNot()
                if isinstance(op, (ast.Is, ast.IsNot)):
                    lv, rv = self.value(left, fr, pc), self.value(right, fr, pc)
                    parts.append(self._is(lv, rv, isinstance(op, ast.IsNot)))
                else:
                    sym = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
                           ast.In: "in", ast.NotIn: "not in"}[type(op)]
                    lv, rv = self.value(left, fr, pc), self.value(right, fr, pc)
                    if sym not in ("==", "!=") and any(isinstance(x, Expr) and x.ref for x in (lv, rv)):
                        raise Untranslatable(f"{sym} on an imported object")
                    parts.append(f"({self.as_text(lv)} {sym} {self.as_text(rv)})")
                left = right
            return Expr(parts[0] if len(parts) == 1 else "(" + " and ".join(parts) + ")")
        if isinstance(node, ast.IfExp):
            t = self.text(node.test, fr, pc, True)
            if self.branch_conditions:  # what a branch calls runs only where the branch is taken
                return Expr(f"({self.text(node.body, fr, pc + [t])} if {t} else "
                            f"{self.text(node.orelse, fr, pc + [f'(not {t})'])})")
            return Expr(f"({self.text(node.body, fr, pc)} if {t} else {self.text(node.orelse, fr, pc)})")
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [self.text(e, fr, pc) for e in node.elts]
            return Expr("(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")")
        if isinstance(node, ast.Call):
            return self.call_forgetting(node, fr, pc)
        if isinstance(node, ast.Lambda):
            return LambdaVal(node, fr)
        if isinstance(node, ast.Dict) and not node.keys:
            d = Obj(f"dict@{fr.path}:{getattr(node, 'lineno', 0)}")
            self.dicts.append(d)
            return d
        if isinstance(node, ast.Subscript):
            base = self.value(node.value, fr, pc)
            if isinstance(base, Obj) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                return self.get_attr(base, node.slice.value)
            raise Untranslatable("subscript")
        raise Untranslatable(type(node).__name__)

    def _is(self, lv: Any, rv: Any, negate: bool) -> str:
        none = Expr(repr(NONE))
        if rv == none and isinstance(lv, Obj) and not getattr(lv, "scalar", None):
            t = lv.truth or "True"
            return t if negate else f"(not {t})"
        if rv == none or lv == none:
            other = lv if rv == none else rv
            ot = self.as_text(other)
            return f"({ot} {'!=' if negate else '=='} {NONE!r})"
        if isinstance(lv, Expr) and isinstance(rv, Expr) and _is_literal_bool(rv.text):
            return f"({lv.text} {'!=' if negate else '=='} {rv.text})"
        raise Untranslatable("is")

    def name(self, n: str, fr: Frame) -> Any:
        if n in fr.locals:
            v = fr.locals[n]
            if v is TAINT:
                raise Untranslatable(f"local {n} tainted")
            return v
        if n in ("True", "False", "None"):
            return self.literal({"True": True, "False": False, "None": None}[n])
        try:
            return self.literal(self.constant(n, fr.path))
        except (KeyError, Untranslatable):
            pass
        m = self.modules.get(fr.path)
        if m and n in m.imports:
            return Expr(repr(m.imports[n]), ref=True)
        raise Untranslatable(f"name {n}")

    def dotted(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            d = self.dotted(node.value)
            return f"{d}.{node.attr}" if d else None
        return None

    def attribute(self, node: ast.Attribute, fr: Frame, pc: list[str]) -> Any:
        d = self.dotted(node)
        if d and d.count(".") == 1 and d in self.enums and not (d.split(".")[0] in fr.locals):
            return self.literal(self.enums[d])
        if isinstance(node.value, ast.Name) and node.value.id not in fr.locals:
            m = self.modules.get(fr.path)
            head = node.value.id
            if m and head in m.imports:
                cls_name = m.imports[head].rsplit(".", 1)[-1]
                if f"{cls_name}.{node.attr}" in self.enums:
                    return self.literal(self.enums[f"{cls_name}.{node.attr}"])
                return Expr(repr(f"{m.imports[head]}.{node.attr}"), ref=True)
        base = self.value(node.value, fr, pc)
        if isinstance(base, Obj):
            return self.get_attr(base, node.attr, self.eff(fr, pc))
        if isinstance(base, Expr) and base.ref and node.attr.isidentifier():
            return Expr(repr(ast.literal_eval(base.text) + "." + node.attr), ref=True)
        raise Untranslatable(f"attribute {node.attr}")

    def get_attr(self, obj: Obj, attr: str, pc: list[str] | None = None) -> Any:
        if isinstance(obj, ObjIf) and attr not in obj.env:
            a = self.get_attr(obj.a, attr, pc)
            b = self.get_attr(obj.b, attr, pc)
            return self.merge(b, a, [obj.cond], first=False)
        if attr in obj.env:
            return obj.env[attr]
        if obj.cls:
            m = self.find_method(obj.cls, attr, obj.path)
            if m is not None and any(isinstance(d, ast.Name) and d.id in ("property", "cached_property")
                                     for d in m[0].decorator_list):
                return self.invoke(m[0], m[1], obj, [], {}, pc or [], m[2])
        if obj.free is not None:
            v = obj.free(attr)
            if v is not None:
                return v
        if obj.cls:
            const = self.class_constant(obj.cls, attr, obj.path)
            if const is not None:
                return const
        raise Untranslatable(f"{obj.label}.{attr}")

    def class_constant(self, cls: str, attr: str, path: str | None) -> Any:
        """A literal assigned in the class body (``_VALID_DICT_FIELDS = [...]``), searched through the bases."""
        seen = set()
        while cls and cls not in seen:
            seen.add(cls)
            hit = self.find_class(cls, path)
            if hit is None:
                return None
            for st in hit[0].body:
                if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
                    tgt = st.targets[0] if isinstance(st, ast.Assign) else st.target
                    if isinstance(tgt, ast.Name) and tgt.id == attr:
                        try:
                            return self.literal(ast.literal_eval(st.value))
                        except (ValueError, SyntaxError, Untranslatable):
                            return None
            path = hit[1]
            cls = next((ast.unparse(b).split(".")[-1] for b in hit[0].bases), None)
        return None

    def call(self, node: ast.Call, fr: Frame, pc: list[str]) -> Any:
        # a callee runs only where the caller has not returned yet: its path condition carries the caller's exits
        pc = self.eff(fr, pc)
        f = node.func
        fname = f.id if isinstance(f, ast.Name) else None
        if fname == "len" and len(node.args) == 1:
            return Expr(f"len({self.text(node.args[0], fr, pc)})")
        if fname in ("min", "max", "abs", "int", "float") and node.args and not node.keywords:
            return Expr(f"{fname}(" + ", ".join(self.text(a, fr, pc) for a in node.args) + ")")
        if isinstance(f, ast.Attribute) and f.attr in ("lower", "upper") and not node.args:
            return Expr(f"{f.attr}({self.text(f.value, fr, pc)})")
        if isinstance(f, ast.Attribute) and f.attr in ("startswith", "endswith") and len(node.args) == 1:
            return Expr(f"{f.attr}({self.text(f.value, fr, pc)}, {self.text(node.args[0], fr, pc)})")
        if fname == "str" and len(node.args) == 1:
            return Expr(f"str({self.text(node.args[0], fr, pc)})")
        if fname == "isinstance" and len(node.args) == 2:
            types = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            names = [ast.unparse(t) for t in types]
            if not all(n in BUILTIN_TYPES for n in names):
                raise Untranslatable("isinstance of a class")
            x = self.text(node.args[0], fr, pc)
            return Expr("(" + " or ".join(f"is_a({x}, {n!r})" for n in names) + ")")
        if fname == "bool" and len(node.args) == 1:
            return Expr(self.text(node.args[0], fr, pc, True))
        if fname in ("any", "all") and len(node.args) == 1:
            op = " or " if fname == "any" else " and "
            items = self.each(node.args[0], fr, pc)
            return Expr("(" + (op.join(items) if items else ("False" if fname == "any" else "True")) + ")")
        if fname in ("getattr", "hasattr") and len(node.args) >= 2 and self.const_str(node.args[1], fr, pc):
            base = self.value(node.args[0], fr, pc)
            if isinstance(base, Obj):
                try:
                    v = self.get_attr(base, self.const_str(node.args[1], fr, pc), pc)
                except Untranslatable:
                    if len(node.args) == 3:
                        return self.value(node.args[2], fr, pc)
                    raise
                return Expr("True") if fname == "hasattr" else v
            raise Untranslatable("getattr")
        # a function or method of the scanned sources
        target = None
        lam = None
        if isinstance(f, ast.Name) and isinstance(fr.locals.get(f.id), LambdaVal):
            lam = fr.locals[f.id]
        elif isinstance(f, ast.Attribute):
            try:
                got = self.value(f, fr, pc)
            except Untranslatable:
                got = None
            lam = got if isinstance(got, LambdaVal) else None
        if lam is not None:
            params = [a.arg for a in lam.node.args.args]
            bound = dict(lam.closure.locals)
            for p, a in zip(params, node.args):
                bound[p] = self.value_or_taint(a, fr, pc)
            if self.depth >= MAX_DEPTH:
                raise Untranslatable("depth")
            self.depth += 1
            try:
                return self.value(lam.node.body, Frame(lam.closure.path, bound, lam.closure.cls, len(pc)), pc)
            finally:
                self.depth -= 1
        if isinstance(f, ast.Name) and f.id in fr.locals and isinstance(fr.locals[f.id], Expr):
            made = self.call_class_value(fr.locals[f.id], node, fr, pc)
            if made is not None:
                return made
        if isinstance(f, ast.Name):
            hit = self.find_function(f.id, fr.path)
            if hit:
                target = (hit[0], hit[1], None, None)
            else:
                cls = self.find_class(f.id, fr.path)
                if cls is not None and self.is_enum(cls) and len(node.args) == 1:
                    return self.value(node.args[0], fr, pc)  # a str / int enum holds its value (compared by it)
                if cls is not None:
                    return self.construct(cls, node, fr, pc)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call) and ast.unparse(f.value.func) == "super":
            hit = self.find_class(fr.cls, fr.path) if fr.cls else None
            self_obj = fr.locals.get("self")
            for b in (hit[0].bases if hit else []):
                bname = b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None
                m = self.find_method(bname, f.attr, hit[1]) if bname else None
                if m is not None and isinstance(self_obj, Obj):
                    target = (m[0], m[1], self_obj, m[2])
                    break
        elif isinstance(f, ast.Attribute):
            try:
                base = self.value(f.value, fr, pc)
            except Untranslatable:
                base = None
            if isinstance(base, Obj) and base.cls:
                hit = self.find_method(base.cls, f.attr, base.path)
                if hit:
                    target = (hit[0], hit[1], base, hit[2])
        if target is None:
            key = ast.unparse(f)[:60]
            self.opaque[key] = self.opaque.get(key, 0) + 1
            raise Untranslatable(f"call {key}")
        func, path, self_obj, cls = target
        args = [self.value_or_taint(a, fr, pc) for a in node.args if not isinstance(a, ast.Starred)]
        kwargs = {k.arg: self.value_or_taint(k.value, fr, pc) for k in node.keywords if k.arg}
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise Untranslatable("star args")
        return self.invoke(func, path, self_obj, args, kwargs, pc, cls)

    def call_forgetting(self, node: ast.Call, fr: Frame, pc: list[str]) -> Any:
        """``call``; where the call is not followed (opaque_calls_forget_args), every object passed to it loses
        what the walk knew of its fields."""
        try:
            return self.call(node, fr, pc)
        except Untranslatable as e:
            if (self.opaque_calls_forget_args and str(e).startswith(NOT_FOLLOWED) and not _pure_call(node)
                    and ast.unparse(node.func) not in self.pure_calls):
                for a in list(node.args) + [k.value for k in node.keywords]:
                    a = a.value if isinstance(a, ast.Starred) else a
                    try:
                        v = self.value(a, fr, pc)
                    except Untranslatable:
                        continue
                    if isinstance(v, Obj):
                        self.forget_all(v, ast.unparse(node.func)[:60], self.eff(fr, pc))
            raise

    def forget_all(self, obj: Obj, why: str, conds: list[str], seen: dict[int, Obj] | None = None) -> None:
        """Every field of ``obj`` (its dataclass fields, what was assigned, what its ``free`` would give) is unknown
        from here on where ``conds`` hold (merge: ``__unknown__`` there, the old value elsewhere); a field holding an
        object forgets that object's fields the same way (replacing it would change no more); markers (``__x__``)
        stay."""
        seen = {} if seen is None else seen  # held, so that no id is reused while the walk lasts
        if id(obj) in seen:
            return
        seen[id(obj)] = obj
        if isinstance(obj, ObjIf):
            self.forget_all(obj.a, why, conds, seen)
            self.forget_all(obj.b, why, conds, seen)
            return
        if isinstance(obj, (UnknownObj, LambdaVal)):
            return
        fields = (self.dataclass_fields(obj.cls, obj.path) or {}) if obj.cls else {}
        for f in sorted(set(fields) | set(obj.env)):
            if f.startswith("__") and f.endswith("__"):
                continue
            try:
                cur = self.get_attr(obj, f)
            except Untranslatable:
                cur = None
            if isinstance(cur, Obj) and len(seen) < 64:
                self.forget_all(cur, why, conds, seen)
            else:
                self.set_attr(obj, f, TAINT, conds)
        old_free = obj.free

        def free(a: str) -> Any:
            old = old_free(a) if old_free is not None else None
            return None if old is None else self.merge(old, TAINT, conds, first=False)
        obj.free = free
        key = f"forgotten by {why}"
        self.opaque[key] = self.opaque.get(key, 0) + 1

    def const_str(self, node: ast.AST, fr: Frame, pc: list[str]) -> str | None:
        """The string a name argument evaluates to (a literal, or a local bound to one), else None."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        try:
            v = self.value(node, fr, pc)
        except Untranslatable:
            return None
        if isinstance(v, Expr) and v.text.startswith("'") and not free_names(v.text):
            try:
                x = ast.literal_eval(v.text)
            except (ValueError, SyntaxError):
                return None
            return x if isinstance(x, str) else None
        return None

    def each(self, node: ast.AST, fr: Frame, pc: list[str]) -> list[str]:
        """The truth value of every element of a literal list, or of ``P(x) for x in <literal list>``."""
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.text(e, fr, pc, True) for e in node.elts]
        if isinstance(node, (ast.GeneratorExp, ast.ListComp)) and len(node.generators) == 1:
            g = node.generators[0]
            if g.ifs or g.is_async or not isinstance(g.target, ast.Name) or not isinstance(g.iter, (ast.List, ast.Tuple)):
                raise Untranslatable("comprehension")
            out = []
            for e in g.iter.elts:
                inner = Frame(fr.path, {**fr.locals, g.target.id: self.value(e, fr, pc)}, fr.cls, fr.base)
                out.append(self.text(node.elt, inner, pc, True))
            return out
        raise Untranslatable("any/all over a computed iterable")

    def value_or_taint(self, node: ast.AST, fr: Frame, pc: list[str]) -> Any:
        try:
            return self.value(node, fr, pc)
        except Untranslatable:
            return TAINT

    def call_class_value(self, v: Expr, node: ast.Call, fr: Frame, pc: list[str]) -> Any:
        """Calling a local that holds a class (``Opt = A if cond else B; Opt(...)``): each class is built where its
        branch holds."""
        try:
            e = ast.parse(v.text, mode="eval").body
        except SyntaxError:
            return None
        if isinstance(e, ast.Constant) and isinstance(e.value, str):
            hit = self.find_class(e.value.rsplit(".", 1)[-1], fr.path)
            return self.construct(hit, node, fr, pc) if hit else None
        if isinstance(e, ast.IfExp) and all(isinstance(x, ast.Constant) and isinstance(x.value, str)
                                            for x in (e.body, e.orelse)):
            test = ast.unparse(e.test)
            a = self.find_class(e.body.value.rsplit(".", 1)[-1], fr.path)
            b = self.find_class(e.orelse.value.rsplit(".", 1)[-1], fr.path)
            oa = self.construct(a, node, fr, pc + [test]) if a else UnknownObj()
            ob = self.construct(b, node, fr, pc + [f"(not {test})"]) if b else UnknownObj()
            return ObjIf(test, oa, ob)
        return None

    def is_enum(self, hit: tuple[ast.ClassDef, str]) -> bool:
        seen = set()
        while hit is not None and hit[0].name not in seen:
            seen.add(hit[0].name)
            bases = [ast.unparse(b).split(".")[-1] for b in hit[0].bases]
            if any(b in ("Enum", "IntEnum", "StrEnum", "ExplicitEnum") for b in bases):
                return True
            hit = next((self.find_class(b, hit[1]) for b in bases if self.find_class(b, hit[1])), None)
        return False

    def construct(self, hit: tuple[ast.ClassDef, str], node: ast.Call, fr: Frame, pc: list[str]) -> Any:
        """``cls(**kwargs)`` of a dataclass: fields from the keywords / the ``**`` dict, else their defaults;
        then its ``__post_init__`` (inherited ones included) is walked."""
        cls = hit[0].name
        fields = self.dataclass_fields(cls, hit[1])
        if fields is None:
            return self.instantiate(hit, node, fr, pc)
        given: dict[str, Any] = {}
        spread: list[Obj] = []
        for k in node.keywords:
            if k.arg is None:
                v = self.value_or_taint(k.value, fr, pc)
                if not isinstance(v, Obj):
                    raise Untranslatable("** of a non-dict")
                spread.append(v)
            else:
                given[k.arg] = self.value_or_taint(k.value, fr, pc)
        for name, a in zip(fields, node.args):
            given[name] = self.value_or_taint(a, fr, pc)
        return self.new_dataclass(cls, given, spread, pc, hit[1])

    def instantiate(self, hit: tuple[ast.ClassDef, str], node: ast.Call, fr: Frame, pc: list[str]) -> Obj:
        """``cls(...)`` of a plain class: a new object whose ``__init__`` (or an inherited one) is walked with the
        call's arguments; attributes it never assigns are unknown."""
        cls, path = hit[0].name, hit[1]
        init = self.find_method(cls, "__init__", path)
        if init is None:
            raise Untranslatable(f"construct {cls}")
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise Untranslatable("star args")
        obj = Obj(f"{cls}()", None, cls, path=path)
        args = [self.value_or_taint(a, fr, pc) for a in node.args]
        kwargs = {k.arg: self.value_or_taint(k.value, fr, pc) for k in node.keywords}
        self.invoke(init[0], init[1], obj, args, kwargs, pc, init[2])
        return obj

    def new_dataclass(self, cls: str, given: dict[str, Any], spread: list[Obj], pc: list[str],
                      path: str | None = None, env: dict[str, Any] | None = None) -> Obj:
        fields = self.dataclass_fields(cls, path) or {}

        def free(attr: str) -> Any:
            if attr in given:
                return given[attr]
            for d in spread:
                try:
                    return self.get_attr(d, attr)
                except Untranslatable:
                    continue
            if attr in fields:
                node, path = fields[attr]
                if node is None:
                    return TAINT
                return self.value_or_taint(node, Frame(path, {}), [])
            return None
        hit = self.find_class(cls, path)
        obj = Obj(f"{cls}()", free, cls, path=hit[1] if hit else path)
        obj.env.update(env or {})
        post = self.find_method(cls, "__post_init__", obj.path)
        if post is not None:
            initvars = {}
            if self.post_init_initvars:
                for p in [a.arg for a in post[0].args.posonlyargs + post[0].args.args][1:]:
                    if p in fields:
                        got = free(p)
                        initvars[p] = TAINT if got is None else got
            self.invoke(post[0], post[1], obj, [], initvars, pc, post[2])
        return obj

    def dataclass_fields(self, cls: str, path: str | None = None) -> dict[str, tuple[ast.AST | None, str]] | None:
        """field -> (default expression or None, path) of a @dataclass ``cls`` and its dataclass bases."""
        hit = self.find_class(cls, path)
        if hit is None:
            return None
        c, path = hit
        if not any("dataclass" in ast.unparse(d) for d in c.decorator_list):
            return None
        out: dict[str, tuple[ast.AST | None, str]] = {}
        for b in c.bases:
            bname = b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None
            inherited = self.dataclass_fields(bname, path) if bname else None
            out.update(inherited or {})
        for s in c.body:
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                v = s.value
                if isinstance(v, ast.Call) and ast.unparse(v.func).split(".")[-1] == "field":
                    kw = {k.arg: k.value for k in v.keywords}
                    if "default" in kw:
                        v = kw["default"]
                    elif "default_factory" in kw:
                        f = ast.unparse(kw["default_factory"])
                        v = ast.List(elts=[], ctx=ast.Load()) if f == "list" else None
                    else:
                        v = None
                out[s.target.id] = (v, path)
        return out

    def invoke(self, func: ast.FunctionDef, path: str, self_obj: Obj | None, args: list, kwargs: dict,
               pc: list[str], cls: str | None = None) -> Any:
        if self.depth >= MAX_DEPTH:
            raise Untranslatable("depth")
        params = [a.arg for a in func.args.posonlyargs + func.args.args]
        bound: dict[str, Any] = {}
        if self_obj is not None and params and params[0] in ("self", "cls"):
            bound[params[0]] = self_obj
            params = params[1:]
        for p, a in zip(params, args):
            bound[p] = a
        defaults = func.args.defaults
        for p, d in zip(params[len(params) - len(defaults):], defaults):
            if p not in bound:
                try:
                    bound[p] = self.value(d, Frame(path, {}), pc)
                except Untranslatable:
                    bound[p] = TAINT
        for a, d in zip(func.args.kwonlyargs, func.args.kw_defaults):
            if d is not None:
                try:
                    bound[a.arg] = self.value(d, Frame(path, {}), pc)
                except Untranslatable:
                    bound[a.arg] = TAINT
        for k, v in kwargs.items():
            bound[k] = v
        for p in params + [a.arg for a in func.args.kwonlyargs]:
            bound.setdefault(p, TAINT)
        fr = Frame(path, bound, cls, base=len(pc))
        self.depth += 1
        try:
            self.run(func.body, fr, list(pc))
        finally:
            self.depth -= 1
        return self.result(fr)

    unknown_returns = False  # a subclass may keep a function's known returns beside one it cannot model

    def result(self, fr: Frame) -> Any:
        if not fr.returns:
            return Expr(repr(NONE))
        if len(fr.returns) == 1 and not fr.returns[0][0]:
            return fr.returns[0][1]
        acc: Any = Expr(repr(NONE)) if not fr.dead else None
        for conds, v in reversed(fr.returns):
            v = _scalar(v)
            if self.unknown_returns and has_unknown(conds):
                # this return and every later one (their conditions carry its unknown exit) are one value the walk
                # cannot model, reached where the known conditions of the returns before it do not hold
                acc = Expr(UNK)
                continue
            if has_unknown(conds) or (not isinstance(v, Expr) and not (conds and self.unknown_returns)):
                return TAINT
            if not isinstance(v, Expr):
                # a value the walk cannot model, returned under a known condition: __unknown__ there (an
                # expression reaching it is not evaluated, while the other returns still are), as merge does
                v = Expr(UNK)
            if acc is None or not conds:
                acc = v
                continue
            acc = Expr(f"({v.text} if {conj(conds)} else {acc.text})")
        return acc if acc is not None and acc.text != UNK else TAINT

    # ---------------------------------------------------------------------------------- statements
    def eff(self, fr: Frame, pc: list[str]) -> list[str]:
        return pc + [e if is_unknown(e) else f"(not {e})" for e in fr.exits]

    def site(self, path: str, line: int, conds: list[str]) -> None:
        key = (path, line)
        why = has_unknown(conds)
        if why:
            self.sites.setdefault(key, []).append(None)
            self.why.setdefault(key, why.split(": ", 1)[-1])
            return
        text = conj(conds) if conds else "True"
        self.sites.setdefault(key, []).append(text if len(text) <= MAX_TEXT else None)

    def assign(self, target: ast.AST, v: Any, fr: Frame, pc: list[str]) -> None:
        conds = self.eff(fr, pc)
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self.assign(t, TAINT, fr, pc)
            return
        if isinstance(target, ast.Name):
            old = fr.locals.get(target.id)
            fr.locals[target.id] = self.merge(old, v, conds[fr.base:], first=target.id not in fr.locals)
            return
        if isinstance(target, ast.Attribute):
            try:
                base = self.value(target.value, fr, pc)
            except Untranslatable:
                return
            if isinstance(base, Obj):
                self.set_attr(base, target.attr, v, conds)
            return
        if isinstance(target, ast.Subscript):
            try:
                base = self.value(target.value, fr, pc)
            except Untranslatable:
                return
            if isinstance(base, Obj):
                if isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
                    self.set_attr(base, target.slice.value, v, conds)
                else:
                    base.env["*"] = TAINT
            return

    def set_attr(self, obj: Obj, attr: str, v: Any, conds: list[str]) -> None:
        try:
            old = self.get_attr(obj, attr)
        except Untranslatable:
            old = TAINT
        obj.env[attr] = self.merge(old, v, conds, first=False)
        if obj.env[attr] is TAINT and attr not in self.taints:
            why = "value" if v is TAINT else "old value" if old is TAINT else "condition" if has_unknown(conds) else "merge"
            self.taints[attr] = (self.lineno, why)

    def merge(self, old: Any, new: Any, conds: list[str], first: bool) -> Any:
        """The value after ``x = new`` under ``conds``. A value the walk cannot model on one side of a known
        condition becomes the name ``__unknown__`` there (never a fact: an expression reaching it is not
        evaluated, while the other side still is)."""
        if has_unknown(conds):
            # the real condition implies every known conjunct: where they do not all hold, the old value stands
            known = [c for c in conds if not is_unknown(c)] + [self.partial[c] for c in conds if c in self.partial]
            old = _scalar(old)
            if not known or first or not isinstance(old, Expr):
                return TAINT
            return self.bind(f"({UNK} if {conj(known)} else {old.text})")
        if not conds or first:
            return new
        if new is old:
            return new
        if isinstance(old, Obj) and isinstance(new, Obj):
            return ObjIf(conj(conds), new, old)
        if isinstance(old, Obj) and new is TAINT:
            return ObjIf(conj(conds), UnknownObj(), old)
        if isinstance(new, Obj) and old is TAINT:
            return ObjIf(conj(conds), new, UnknownObj())
        old, new = _scalar(old), _scalar(new)
        if isinstance(old, Obj) or isinstance(new, Obj):
            return TAINT
        nt = new.text if isinstance(new, Expr) else UNK
        ot = old.text if isinstance(old, Expr) else UNK
        if nt == UNK and ot == UNK:
            return TAINT
        return self.bind(f"({nt} if {conj(conds)} else {ot})")

    def bind(self, text: str) -> Any:
        """A long value gets a name of its own (``_v<n>``, defined once in ``lets`` and evaluated before the rows),
        so that checks reading it stay short however many rewrites it went through."""
        if len(text) <= self.let_at:
            return Expr(text)
        if len(text) > MAX_TEXT:
            return TAINT
        name = f"_v{len(self.lets)}"
        self.lets.append((name, text))
        return Expr(name)

    def run(self, stmts: list[ast.stmt], fr: Frame, pc: list[str]) -> None:
        for s in stmts:
            if fr.dead:
                return
            self.stmt(s, fr, pc)

    def test(self, node: ast.AST, fr: Frame, pc: list[str]) -> str:
        try:
            return self.text(node, fr, pc, True)
        except Untranslatable as e:
            marker = unknown(f"{ast.unparse(node)[:80]}: {e} #{len(self.partial)}")
            if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
                known = []
                for v in node.values:
                    try:
                        known.append(self.text(v, fr, pc, True))
                    except Untranslatable:
                        pass
                if known:
                    self.partial[marker] = conj(known)
            return marker

    def stmt(self, s: ast.stmt, fr: Frame, pc: list[str]) -> None:
        self.lineno = s.lineno
        if isinstance(s, ast.If):
            t = self.test(s.test, fr, pc)
            neg = t if is_unknown(t) else f"(not {t})"
            if t != "False":
                self.run(s.body, fr, pc + [t])
            if t != "True" and s.orelse:
                self.run(s.orelse, fr, pc + [neg])
            return
        if isinstance(s, ast.Raise):
            if self.record_fills and isinstance(s.exc, ast.Call) and s.exc.args:
                self.record_fill(fr.path, s.lineno, s.exc.args[0], fr, pc)
            self.site(fr.path, s.lineno, self.eff(fr, pc))
            self.exit(fr, pc, raised=True)
            return
        if isinstance(s, ast.Assert):
            if self.record_fills and s.msg is not None:
                self.record_fill(fr.path, s.lineno, s.msg, fr, pc)
            t = self.test(s.test, fr, pc)
            self.site(fr.path, s.lineno, self.eff(fr, pc) + ([t] if is_unknown(t) else [f"(not {t})"]))
            return
        if isinstance(s, ast.Return):
            v = TAINT
            if s.value is not None:
                v = self.value_or_taint(s.value, fr, pc)
            else:
                v = Expr(repr(NONE))
            fr.returns.append((self.eff(fr, pc)[fr.base:], v))
            self.exit(fr, pc)
            return
        if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if s.value is None:
                return
            if isinstance(s, ast.AugAssign):
                v = self.value_or_taint(ast.BinOp(left=_load(s.target), op=s.op, right=s.value), fr, pc)
                targets = [s.target]
            else:
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                if len(targets) == 1 and isinstance(targets[0], (ast.Tuple, ast.List)) \
                        and isinstance(s.value, (ast.Tuple, ast.List)) and len(s.value.elts) == len(targets[0].elts):
                    # a, b = x, y: each name gets its own value (all read before any is assigned)
                    vals = [self.value_or_taint(e, fr, pc) for e in s.value.elts]
                    for t, v in zip(targets[0].elts, vals):
                        self.assign(t, v, fr, pc)
                    return
                v = self.value_or_taint(s.value, fr, pc)
            for t in targets:
                self.assign(t, v, fr, pc)
            return
        if isinstance(s, ast.Expr):
            self.expr_stmt(s.value, fr, pc)
            return
        if isinstance(s, ast.For) and self.fields_copy(s, fr, pc):
            return
        if isinstance(s, ast.For) and self.unrolled(s, fr, pc):
            return
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            if isinstance(s, (ast.For, ast.AsyncFor)):
                self.assign(s.target, TAINT, fr, pc)
            self.run(s.body, fr, pc + [unknown("inside a loop")])
            self.run(s.orelse, fr, pc + [unknown("inside a loop")])
            return
        if isinstance(s, (ast.With, ast.AsyncWith)):
            for it in s.items:
                if it.optional_vars is not None:
                    self.assign(it.optional_vars, TAINT, fr, pc)
            self.run(s.body, fr, pc)
            return
        if isinstance(s, ast.Try):
            inner = pc + [unknown("inside a try block whose handlers may catch it")] if s.handlers else pc
            self.run(s.body, fr, inner)
            for h in s.handlers:
                self.run(h.body, fr, pc + [unknown(f"in an except {ast.unparse(h.type) if h.type else ''} handler")])
            self.run(s.orelse, fr, inner)
            self.run(s.finalbody, fr, pc)
            return
        if isinstance(s, ast.Delete):
            for t in s.targets:
                self.assign(t, TAINT, fr, pc)
            return
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            fr.locals[s.name] = TAINT
            return
        if isinstance(s, ast.Match):
            for c in s.cases:
                self.run(c.body, fr, pc + [unknown("in a match case")])
            return
        # pass, import, global, nonlocal, break, continue: nothing to model
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            for a in s.names:
                fr.locals[(a.asname or a.name).split(".")[0]] = TAINT

    def record_fill(self, path: str, line: int, msg: ast.AST, fr: Frame, pc: list[str]) -> None:
        """The expressions of the f-string fields of message ``msg`` here, keyed by the field's text as
        tools/engine_check_sites.py writes it into the site's message (``{self.x}``)."""
        got = self.fills.setdefault((path, line), {})
        for n in ast.walk(msg):
            if not isinstance(n, ast.FormattedValue):
                continue
            key = "{" + " ".join(ast.unparse(n.value).split()) + "}"
            try:
                v = self.value(n.value, fr, pc)
                text = self.as_text(_scalar(v)) if not isinstance(v, Obj) or getattr(v, "scalar", None) else None
            except Untranslatable:
                text = None
            if text is not None and (UNK in free_names(text) or len(text) > LET_AT):
                text = None
            if key in got and got[key] != text:
                text = None
            got[key] = text

    def unrolled(self, s: ast.For, fr: Frame, pc: list[str]) -> bool:
        """A loop over a constant list (``for key in REMOVED_KEYS:``) is walked once per element."""
        if s.orelse or any(isinstance(n, (ast.Break, ast.Continue)) for n in ast.walk(s)):
            return False
        keys = self.dict_keys(s.iter, fr)
        if keys is not None:   # for key, message in CONST.items(): the keys are known, the values are not needed
            for k in keys:
                if isinstance(s.target, ast.Tuple) and len(s.target.elts) == 2:
                    self.assign(s.target.elts[0], self.literal(k), fr, pc)
                    self.assign(s.target.elts[1], TAINT, fr, pc)
                else:
                    self.assign(s.target, self.literal(k), fr, pc)
                self.run(s.body, fr, pc)
            return True
        try:
            it = self.value(s.iter, fr, pc)
        except Untranslatable:
            return False
        if not isinstance(it, Expr) or free_names(it.text):
            return False
        try:
            items = ast.literal_eval(it.text)
        except (ValueError, SyntaxError):
            return False
        if not isinstance(items, (tuple, list)) or len(items) > 64:
            return False
        for x in items:
            if isinstance(s.target, ast.Tuple) and isinstance(x, (tuple, list)) and len(x) == len(s.target.elts):
                for t, v in zip(s.target.elts, x):
                    self.assign(t, self.literal(v), fr, pc)
            else:
                self.assign(s.target, self.literal(x), fr, pc)
            self.run(s.body, fr, pc)
        return True

    def dict_keys(self, node: ast.AST, fr: Frame) -> list | None:
        """The literal keys of ``CONST.items()`` / ``CONST.keys()`` / ``CONST`` for a module-level dict literal."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("items", "keys") \
                and not node.args:
            node = node.func.value
        if not isinstance(node, ast.Name) or node.id in fr.locals:
            return None
        m = self.modules.get(fr.path)
        for st in (m.tree.body if m else []):
            if isinstance(st, (ast.Assign, ast.AnnAssign)) and isinstance(st.value, ast.Dict):
                tgt = st.targets[0] if isinstance(st, ast.Assign) else st.target
                if isinstance(tgt, ast.Name) and tgt.id == node.id:
                    if all(isinstance(k, ast.Constant) for k in st.value.keys):
                        return [k.value for k in st.value.keys]
        return None

    def fields_copy(self, s: ast.For, fr: Frame, pc: list[str]) -> bool:
        """``for f in dataclasses.fields(C): if hasattr(src, f.name): kw[f.name] = getattr(src, f.name)``: every
        field of C that ``src`` has becomes ``kw``'s (Megatron-LM builds its configs from args this way)."""
        it = s.iter
        if not (isinstance(it, ast.Call) and ast.unparse(it.func) in ("dataclasses.fields", "fields") and len(it.args) == 1
                and isinstance(s.target, ast.Name) and len(s.body) == 1 and isinstance(s.body[0], ast.If)):
            return False
        body = s.body[0].body
        if not (len(body) == 1 and isinstance(body[0], ast.Assign) and isinstance(body[0].targets[0], ast.Subscript)):
            return False
        kw = self.value_or_taint(body[0].targets[0].value, fr, pc)
        src_node = s.body[0].test.args[0] if isinstance(s.body[0].test, ast.Call) and s.body[0].test.args else None
        src = self.value_or_taint(src_node, fr, pc) if src_node is not None else TAINT
        if not isinstance(kw, Obj) or not isinstance(src, Obj) or has_unknown(self.eff(fr, pc)):
            return False
        # the class may be a local (Megatron picks TransformerConfig or a subclass): the constructor asks only for
        # its own fields, so copying whatever ``src`` has is the same as copying the fields it has
        cls = ast.unparse(it.args[0]).split(".")[-1]
        fields = self.dataclass_fields(cls, fr.path)
        walker = self

        def free(attr: str) -> Any:
            if fields is not None and attr not in fields:
                return None
            try:
                return walker.get_attr(src, attr)
            except Untranslatable:
                return None
        kw.free = free
        return True

    def exit(self, fr: Frame, pc: list[str], raised: bool = False) -> None:
        """The path ends (return / raise / exit()): what follows runs only when ``pc`` did not hold. A raise under
        an unknown condition is not carried forward (a later check then also fires where the earlier raise would
        have stopped the job first: a job that fails either way); a return under an unknown condition makes
        everything after it unknown."""
        local = self.eff(fr, pc)[fr.base:]
        if not local:
            fr.dead = True
        elif raised:
            return  # see above: a later check may also fire where this raise stops the job first
        elif has_unknown(local):
            if not raised:
                fr.exits.append(unknown("after a return under a condition that did not translate"))
                self.unknown_exits.append((fr.path, self.lineno))
        else:
            fr.exits.append(_paren(conj(local)))

    def expr_stmt(self, node: ast.AST, fr: Frame, pc: list[str]) -> None:
        if not isinstance(node, ast.Call):
            return
        f = node.func
        if ast.unparse(f) in ("exit", "quit", "sys.exit", "os._exit"):
            self.exit(fr, pc, raised=True)  # the process ends: like a raise, nothing after it is observed
            return
        if isinstance(f, ast.Name) and f.id == "setattr" and len(node.args) == 3:
            try:
                base = self.value(node.args[0], fr, pc)
            except Untranslatable:
                return
            if isinstance(base, Obj):
                name = self.const_str(node.args[1], fr, pc)
                if name is not None:
                    self.set_attr(base, name, self.value_or_taint(node.args[2], fr, pc), self.eff(fr, pc))
                else:
                    key = "setattr(<computed name>)"
                    self.opaque[key] = self.opaque.get(key, 0) + 1
            return
        if isinstance(f, ast.Attribute) and f.attr in ("append", "extend", "remove", "pop", "insert", "update",
                                                        "clear", "add", "discard", "setdefault", "sort"):
            # an in-place change of a list / dict attribute
            if isinstance(f.value, ast.Attribute):
                try:
                    base = self.value(f.value.value, fr, pc)
                except Untranslatable:
                    return
                if isinstance(base, Obj):
                    base.env[f.value.attr] = TAINT
            elif isinstance(f.value, ast.Name) and f.value.id in fr.locals and not isinstance(fr.locals[f.value.id], Obj):
                fr.locals[f.value.id] = TAINT
            return
        try:
            self.call_forgetting(node, fr, pc)
        except Untranslatable:
            pass


# the reasons ``call`` gives for a call it did not follow (see Walker.call_forgetting)
NOT_FOLLOWED = ("call ", "star args", "depth", "construct ")
# calls that change none of the objects they are handed (builtins that read or copy, logging)
PURE_CALLS = {"len", "str", "repr", "int", "float", "bool", "min", "max", "abs", "sorted", "list", "tuple", "set",
              "frozenset", "dict", "any", "all", "isinstance", "issubclass", "getattr", "hasattr", "callable", "type",
              "id", "hash", "print", "format", "round", "sum", "range", "enumerate", "zip", "vars", "cast"}
PURE_PREFIXES = ("logger.", "logging.", "log.", "warnings.warn")


def _pure_call(node: ast.Call) -> bool:
    name = ast.unparse(node.func)
    return name in PURE_CALLS or name.startswith(PURE_PREFIXES)


def fold(v: Expr) -> Expr:
    """An expression without free names is evaluated now (``'__none__' or 'x'`` -> ``'x'``)."""
    from kg.engine.expr import ExprError, ExprTypeError, MissingFact, evaluate
    if v.ref:
        return v
    try:
        if free_names(v.text):
            return v
        r = evaluate(v.text, {}, FUNCTIONS)
    except (ExprError, ExprTypeError, MissingFact, ZeroDivisionError, SyntaxError, TypeError, ValueError, KeyError):
        return v
    if r is None or isinstance(r, (bool, int, float, str)):
        return Expr(repr(r if r is not None else NONE))
    return v


BUILTIN_TYPES = ("int", "float", "str", "bool", "list", "tuple", "dict")


def is_a(v: Any, t: str) -> bool:
    """isinstance(v, t) for the builtin type named ``t`` (lists and tuples in the namespace are lists)."""
    if v in (NONE, None):
        return False
    return {"int": lambda: isinstance(v, int), "float": lambda: isinstance(v, float),
            "str": lambda: isinstance(v, str), "bool": lambda: isinstance(v, bool),
            "list": lambda: isinstance(v, (list, tuple)), "tuple": lambda: isinstance(v, (list, tuple)),
            "dict": lambda: isinstance(v, dict)}[t]()


FUNCTIONS = {"truthy": lambda v: truthy(v), "is_a": lambda v, t: is_a(v, t), "upper": lambda v: str(v).upper(),
             "str": lambda v: str(v), "startswith": lambda v, p: isinstance(v, str) and v.startswith(p),
             "endswith": lambda v, p: isinstance(v, str) and v.endswith(p)}


def truthy(v: Any) -> bool:
    """Python truth of a namespace value, None (the sentinel) being false."""
    return v not in (NONE, None) and bool(v)


def _load(node: ast.AST) -> ast.AST:
    n = ast.parse(ast.unparse(node), mode="eval").body
    return n


def _is_boolean(t: str) -> bool:
    """True when the expression text already yields a bool (a comparison, not, and/or of booleans, truthy())."""
    try:
        n = ast.parse(t, mode="eval").body
    except SyntaxError:
        return False
    return _bool_node(n)


def _bool_node(n: ast.AST) -> bool:
    if isinstance(n, ast.Compare):
        return True
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        return True
    if isinstance(n, ast.BoolOp):
        return all(_bool_node(v) for v in n.values)
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("truthy", "is_a"):
        return True
    if isinstance(n, ast.Constant) and isinstance(n.value, bool):
        return True
    if isinstance(n, ast.Name) and n.id in ("True", "False"):
        return True
    if isinstance(n, ast.IfExp):
        return _bool_node(n.body) and _bool_node(n.orelse)
    return False


def _is_literal_bool(t: str) -> bool:
    return t in ("True", "False")


def rows(walker: Walker, names_of: Callable[[str], set[str]] | None = None) -> dict[tuple[str, int], dict[str, Any]]:
    """(path, line) -> {expr, names, paths, translated} for every site reached at least once with a condition."""
    from kg.engine.expr import ExprError, compile_expr
    out = {}
    lets = dict(walker.lets)
    for key, conds in walker.sites.items():
        good = sorted({c for c in conds if c is not None})
        if not good:
            continue
        expr = good[0] if len(good) == 1 else "(" + " or ".join(_paren(c) for c in good) + ")"
        if not free_names(expr):
            continue  # constant: an unconditional raise on a path the walk reached (an internal branch), not a check
        try:
            compile_expr(expr, tuple(FUNCTIONS))
        except ExprError:
            continue
        names = free_names(expr)
        out[key] = {"expr": expr, "names": sorted(names), "inputs": sorted(inputs_of(names, lets)),
                    "paths": len(conds), "translated": len([c for c in conds if c])}
    return out


def inputs_of(names: set[str], lets: dict[str, str]) -> set[str]:
    """The input names an expression reads, through the lets it uses."""
    out, todo, seen = set(), list(names), set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in lets:
            todo += list(free_names(lets[n]))
        else:
            out.add(n)
    return out


def used_lets(rows_: dict, lets: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The lets the rows read (directly or through other lets), in definition order."""
    from kg.frameworks.checkrows import lets_read_by
    return lets_read_by((n for r in rows_.values() for n in r["names"]), lets)


FIT_NODES = 200  # a sub-expression named to bring a row or value within kg.engine.expr's cost limits: at most this many nodes


def name_largest_part(text: str, new_let, absent: str | None = None) -> str | None:
    """One round of fitting ``text`` (a row or a value) within kg.engine.expr's cost limits: its largest proper
    sub-expression of at most FIT_NODES nodes and MAX_TEXT characters (not a name or a constant) becomes a let,
    named by ``new_let(text of the part)``. The new text, or None when nothing can be named: no part of 4 or more
    nodes, a part that reads no name (a constant) or reads ``absent`` (a value not substituted yet)."""
    try:
        tree = ast.parse(text.replace("\n", " "), mode="eval")
    except (SyntaxError, RecursionError, MemoryError):
        return None
    sizes: dict[int, int] = {}

    def size_of(n: ast.AST) -> int:
        sizes[id(n)] = 1 + sum(size_of(c) for c in ast.iter_child_nodes(n))
        return sizes[id(n)]
    size_of(tree.body)
    best: tuple[int, ast.AST] | None = None
    loop_names = {t.id for n in ast.walk(tree) if isinstance(n, ast.comprehension) for t in ast.walk(n.target)
                  if isinstance(t, ast.Name)}
    for n in ast.walk(tree.body):
        if n is tree.body or not isinstance(n, ast.expr) or isinstance(n, (ast.Name, ast.Constant, ast.GeneratorExp)):
            continue
        size = sizes[id(n)]
        # the text is one line (ast.unparse): a node's columns give its length, without unparsing it
        if size <= FIT_NODES and n.end_col_offset - n.col_offset <= MAX_TEXT and (best is None or size > best[0]):
            best = (size, n)
    if best is None or best[0] < 4:
        return None
    seg = ast.unparse(best[1])
    names = free_names(seg)
    if not names or (absent is not None and absent in names) or names & loop_names:
        return None  # (a part reading an element of an any() / all() generator means nothing outside it)
    name, node = new_let(seg), best[1]

    class Put(ast.NodeTransformer):
        def visit(self, n: ast.AST) -> ast.AST:
            return ast.Name(name, ast.Load()) if n is node else super().visit(n)
    return ast.unparse(Put().visit(tree))


def free_names(expr: str) -> set[str]:
    """The names ``expr`` reads (not function names, not the names an any() / all() generator binds inside it)."""
    from kg.frameworks.checkrows import names_of
    return set(names_of(expr))


def substitute(expr: str, mapping: dict[str, str]) -> str:
    """Replace free names of ``expr`` by expression texts (AST-level, so strings are untouched)."""
    tree = ast.parse(expr, mode="eval")

    class T(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> ast.AST:
            if n.id in mapping:
                return ast.parse(mapping[n.id], mode="eval").body
            return n

        def visit_Call(self, n: ast.Call) -> ast.AST:
            n.args = [self.visit(a) for a in n.args]
            return n
    return ast.unparse(T().visit(tree))


class Firing:
    """Whether a row can ever be true under kg.engine.expr's evaluation order (``and`` / ``or`` short-circuit left to
    right, a comparison chain stops at its first false link, ``a if c else b`` evaluates ``c`` then one branch), when
    ``__unknown__`` (``UNK``) and every let that always reaches it raise MissingFact. A row that can never be true
    refuses nothing whatever the stack: it is not a check, and a site whose only row is one is not covered.
    Over-approximate: "can be true" unless the structure proves otherwise (no values are consulted)."""

    def __init__(self, lets: dict[str, str]):
        self.lets = lets
        self.memo: dict[str, bool] = {}

    def raises(self, n: ast.AST) -> bool:
        """Evaluating ``n`` (once reached) always reaches ``__unknown__``."""
        if isinstance(n, ast.Expression):
            return self.raises(n.body)
        if isinstance(n, ast.Name):
            if n.id == UNK:
                return True
            if n.id in self.lets:
                if n.id not in self.memo:
                    self.memo[n.id] = False  # a cycle cannot occur (lets are defined before use); be safe
                    self.memo[n.id] = self.raises(ast.parse(self.lets[n.id], mode="eval"))
                return self.memo[n.id]
            return False
        if isinstance(n, ast.BoolOp):
            return self.raises(n.values[0])
        if isinstance(n, ast.Compare):
            return self.raises(n.left) or self.raises(n.comparators[0])
        if isinstance(n, ast.IfExp):
            return self.raises(n.test) or (self.raises(n.body) and self.raises(n.orelse))
        if isinstance(n, ast.BinOp):
            return self.raises(n.left) or self.raises(n.right)
        if isinstance(n, ast.UnaryOp):
            return self.raises(n.operand)
        if isinstance(n, (ast.List, ast.Tuple, ast.Set)):
            return any(self.raises(x) for x in n.elts)
        if isinstance(n, ast.Call):
            return any(self.raises(x) for x in n.args)
        return False

    def can_be_true(self, n: ast.AST) -> bool:
        if isinstance(n, ast.Expression):
            return self.can_be_true(n.body)
        if self.raises(n):
            return False
        if isinstance(n, ast.Constant):
            return bool(n.value)
        if isinstance(n, ast.BoolOp):
            if isinstance(n.op, ast.And):
                return all(self.can_be_true(v) for v in n.values)
            for v in n.values:  # `or`: the first operand that can be true, unless one before it always raises
                if self.can_be_true(v):
                    return True
                if self.raises(v):
                    return False
            return False
        if isinstance(n, ast.Compare):
            return not any(self.raises(c) for c in n.comparators)
        if isinstance(n, ast.IfExp):
            return self.can_be_true(n.body) or self.can_be_true(n.orelse)
        return True

    def fires(self, expr: str) -> bool:
        return self.can_be_true(ast.parse(expr, mode="eval"))


class BoolFold(ast.NodeTransformer):
    """Boolean constant folding: ``x and False`` -> False, ``(a if True else b)`` -> a, ``not True`` -> False (a dead
    branch stays out of the row instead of making it read names it never needs). Used by tools/sglang_generated_checks.py
    (simplify); a generator may subclass it (vllm_generated_checks.simplify also folds ``truthy(True)``)."""

    @staticmethod
    def const(n: ast.AST) -> Any:
        return n.value if isinstance(n, ast.Constant) and isinstance(n.value, bool) else None

    def visit_BoolOp(self, n: ast.BoolOp) -> ast.AST:
        self.generic_visit(n)
        absorbing = isinstance(n.op, ast.Or)  # True absorbs an `or`, False an `and`
        kept = []
        for v in n.values:
            c = self.const(v)
            if c is absorbing:
                return ast.Constant(absorbing)
            if c is None:
                kept.append(v)
        if not kept:
            return ast.Constant(not absorbing)
        return kept[0] if len(kept) == 1 else ast.BoolOp(op=n.op, values=kept)

    def visit_UnaryOp(self, n: ast.UnaryOp) -> ast.AST:
        self.generic_visit(n)
        c = self.const(n.operand)
        return ast.Constant(not c) if isinstance(n.op, ast.Not) and c is not None else n

    def visit_IfExp(self, n: ast.IfExp) -> ast.AST:
        self.generic_visit(n)
        c = self.const(n.test)
        return (n.body if c else n.orelse) if c is not None else n
