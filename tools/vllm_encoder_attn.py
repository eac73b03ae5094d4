"""Which model classes build an encoder attention that reads ``--mm-encoder-attn-backend``, read from the released
model code with ``ast`` (nothing imported or run); tools/vllm_model_registry.py writes it as the registry fact
``builds_mm_encoder_attention``.

What vLLM does (read at 0.33.0 / 0.34.0): ``models/vision.py`` ``get_vit_attn_backend(head_size, dtype)`` reads
the served model's ``multimodal_config.mm_encoder_attn_backend`` and passes it to
``current_platform.get_vit_attn_backend(head_size, dtype, backend=...)`` (vision.py:86-113 at 0.34.0), whose
``assert backend in cls.get_supported_vit_attn_backends()`` refuses a backend the platform does not list
(platforms/cuda.py:586, rocm.py:953, xpu.py:296, interface.py:432 at 0.34.0). ``MMEncoderAttention.__init__``
calls it (layers/attention/mm_encoder_attention.py:353), and so do vision towers directly (qwen2_5_vl.py:689 ...).
The towers are built even where ``--limit-mm-per-prompt`` turns a modality off (``_mark_tower_model`` builds them
on the meta device, models/interfaces.py:384-394), so building the model reaches the check.

A class builds one when its ``__init__`` (the first of its MRO; ``super().__init__`` goes on along the MRO) reaches,
on every path that does not raise, a call of that function or the constructor of a class that builds one
(directly, through a ``self.<method>()`` of the class or a module-level function of the release). Under-
approximated: a statement after an ``if`` / ``try`` / ``while`` / ``match`` that can return, break or continue,
and the bodies of those statements, conditional expressions, ``and`` / ``or`` operands after the first and
comprehensions with a filter are not read; names that do not resolve to a class or function of the files read
(torch's, a class passed in a variable: siglip.py's ``attn_cls``) build nothing. A raise or assert on the way
(siglip.py:348 embed_dim divisible by the heads) is passed over: where it fires vLLM refuses the model anyway.
"""
from __future__ import annotations

import ast
from typing import Any, Callable


def imported_module(node: ast.ImportFrom, path: str) -> str:
    """The absolute module a ``from M import x`` in the module file ``path`` names (relative levels resolved)."""
    mod = node.module or ""
    if node.level:
        parts = path.rsplit("/", 1)[0].replace("/", ".").split(".")
        parts = parts[:len(parts) - (node.level - 1)]
        mod = ".".join(parts + ([mod] if mod else []))
    return mod


VISION = "vllm/model_executor/models/vision.py"
SEED = "get_vit_attn_backend"
# files besides the model modules that hold classes the towers construct (MMEncoderAttention)
EXTRA = ("vllm/model_executor/layers/attention/", "vllm/model_executor/custom_op.py")
COND = (ast.If, ast.Try, ast.While, ast.Match) if hasattr(ast, "Match") else (ast.If, ast.Try, ast.While)


def seed_ok(tree: ast.Module | None) -> bool:
    """vision.py's ``get_vit_attn_backend`` reads ``mm_cfg.mm_encoder_attn_backend`` and returns
    ``_get_vit_attn_backend(..., attn_backend_override=...)``, which returns ``current_platform.get_vit_attn_backend(
    ..., backend=attn_backend_override)``: the shape read at 0.33.0 / 0.34.0 (False for any other)."""
    funcs = {f.name: f for f in (tree.body if tree else []) if isinstance(f, ast.FunctionDef)}
    outer, inner = funcs.get(SEED), funcs.get("_" + SEED)
    if outer is None or inner is None:
        return False

    def returns(f: ast.FunctionDef) -> list[ast.Call]:
        return [s.value for s in f.body if isinstance(s, ast.Return) and isinstance(s.value, ast.Call)]
    r1, r2 = returns(outer), returns(inner)
    return ("mm_cfg.mm_encoder_attn_backend" in ast.unparse(outer) and len(r1) == 1 and len(r2) == 1
            and ast.unparse(r1[0].func) == "_" + SEED
            and any(k.arg == "attn_backend_override" for k in r1[0].keywords)
            and ast.unparse(r2[0].func) == "current_platform." + SEED
            and any(k.arg == "backend" and ast.unparse(k.value) == "attn_backend_override" for k in r2[0].keywords))


def _calls(node: ast.AST) -> list[ast.Call]:
    """The calls ``node`` makes whenever it runs (module doc: not under a conditional expression, a later operand
    of ``and`` / ``or``, a lambda, a nested def or a filtered comprehension)."""
    out: list[ast.Call] = []

    def go(n: ast.AST) -> None:
        if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        if isinstance(n, ast.IfExp):
            go(n.test)
            return
        if isinstance(n, ast.BoolOp):
            go(n.values[0])
            return
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            if any(g.ifs for g in n.generators):
                return
        if isinstance(n, ast.Call):
            out.append(n)
        for c in ast.iter_child_nodes(n):
            go(c)
    go(node)
    return out


