"""Keyword dicts handed to a config class with ``**`` (tools/vllm_generated_checks.py's walk).

vLLM builds its MultiModalConfig from a keyword dict whose None values are dropped, so that a field nobody gave keeps
its own default (config/model.py:869-901 at 0.34.0, :852-884 at 0.33.0)::

    mm_config_kwargs = dict(language_model_only=language_model_only, ..., mm_processor_cache_type=...)
    mm_config_kwargs = {k: v for k, v in mm_config_kwargs.items() if v is not None}
    self.multimodal_config = MultiModalConfig(**mm_config_kwargs)

The walk reads ``dict(k=v, ...)`` (keywords only) as a ``KwargsDict`` holding each value, and that comprehension (the
one form: ``{k: v for k, v in D.items() if v is not None}`` over a KwargsDict) as the same dict marked
``drop_none``. A dataclass built from it (``given_from_spread``) gets, for each of its fields the dict names,
``v`` where ``v`` is not None and the field's default where it is. A dict changed after it was built (an item
stored, a mutating method) is not read this way: the walk's older rule (``**`` of an unknown value) applies.
"""
from __future__ import annotations

import ast
import sys
from typing import Any

import checkgen as cg

MUTATORS = ("update", "pop", "popitem", "setdefault", "clear")


class KwargsDict(cg.Obj):
    """``dict(k=v, ...)``: ``d[k]`` / ``d.k`` is the value given for ``k``; a key it lacks is absent."""

    def __init__(self, pairs: dict[str, Any], drop_none: bool = False):
        super().__init__("kwargs-dict", lambda a: None)
        self.pairs = pairs
        self.drop_none = drop_none
        self.mutated = False
        self.env.update(pairs)

    def intact(self) -> bool:
        return not self.mutated and all(self.env.get(k) is v for k, v in self.pairs.items()) \
            and set(self.env) == set(self.pairs)


def hook(w: Any, node: ast.AST, fr: cg.Frame, pc: list[str]) -> Any:
    """The walker hook: a KwargsDict for ``dict(**keywords)`` and the None-dropping comprehension; a mutating method
    called on one marks it changed (and is otherwise left to the walk). None for anything else."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict"
            and "dict" not in fr.locals and not node.args and node.keywords
            and all(k.arg is not None for k in node.keywords)):
        return KwargsDict({k.arg: w.value_or_taint(k.value, fr, pc) for k in node.keywords})
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS
            and isinstance(node.func.value, ast.Name)):
        got = unwrap(fr.locals.get(node.func.value.id))
        if got is not None:
            got[1].mutated = True
        return None
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and isinstance(node.ctx, ast.Load)
            and node.value.id not in fr.locals and node.value.id[:1].isupper()):
        return class_default(w, node.value.id, node.attr, fr.path)
    if isinstance(node, ast.DictComp) and _drops_none(node):
        src = node.generators[0].iter.func.value
        got = unwrap(fr.locals.get(src.id), pc) if isinstance(src, ast.Name) else None
        if got is not None and got[1].intact():
            out: cg.Obj = KwargsDict(dict(got[1].pairs), drop_none=True)
            return out if not got[0] else cg.ObjIf(cg.conj(got[0]), out, cg.UnknownObj())
    return None


def unwrap(v: Any, pc: list[str] | None = None) -> tuple[list[str], KwargsDict] | None:
    """(conditions, d) for a KwargsDict ``d``, or one bound under a condition (``ObjIf(cond, d, other)``: the
    walk's value of a local assigned inside an ``if``): the side the path condition ``pc`` takes, else ``d`` under
    ``cond`` where the other side is unknown; None for anything else."""
    conds: list[str] = []
    while isinstance(v, cg.ObjIf) and len(conds) < 8:
        if pc is not None and v.cond in pc:
            v = v.a
        elif pc is not None and f"(not {v.cond})" in pc:
            v = v.b
        elif isinstance(v.b, cg.UnknownObj):
            conds.append(v.cond)
            v = v.a
        else:
            return None
    return (conds, v) if isinstance(v, KwargsDict) else None


def _drops_none(node: ast.DictComp) -> bool:
    """``{k: v for k, v in D.items() if v is not None}`` exactly."""
    if len(node.generators) != 1:
        return False
    g = node.generators[0]
    if (g.is_async or len(g.ifs) != 1 or not isinstance(g.target, ast.Tuple) or len(g.target.elts) != 2
            or not all(isinstance(e, ast.Name) for e in g.target.elts)):
        return False
    k, v = (e.id for e in g.target.elts)
    it, cond = g.iter, g.ifs[0]
    return (isinstance(node.key, ast.Name) and node.key.id == k and isinstance(node.value, ast.Name)
            and node.value.id == v and isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr == "items" and not it.args and isinstance(it.func.value, ast.Name)
            and isinstance(cond, ast.Compare) and len(cond.ops) == 1 and isinstance(cond.ops[0], ast.IsNot)
            and isinstance(cond.left, ast.Name) and cond.left.id == v
            and isinstance(cond.comparators[0], ast.Constant) and cond.comparators[0].value is None)


def given_from_spread(w: Any, given: dict[str, Any], spread: list[cg.Obj],
                      fields: dict[str, tuple[ast.AST | None, str]], pc: list[str]) -> list[cg.Obj]:
    """Moves the None-dropping KwargsDicts of ``spread`` into ``given`` (a key given by keyword wins, as Python
    refuses a key twice anyway); returns the spread left. A value that may be None is ``(v if v != none else
    <default>)``; a field whose default is None gets ``v`` as it is."""
    left = []
    none = repr(cg.NONE)
    for o in spread:
        got = unwrap(o, pc)
        if got is None or not (got[1].drop_none and got[1].intact()):
            left.append(o)
            continue
        conds, d = got
        for k, v in d.pairs.items():
            if k in given or k not in fields:
                continue
            node, path = fields[k]
            default = cg.TAINT if node is None else w.value_or_taint(node, cg.Frame(path, {}), [])
            if isinstance(v, cg.Expr) and v.text == none:
                given[k] = default
            elif isinstance(v, cg.Expr) and isinstance(default, cg.Expr):
                given[k] = v if default.text == none else cg.Expr(f"({v.text} if {v.text} != {none} else "
                                                                  f"{default.text})")
            elif isinstance(v, cg.Obj) and not isinstance(v, cg.ObjIf):  # an object, never None
                given[k] = v
            else:
                given[k] = cg.TAINT
            if conds and k in given:  # the dict exists where its conditions hold: unknown elsewhere
                given[k] = w.merge(cg.TAINT, given[k], conds, first=False)
    return left


def class_default(w: Any, cls: str, attr: str, path: str) -> cg.Expr | None:
    """``Cls.field`` of a config dataclass (multimodal.py:518 ``MultiModalConfig.mm_shm_cache_max_object_size_mb`` at
    0.34.0): the class attribute is the field's default, a scalar literal here (``= 128``, ``field(default=128)``;
    pydantic puts a ``Field(default=128)``'s default back on the class, pydantic 2.12 _internal/_fields.py:543-547).
    None for a field without a default or with a default_factory (no class attribute) and for anything else."""
    literal_value = sys.modules[type(w).__module__].literal_value
    fields = w.dataclass_fields(cls, path)
    if not fields or attr not in fields or fields[attr][0] is None:
        return None
    ok, v = literal_value(w, fields[attr][0], fields[attr][1])
    if not ok or isinstance(v, (list, dict)):
        return None
    return cg.Expr(repr(v))
