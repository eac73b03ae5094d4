"""The symbolic walk that turns a framework's validation code into check rows (tools/checkgen.py): each row fires
exactly where the code it was read from raises, with the code's own rewrites of its inputs modelled, and is not
evaluated where the walk could not model a value."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kg.engine.expr import MissingFact, evaluate
from kg.frameworks.checkrows import FUNCTIONS, NONE

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import checkgen as cg  # noqa: E402

SRC = '''\
import dataclasses
from dataclasses import dataclass


def opaque(x):
    return sum(x)


def validate(args):
    if args.c is None:
        args.b = 4
    assert args.a % args.b == 0, "a by b"
    if args.p:
        args.q = opaque(args.q)
    assert args.q > 0, "q positive"
    if args.x:
        return args
    if args.d and not args.e:
        raise ValueError("d needs e")
    for i in args.items:
        assert i > 0
    return args


@dataclass
class Config:
    a: int = 1
    b: int = 2
    gated: bool = False

    def __post_init__(self):
        if self.gated and self.b % 2:
            raise ValueError("gated needs an even b")


def build(args):
    kw = {}
    for f in dataclasses.fields(Config):
        if hasattr(args, f.name):
            kw[f.name] = getattr(args, f.name)
    kw["gated"] = args.swiglu
    return Config(**kw)
'''
INPUTS = {"a", "b", "c", "p", "q", "x", "d", "e", "items", "swiglu"}


@pytest.fixture(scope="module")
def rows():
    w = cg.Walker([cg.read_module("m.py", SRC)])
    args = cg.Obj("args", lambda a: cg.Expr(a) if a in INPUTS else None)
    w.invoke(w.modules["m.py"].functions["validate"], "m.py", None, [args], {}, [])
    args2 = cg.Obj("args", lambda a: cg.Expr(a) if a in INPUTS else None)
    w.invoke(w.modules["m.py"].functions["build"], "m.py", None, [args2], {}, [])
    return {line: r["expr"] for (_, line), r in cg.rows(w).items()}


def fires(expr: str, **ns) -> bool:
    return evaluate(expr, {k: (NONE if v is None else v) for k, v in ns.items()}, FUNCTIONS) is True


def test_a_check_reads_the_value_the_code_rewrote_before_it(rows):
    # b = 4 when c is None: 6 % 4 != 0 raises, while 6 % 3 == 0 (c given, b kept) does not
    assert fires(rows[12], a=6, b=3, c=None)
    assert not fires(rows[12], a=6, b=3, c=1)


def test_a_value_the_walk_cannot_model_leaves_the_check_unevaluated_only_where_it_applies(rows):
    assert fires(rows[15], p=False, q=-1)
    with pytest.raises(MissingFact):
        fires(rows[15], p=True, q=-1)


def test_a_check_after_a_conditional_return_holds_only_when_the_function_went_on(rows):
    assert fires(rows[19], x=False, d=True, e=False)
    assert not fires(rows[19], x=True, d=True, e=False)


def test_checks_inside_loops_are_not_generated(rows):
    assert 21 not in rows


def test_a_dataclass_built_from_the_arguments_checks_the_fields_it_was_given(rows):
    # Config(**kw): b copied from args, gated from args.swiglu; __post_init__ raises on gated with an odd b
    assert fires(rows[33], b=3, swiglu=True)
    assert not fires(rows[33], b=4, swiglu=True)
    assert not fires(rows[33], b=3, swiglu=False)


def test_a_callee_after_the_callers_early_return_carries_that_return():
    src = '''
def validate(args):
    if args.x:
        return
    check(args)


def check(args):
    if args.y:
        raise ValueError("y")
'''
    m = cg.read_module("m.py", src)
    w = cg.Walker([m])
    w.invoke(m.functions["validate"], "m.py", None, [cg.Obj("args", lambda n: cg.Expr(n))], {}, [])
    (expr,) = w.sites[("m.py", 10)]
    assert evaluate(expr, {"x": False, "y": True}, FUNCTIONS) is True
    assert evaluate(expr, {"x": True, "y": True}, FUNCTIONS) is False  # validate returned before calling check


def test_an_imported_object_is_compared_only_by_identity():
    # `"LOCAL_RANK" in os.environ` must not become a substring test on the name 'os.environ' (a check that would
    # always fire); `dtype == torch.float32` may (both sides name the same object)
    src = ("import os\nimport torch\n\n\ndef f(args):\n    assert 'LOCAL_RANK' in os.environ\n"
           "    if args.dtype == torch.float32:\n        raise ValueError('fp32')\n")
    w = cg.Walker([cg.read_module("e.py", src)])
    w.invoke(w.modules["e.py"].functions["f"], "e.py", None,
             [cg.Obj("args", lambda a: cg.Expr(a))], {}, [])
    got = {line: r["expr"] for (_, line), r in cg.rows(w).items()}
    assert got == {8: "(dtype == 'torch.float32')"}


def test_a_function_returning_an_unmodelled_value_on_one_branch_keeps_its_other_returns():
    # VllmConfig.num_speculative_tokens (0.34.0 config/vllm.py:587-599): the speculative config's value where it is
    # given, then a branch the walk cannot read (diffusion_config); a walker with unknown_returns keeps the first
    src = ("def n(args):\n    if args.spec is not None:\n        return args.spec\n"
           "    if opaque(args):\n        return 7\n    return 0\n\n\ndef check(args):\n"
           "    if n(args) > 4:\n        raise ValueError('too many')\n")
    m = cg.read_module("m.py", src)

    class Keep(cg.Walker):
        unknown_returns = True
    for walker, kept in ((cg.Walker, False), (Keep, True)):
        w = walker([m])
        w.invoke(m.functions["check"], "m.py", None, [cg.Obj("args", lambda a: cg.Expr(a))], {}, [])
        if not kept:
            assert ("m.py", 11) not in w.sites or w.sites[("m.py", 11)] == [None]
            continue
        (expr,) = w.sites[("m.py", 11)]
        assert evaluate(expr, {"spec": 5}, FUNCTIONS) is True
        assert evaluate(expr, {"spec": 3}, FUNCTIONS) is False
        with pytest.raises(MissingFact):  # no speculative config: the branch the walk could not read
            evaluate(expr, {"spec": NONE}, FUNCTIONS)


@pytest.mark.parametrize("expr, can_fire", [
    ("truthy(__unknown__ if c else False)", False),  # 0.33.0 vllm.py:3489's shape: true nowhere it evaluates
    ("not (('__none__' if w == '__none__' else __unknown__) == '__none__')", False),
    ("P and (m <= (0 if not P else __unknown__ if not not P else '__none__'))", False),  # 0.34.0 vllm.py:2294
    ("not truthy(_v1) and (__unknown__ if not truthy(_v1) else 3) > 1", False),
    ("(a or b) and (__unknown__ if (a or b) else 1) == 1", False),
    ("x == 1 and truthy(y)", True),
    ("_v2 > 3", True),
    ("x and x == 3", True),
])
def test_a_row_true_on_no_stack_is_told_by_the_values_its_parts_can_take(expr, can_fire):
    from row_firing import ValueFiring
    assert ValueFiring({"_v1": "__unknown__ if a == 1 else False", "_v2": "b if c else __unknown__"}).fires(expr) \
        is can_fire