def _stmt_calls(body: list[ast.stmt]) -> list[ast.Call]:
    """The calls of a function body made on every path that gets past its start (module doc)."""
    out: list[ast.Call] = []
    for s in body:
        if isinstance(s, COND):
            if any(isinstance(n, (ast.Return, ast.Continue, ast.Break)) for n in ast.walk(s)):
                break  # what follows runs only on some paths
            continue
        if isinstance(s, (ast.With, ast.AsyncWith)):
            for it in s.items:
                out += _calls(it.context_expr)
            out += _stmt_calls(s.body)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            out += _calls(s.iter)
            if not any(isinstance(n, (ast.Break, ast.Return, ast.Continue)) for n in ast.walk(s)):
                out += _stmt_calls(s.body)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        else:
            out += _calls(s)
        if isinstance(s, (ast.Return, ast.Raise)):
            break
    return out


class Builds:
    """``builds(cls, path)``: the class builds an encoder attention (module doc). ``classes`` is
    tools/vllm_model_registry.Classes over the model files and EXTRA."""

    def __init__(self, classes: Any, mro: Callable[[ast.ClassDef, str], list[tuple[ast.ClassDef, str]] | None]):
        self.classes, self.mro = classes, mro
        self.memo: dict[tuple[str, str, str], bool] = {}

    def func(self, name: str, path: str, depth: int = 0) -> tuple[ast.FunctionDef, str] | None:
        """The module-level function ``name`` as module ``path`` sees it (defined there or imported)."""
        t = self.classes.tree(path)
        if t is None or depth > 6:
            return None
        for n in t.body:
            if isinstance(n, ast.FunctionDef) and n.name == name:
                return n, path
        for n in t.body:
            if isinstance(n, ast.ImportFrom):
                for a in n.names:
                    if (a.asname or a.name) != name:
                        continue
                    p = self.classes.module_path(imported_module(n, path))
                    return self.func(a.name, p, depth + 1) if p else None
        return None

    def body_builds(self, body: list[ast.stmt], path: str, mro: list[tuple[ast.ClassDef, str]] | None,
                    at: int) -> bool:
        """A function body builds one: ``mro`` / ``at`` are the class and the MRO index of the method's class."""
        for call in _stmt_calls(body):
            f = call.func
            if isinstance(f, ast.Name):
                if f.id == SEED and self.func(SEED, path) is not None and self.func(SEED, path)[1] == VISION:
                    return True
                hit = self.classes.find(f.id, path)
                if hit is not None and self.cls(*hit):
                    return True
                fn = self.func(f.id, path) if hit is None else None
                if fn is not None and self.fn(*fn):
                    return True
            elif isinstance(f, ast.Attribute) and mro is not None:
                if ast.unparse(f) == "super().__init__":
                    if self.init_from(mro, at + 1):
                        return True
                elif isinstance(f.value, ast.Name) and f.value.id == "self":
                    got = self.method(mro, f.attr)
                    if got is not None and self.guard(("m", got[1][1], f"{got[1][0].name}.{f.attr}"),
                                                      lambda: self.body_builds(got[0].body, got[1][1], mro, got[2])):
                        return True
        return False

    def guard(self, key: tuple[str, str, str], compute: Callable[[], bool]) -> bool:
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = False  # a cycle builds nothing
        self.memo[key] = compute()
        return self.memo[key]

    @staticmethod
    def method(mro: list[tuple[ast.ClassDef, str]], name: str, start: int = 0
               ) -> tuple[ast.FunctionDef, tuple[ast.ClassDef, str], int] | None:
        for i, (c, p) in enumerate(mro[start:], start):
            for s in c.body:
                if isinstance(s, ast.FunctionDef) and s.name == name:
                    return s, (c, p), i
        return None

    def init_from(self, mro: list[tuple[ast.ClassDef, str]], start: int) -> bool:
        got = self.method(mro, "__init__", start)
        if got is None:
            return False
        f, (c, p), i = got
        return self.guard(("i", p, f"{mro[0][0].name}@{c.name}"), lambda: self.body_builds(f.body, p, mro, i))

    def cls(self, c: ast.ClassDef, path: str) -> bool:
        def compute() -> bool:
            m = self.mro(c, path)
            return m is not None and self.init_from(m, 0)
        return self.guard(("c", path, c.name), compute)

    def fn(self, f: ast.FunctionDef, path: str) -> bool:
        return self.guard(("f", path, f.name), lambda: self.body_builds(f.body, path, None, 0))


