"""Checks inside loops over a user's list, as per-element rows (kg.engine.expr's ``any(... for x in L)``).

vLLM validates list and dict options element by element (0.34.0 compilation.py:1164 ``for op in self.custom_ops``,
observability.py:186 ``for family, buckets in value.items()``, parallel.py:541 ``for cpuset in value``). checkgen
walks a loop body as an unknown path; here a ``for`` whose list the walk knows is walked once with its target bound
to a fresh element name (``_e1``; ``_e1_0, _e1_1`` for a tuple target, ``_e2`` one loop deeper), and a check reached
inside it becomes ``<conditions before the loop> and any(<conditions inside> for _e1 in <list>)``: the engine
refuses when some element meets them. The walk of such a loop is exact only when nothing leaves it early or carries
state across elements, so a loop is translated only when

- its body has no ``break``, ``return``, ``yield`` or ``else`` (``continue`` is modelled: what follows it in the body
  runs only where its condition did not hold), and it nests at most kg.engine.expr.MAX_LOOPS deep;
- its target is a name or a tuple of names, and its list translates (``d.items()`` / ``.keys()`` / ``.values()``
  of a dict option become ``items(d)`` / ``keys(d)`` / ``values(d)``, ``pairwise(x)`` ``pairs(x)``,
  ``s.split(sep)`` ``split(s, sep)``).

A value assigned inside the loop is unknown after it (and an attribute assigned inside it is unknown from then on):
only the checks inside read per-element values. ``any(P(x) for x in L)`` / ``all(...)`` as a value is translated
the same way (``element_hook``), as are ``x[i]`` (``item(x, i)``) and ``math.isfinite(x)`` on values the walk knows.
"""
from __future__ import annotations

import ast
import re
from typing import Any

import checkgen as cg

TOKEN = "<loop>"  # a path condition "<loop> <n>": the n-th translated loop (VllmWalker.loops[n])
LOOP_NAME = re.compile(r"\b_e\d+(?:_\d+)?\b")
MAX_LOOPS = 2  # kg.engine.expr.MAX_LOOPS


def is_token(c: str) -> bool:
    return c.startswith(TOKEN)


def depth(pc: list[str]) -> int:
    return sum(1 for c in pc if c.startswith(TOKEN))