# --------------------------------------------------------------------------------------------- the rows
# the walk's side (tools/vllm_generated_checks.walk): the platform's assert over the served model's fact
# AttentionBackendEnum: the names --mm-encoder-attn-backend takes (MultiModalConfig's before-validator,
# ``AttentionBackendEnum[value.upper()]``, config/multimodal.py:495-511 at 0.34.0)
ATTN_REGISTRY = "vllm/v1/attention/backends/registry.py"
FACT = "vllm_model__builds_mm_encoder_attention"  # kg.engines.vllm.registry gives it for the served architecture
F32 = ("float", "float32")  # --dtype names of torch.float32 (config/model.py _STR_DTYPE_TO_TORCH_DTYPE)


def enum_members(text: str | None) -> tuple[str, ...] | None:
    """The member names of ``class AttentionBackendEnum`` (registry.py:34 at 0.34.0), lower-cased."""
    try:
        tree = ast.parse(text or "")
    except SyntaxError:
        return None
    c = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "AttentionBackendEnum"), None)
    names = [t.id for s in (c.body if c else []) if isinstance(s, ast.Assign) for t in s.targets
             if isinstance(t, ast.Name) and t.id.isupper()]
    return tuple(sorted(n.lower() for n in names)) or None


def supported(f: ast.FunctionDef | None) -> tuple[str, ...] | None:
    """The names every ``return [AttentionBackendEnum.X, ...]`` of get_supported_vit_attn_backends lists (the same set
    on every return: CUDA's two capability branches, cuda.py:563-576 at 0.34.0), lower-cased; None otherwise."""
    rets = [n.value for n in ast.walk(f) if isinstance(n, ast.Return)] if f else []
    sets = set()
    for r in rets:
        if not (isinstance(r, ast.List) and r.elts and all(
                isinstance(e, ast.Attribute) and ast.unparse(e.value) == "AttentionBackendEnum" for e in r.elts)):
            return None
        sets.add(frozenset(e.attr.lower() for e in r.elts))
    return tuple(sorted(next(iter(sets)))) if len(sets) == 1 else None


def check_shape(f: ast.FunctionDef) -> tuple[int, bool, ast.Assert] | None:
    """(the assert's line, whether a float32 model dtype returns before it: XPU's, xpu.py:288-293 at 0.34.0) where
    get_vit_attn_backend is ``[if dtype == torch.float32: ... return X]`` then ``if backend is not None: assert backend
    in cls.get_supported_vit_attn_backends(), ...``; None for any other shape."""
    body = [s for s in f.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    f32 = False
    if body and isinstance(body[0], ast.If) and ast.unparse(body[0].test) == "dtype == torch.float32" \
            and not body[0].orelse and isinstance(body[0].body[-1], ast.Return):
        f32, body = True, body[1:]
    first = body[0] if body else None
    if not (isinstance(first, ast.If) and ast.unparse(first.test) == "backend is not None" and first.body
            and isinstance(first.body[0], ast.Assert)
            and ast.unparse(first.body[0].test) == "backend in cls.get_supported_vit_attn_backends()"):
        return None
    return first.body[0].lineno, f32, first.body[0]


def vit_walk(w: Any, args: Any, registry_text: str | None, platform: tuple[str, str, str]) -> None:
    """Record the platform's assert (module doc) as a row on this walk: the served model builds an encoder attention,
    --mm-encoder-attn-backend names an AttentionBackendEnum member the platform does not list [and, on XPU, --dtype
    is not float32]. Nothing where a shape read here differs."""
    members = enum_members(registry_text)
    got = w.find_method(platform[1], "get_vit_attn_backend", platform[2])
    sup = w.find_method(platform[1], "get_supported_vit_attn_backends", platform[2])
    shape = check_shape(got[0]) if got else None
    names = supported(sup[0]) if sup else None
    free = getattr(args, "free", None)
    if members is None or shape is None or names is None or free is None:
        return
    b, dtype = free("mm_encoder_attn_backend"), free("dtype")
    if not (hasattr(b, "text") and hasattr(dtype, "text")):
        return
    line, f32, node = shape
    conds = [f"truthy({FACT})", f"is_a({b.text}, 'str')", f"(lower({b.text}) in {members!r})",
             f"(lower({b.text}) not in {names!r})"]
    if f32:
        conds.append(f"(not (is_a({dtype.text}, 'str') and lower({dtype.text}) in {F32!r}))")
    w.site(got[1], line, conds)
    # the message's fields: the backend as given (the enum's name: upper-cased) and the platform's list
    fills = w.fills.setdefault((got[1], line), {})
    for n in ast.walk(node.msg) if node.msg is not None else ():
        if isinstance(n, ast.FormattedValue):
            text = " ".join(ast.unparse(n.value).split())
            fills["{" + text + "}"] = (f"upper({b.text})" if text == "backend" else
                                      repr(", ".join(x.upper() for x in names))
                                      if text == "cls.get_supported_vit_attn_backends()" else None)