def _simple_body(s: ast.For) -> bool:
    for n in ast.walk(ast.Module(body=s.body, type_ignores=[])):
        if isinstance(n, (ast.Break, ast.Return, ast.Yield, ast.YieldFrom, ast.While, ast.FunctionDef,
                          ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
    return not s.orelse and not isinstance(s, ast.AsyncFor)


def sequence(w: Any, node: ast.AST, fr: cg.Frame, pc: list[str]) -> str | None:
    """The list a loop or generator iterates, as an expression text; None when it does not translate."""
    try:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords:
            attr = node.func.attr
            if attr in ("items", "keys", "values") and not node.args:
                base = w.value(node.func.value, fr, pc)
                return f"{attr}({w.as_text(base)})" if isinstance(base, cg.Expr) and not base.ref else None
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("pairwise", "itertools.pairwise") \
                and len(node.args) == 1 and not node.keywords:
            return f"pairs({w.text(node.args[0], fr, pc)})"
        v = w.value(node, fr, pc)
        return w.as_text(v) if isinstance(v, cg.Expr) and not v.ref else None
    except (cg.Untranslatable, SyntaxError):
        return None


def _targets(t: ast.AST, level: int) -> tuple[str, list[tuple[str, str]]] | None:
    """(the target as written in a generator, [(source name, element name)]); None for another kind of target."""
    if isinstance(t, ast.Name):
        return f"_e{level}", [(t.id, f"_e{level}")]
    if isinstance(t, ast.Tuple) and t.elts and all(isinstance(e, ast.Name) for e in t.elts):
        names = [(e.id, f"_e{level}_{i}") for i, e in enumerate(t.elts)]
        return ", ".join(n for _, n in names), names
    return None


def walk_loop(w: Any, s: ast.For, fr: cg.Frame, pc: list[str]) -> bool:
    """Walk loop ``s`` once per element name (see the module doc); False when it is not one this models."""
    if not _simple_body(s) or depth(pc) >= MAX_LOOPS:
        return False
    seq = sequence(w, s.iter, fr, pc)
    got = _targets(s.target, depth(pc) + 1 + w.generator_depth)
    if seq is None or got is None:
        return False
    target, names = got
    w.loops.append((target, seq))
    token = f"{TOKEN} {len(w.loops) - 1}"
    before = dict(fr.locals)
    exits, dead = fr.exits, fr.dead
    inner = w.eff(fr, pc) + [token]
    fr.exits = []
    for src, el in names:
        fr.locals[src] = cg.Expr(el)
    try:
        w.run(s.body, fr, inner)
    finally:
        fr.exits, fr.dead = exits, dead
        for k, v in list(fr.locals.items()):
            if k not in before or before[k] is not v:
                fr.locals[k] = cg.TAINT  # assigned in the loop: which element's value is not modelled
    return True


def continue_stmt(w: Any, fr: cg.Frame, pc: list[str]) -> bool:
    """``continue`` in a translated loop: the rest of the body runs only where its condition (since the loop's
    start) did not hold. False outside a translated loop (checkgen's walk of the body is unknown there anyway)."""
    conds = w.eff(fr, pc)
    at = max((i for i, c in enumerate(conds) if is_token(c)), default=None)
    if at is None:
        return False
    local = conds[at + 1:]
    if not local:
        fr.dead = True
    elif cg.has_unknown(local):
        fr.exits.append(cg.unknown("after a continue under a condition that did not translate"))
    else:
        fr.exits.append(cg._paren(cg.conj(local)))
    return True


def fold(w: Any, conds: list[str]) -> list[str]:
    """A site's path conditions with each loop token and the conditions after it as one ``any(...)``."""
    while True:
        at = max((i for i, c in enumerate(conds) if is_token(c)), default=None)
        if at is None or cg.has_unknown(conds[at:]):
            return conds
        target, seq = w.loops[int(conds[at].split()[1])]
        body = cg.conj(conds[at + 1:])
        conds = conds[:at] + [f"any({body} for {target} in {seq})"]


def in_loop(conds: list[str]) -> bool:
    return any(c.startswith(TOKEN) for c in conds)


def element_hook(w: Any, node: ast.AST, fr: cg.Frame, pc: list[str]) -> Any:
    """``any(P(x) for x in L)`` / ``all(...)``, ``x[i]`` and ``math.isfinite(x)`` over values the walk knows; None
    for anything else (the other hooks and checkgen then decide)."""
    if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
        try:
            base = w.value(node.value, fr, pc)
            if not isinstance(base, cg.Expr) or base.ref:
                return None
            return cg.Expr(f"item({w.as_text(base)}, {w.text(node.slice, fr, pc)})")
        except cg.Untranslatable:
            return None
    if isinstance(node, ast.ListComp):
        return list_comprehension(w, node, fr, pc) or selection(w, node, fr, pc)
    if isinstance(node, ast.SetComp):
        got = selection(w, node, fr, pc)
        return cg.Expr(f"unique({got.text})") if got is not None else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        return tail(w, node, fr, pc)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.Sub)):
        return set_operation(w, node, fr, pc)
    if (isinstance(node, ast.Call) and ast.unparse(node.func) == "sorted" and len(node.args) == 1
            and not node.keywords):
        arg = node.args[0]
        got = selection(w, arg, fr, pc) if isinstance(arg, ast.GeneratorExp) else None
        try:
            v = got if got is not None else w.value(arg, fr, pc)
        except cg.Untranslatable:
            return None
        return cg.Expr(f"sorted({v.text})") if isinstance(v, cg.Expr) and not v.ref else None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "split"
            and 1 <= len(node.args) <= 2 and not node.keywords):
        # s.split(sep[, n]) of a string the walk knows (parallel.py:551-553 at 0.34.0, a numactl CPU list)
        try:
            base = w.value(node.func.value, fr, pc)
            if not isinstance(base, cg.Expr) or base.ref:
                return None
            args = ", ".join(w.text(a, fr, pc) for a in node.args)
            return cg.Expr(f"split({w.as_text(base)}, {args})")
        except cg.Untranslatable:
            return None
    if not (isinstance(node, ast.Call) and not node.keywords and len(node.args) == 1):
        return None
    fn = ast.unparse(node.func)
    if fn in ("set", "frozenset") or (fn == "list" and isinstance(node.args[0], ast.Call)
                                      and ast.unparse(node.args[0].func) in ("set", "frozenset")):
        # set(x) / list(set(x)) of a list the walk knows: its distinct elements (``len(set(ids)) != len(ids)``,
        # arg_utils.py:2183; compilation.py:1302 de-duplicates compile_sizes before its loop)
        arg = node.args[0].args[0] if fn == "list" else node.args[0]
        try:
            v = w.value(arg, fr, pc)
            if isinstance(v, cg.Expr) and not v.ref and len(getattr(node.args[0], "args", ())) <= 1:
                return cg.Expr(f"unique({w.as_text(v)})")
        except cg.Untranslatable:
            pass
        return None
    if fn == "callable":
        # a value the walk knows is plain data (an option, a JSON key, a config.json key): never callable
        try:
            v = w.value(node.args[0], fr, pc)
        except cg.Untranslatable:
            return None
        return cg.Expr("False") if isinstance(v, cg.Expr) and not v.ref else None
    if fn == "math.isfinite":
        try:
            return cg.Expr(f"isfinite({w.text(node.args[0], fr, pc)})")
        except cg.Untranslatable:
            return None
    gen = node.args[0]
    if fn not in ("any", "all") or not isinstance(gen, ast.GeneratorExp) or len(gen.generators) != 1:
        return None
    g = gen.generators[0]
    if g.ifs and fn == "all":
        return None
    loop = _one_for(w, g, fr, pc)
    if loop is None:
        return None
    target, seq, inner = loop
    w.generator_depth += 1
    try:
        parts = [w.text(x, inner, pc, True) for x in [*g.ifs, gen.elt]]
    except cg.Untranslatable:
        return None
    finally:
        w.generator_depth -= 1
    return cg.Expr(f"{fn}({cg.conj(parts)} for {target} in {seq})")


def _one_for(w: Any, g: ast.comprehension, fr: cg.Frame, pc: list[str]) -> tuple[str, str, cg.Frame] | None:
    """A comprehension's one ``for`` over a list the walk knows: its target text, the list's text and the frame its
    element and conditions are read in (the target's names bound to the element); None where it cannot be read
    (async, a target form ``_targets`` refuses, nested past MAX_LOOPS, an unknown list)."""
    level = depth(pc) + 1 + w.generator_depth
    got = _targets(g.target, level)
    if g.is_async or got is None or level > MAX_LOOPS:
        return None
    seq = sequence(w, g.iter, fr, pc)
    if seq is None:
        return None
    target, names = got
    return target, seq, cg.Frame(fr.path, {**fr.locals, **{src: cg.Expr(el) for src, el in names}}, fr.cls, fr.base)


def list_append(w: Any, node: ast.AST, fr: cg.Frame, pc: list[str]) -> bool:
    """``cfg.x.append(v)`` / ``cfg.x.extend(<list>)`` on a list field the walk knows: x becomes ``x + [v]`` where the
    path condition holds (compilation.py:1115-1134 at 0.34.0 appends '+rotary_embedding' to custom_ops before the
    per-element check at :1164); checkgen makes the field unknown. False for anything else."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "extend") and len(node.args) == 1 and not node.keywords):
        return False
    if isinstance(node.func.value, ast.Name):
        return local_append(w, node, fr, pc)
    if not isinstance(node.func.value, ast.Attribute):
        return False
    try:
        base = w.value(node.func.value.value, fr, pc)
        if not isinstance(base, cg.Obj):
            return False
        attr = node.func.value.attr
        old = w.get_attr(base, attr, pc)
        if not isinstance(old, cg.Expr) or old.ref:
            return False
        if node.func.attr == "extend" and not isinstance(node.args[0], (ast.List, ast.Tuple)):
            return False
        x = w.text(node.args[0], fr, pc)
    except cg.Untranslatable:
        return False
    new = f"({old.text} + [{x}])" if node.func.attr == "append" else f"({old.text} + [{x[1:-1].rstrip(',')}])"
    w.set_attr(base, attr, cg.Expr(new), w.eff(fr, pc))
    return True


def selection(w: Any, node: ast.AST, fr: cg.Frame, pc: list[str]) -> cg.Expr | None:
    """``[v for x in L if c]`` (or the same generator / set comprehension) over a list the walk knows:
    ``select(v for _eN in L if c)`` (kg.engine.expr), one ``for``; None for anything else. compilation.py:1172 at
    0.34.0 keeps the base modes of custom_ops, vllm.py:2466 the capture sizes up to max_num_batched_tokens."""
    if not isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)) or len(node.generators) != 1:
        return None
    g = node.generators[0]
    loop = _one_for(w, g, fr, pc)
    if loop is None:
        return None
    target, seq, inner = loop
    w.generator_depth += 1
    try:
        elt = w.text(node.elt, inner, pc)
        ifs = [w.text(x, inner, pc, True) for x in g.ifs]
    except cg.Untranslatable:
        return None
    finally:
        w.generator_depth -= 1
    return cg.Expr(f"select({elt} for {target} in {seq}" + (f" if {cg.conj(ifs)})" if ifs else ")"))


def _set_like(n: ast.AST, fr: cg.Frame) -> bool:
    """``n`` is a set by its form (``{...}``, ``set(x)``, a set comprehension) or a local holding one the walk built
    (``unique(...)``): told without walking it, so that ``a - b`` of numbers is not walked twice."""
    if isinstance(n, (ast.Set, ast.SetComp)):
        return True
    if isinstance(n, ast.Call) and ast.unparse(n.func) in ("set", "frozenset"):
        return True
    v = fr.locals.get(n.id) if isinstance(n, ast.Name) else None
    return isinstance(v, cg.Expr) and v.text.startswith("unique(")


def set_operation(w: Any, node: ast.BinOp, fr: cg.Frame, pc: list[str]) -> cg.Expr | None:
    """``a & b`` / ``a | b`` / ``a - b`` of two sets (``_set_like``): the elements of a also in b, of either, of a
    not in b, as ``unique(...)`` (compilation.py:1180 at 0.34.0 intersects the '+' and '-' custom ops); None for
    others (``&`` of integers stays checkgen's)."""
    if not (_set_like(node.left, fr) and _set_like(node.right, fr)):
        return None
    try:
        a, b = w.value(node.left, fr, pc), w.value(node.right, fr, pc)
    except cg.Untranslatable:
        return None
    if not all(isinstance(x, cg.Expr) and not x.ref for x in (a, b)):
        return None
    if isinstance(node.op, ast.BitOr):
        return cg.Expr(f"unique({a.text} + {b.text})")
    level = depth(pc) + 1 + w.generator_depth
    if level > MAX_LOOPS:
        return None
    el = f"_e{level}"
    op = "in" if isinstance(node.op, ast.BitAnd) else "not in"
    return cg.Expr(f"unique(select({el} for {el} in {a.text} if {el} {op} {b.text}))")


def tail(w: Any, node: ast.Subscript, fr: cg.Frame, pc: list[str]) -> cg.Expr | None:
    """``x[n:]`` (a constant integer n, no end or step) of a value the walk knows: ``tail(x, n)``."""
    s = node.slice
    if not (isinstance(s, ast.Slice) and s.upper is None and s.step is None and isinstance(s.lower, ast.Constant)
            and type(s.lower.value) is int):
        return None
    try:
        base = w.value(node.value, fr, pc)
    except cg.Untranslatable:
        return None
    return cg.Expr(f"tail({base.text}, {s.lower.value})") if isinstance(base, cg.Expr) and not base.ref else None


def sort_in_place(w: Any, node: ast.AST, fr: cg.Frame, pc: list[str]) -> bool:
    """``x.sort()`` of a local or a config field the walk knows: x becomes ``sorted(x)`` where the path condition
    holds (vllm.py:2470 at 0.34.0 sorts the capture sizes it kept); checkgen makes it unknown. False for others."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sort"
            and not node.args and not node.keywords):
        return False
    target = node.func.value
    try:
        old = w.value(target, fr, pc)
    except cg.Untranslatable:
        return False
    if not isinstance(old, cg.Expr) or old.ref:
        return False
    if isinstance(target, ast.Name) and target.id in fr.locals:
        w.assign(target, cg.Expr(f"sorted({old.text})"), fr, pc)
        return True
    if isinstance(target, ast.Attribute):
        try:
            base = w.value(target.value, fr, pc)
        except cg.Untranslatable:
            return False
        if isinstance(base, cg.Obj):
            w.set_attr(base, target.attr, cg.Expr(f"sorted({old.text})"), w.eff(fr, pc))
            return True
    return False


def local_append(w: Any, node: ast.Call, fr: cg.Frame, pc: list[str]) -> bool:
    """``reasons.append(v)`` / ``reasons.extend(<list>)`` on a local list the walk knows: the local becomes
    ``reasons + [v]`` where the path condition holds (vllm.py:3325-3353 at 0.34.0 collects the blockers of
    batch-sharded sampling, :3123-3137 / :3378-3408 what the model runner does not support, then raise when the list
    is not empty); checkgen makes the local unknown. An element that is an f-string is its parts joined
    (``format_text``). False for anything else."""
    name = node.func.value.id
    old = fr.locals.get(name)
    if not isinstance(old, cg.Expr) or old.ref:
        return False
    try:
        arg = node.args[0]
        x = format_text(w, arg, fr, pc) if isinstance(arg, ast.JoinedStr) else w.text(arg, fr, pc)
    except cg.Untranslatable:
        return False
    if node.func.attr == "append":
        new = f"({old.text} + [{x}])"
    elif isinstance(arg, (ast.List, ast.Tuple)):
        new = f"({old.text} + [{x[1:-1].rstrip(',')}])"
    else:
        new = f"({old.text} + {x})"
    w.assign(node.func.value, cg.Expr(new), fr, pc)
    return True


def format_text(w: Any, node: ast.JoinedStr, fr: cg.Frame, pc: list[str]) -> str:
    """An f-string as its literal parts and ``str(<field>)`` joined by ``+`` (a field with a conversion or a format
    spec does not translate). A field holding None reads ``'__none__'`` (the evaluator's None), not ``'None'``: used
    only for the elements of a list whose length or truth a check reads."""
    parts = []
    for v in node.values:
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            parts.append(repr(v.value))
        elif isinstance(v, ast.FormattedValue) and v.conversion == -1 and v.format_spec is None:
            parts.append(f"str({w.text(v.value, fr, pc)})")
        else:
            raise cg.Untranslatable("f-string field")
    return "(" + " + ".join(parts or ["''"]) + ")"


MAX_UNROLL = 16  # elements of a literal list a list comprehension is unrolled over


def list_comprehension(w: Any, node: ast.ListComp, fr: cg.Frame, pc: list[str]) -> Any:
    """``[e for t in (<literal items>) if c]`` over a literal tuple or list (profiler.py:240-252 at 0.34.0, the proton
    options given a non-default value): ``([e1] if c1 else []) + ([e2] if c2 else []) + ...``, each item's parts bound
    to the target's names; None for anything else."""
    if len(node.generators) != 1:
        return None
    g = node.generators[0]
    items = g.iter.elts if isinstance(g.iter, (ast.Tuple, ast.List)) else None
    if g.is_async or items is None or not items or len(items) > MAX_UNROLL:
        return None
    names = [g.target.id] if isinstance(g.target, ast.Name) else \
        [e.id for e in g.target.elts] if isinstance(g.target, ast.Tuple) and all(
            isinstance(e, ast.Name) for e in g.target.elts) else None
    if names is None:
        return None
    parts = []
    try:
        for it in items:
            if len(names) == 1:
                vals = [w.value(it, fr, pc)]
            elif isinstance(it, (ast.Tuple, ast.List)) and len(it.elts) == len(names):
                vals = [w.value(e, fr, pc) for e in it.elts]
            else:
                return None
            inner = cg.Frame(fr.path, {**fr.locals, **dict(zip(names, vals))}, fr.cls, fr.base)
            elt = w.text(node.elt, inner, pc)
            conds = [w.text(c, inner, pc, True) for c in g.ifs]
            parts.append(f"([{elt}] if {cg.conj(conds)} else [])" if conds else f"[{elt}]")
    except cg.Untranslatable:
        return None
    return cg.Expr("(" + " + ".join(parts) + ")")


def unpack_split(w: Any, s: ast.stmt, fr: cg.Frame, pc: list[str]) -> bool:
    """``a, b = x.split(sep, 1)``: each name is ``item(split(...), i)`` (a list of another length makes vLLM raise
    ValueError here, and the row reading it not evaluable); False for any other assignment."""
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Tuple)
            and all(isinstance(e, ast.Name) for e in s.targets[0].elts) and isinstance(s.value, ast.Call)
            and isinstance(s.value.func, ast.Attribute) and s.value.func.attr == "split"):
        return False
    v = element_hook(w, s.value, fr, pc)
    if not isinstance(v, cg.Expr):
        return False
    for i, t in enumerate(s.targets[0].elts):
        w.assign(t, cg.Expr(f"item({v.text}, {i})"), fr, pc)
    return True
