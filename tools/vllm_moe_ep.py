"""``validate_flashinfer_moe_ep_model(moe_backend, architectures)`` in vLLM's generated rows (0.34.0
vllm/config/kernel.py:231-242, called by KernelConfig.set_platform_defaults at :492-495 with the served model's
``model_config.architectures``).

The function refuses the DeepSeek-V4 FlashInfer MoE-EP backend (``moe_backend == FLASHINFER_MOE_EP_DEEP_GEMM``,
:150) unless an architecture of the model is in ``FLASHINFER_MOE_EP_ARCHITECTURES`` (:185-191). The walk does not
translate the generator in ``any(...)``, so this gives the refusal (:238) read from the function's own text and the
module's two constants (nothing is given when the function does not have this shape).

``model_config.architectures`` is config.json's ``architectures`` (``hf__architectures``) where
``vllm_model__arch`` is given (the convertor rewrites the list only where optkg leaves it unset: see
tools/vllm_breakable.py); elsewhere the row does not fire. Names compare lower-cased (the rows' literals are).

``any_substring`` reads the same list for 0.34.0 lora.py:155-158 (Inkling LoRA needs INKLING_MULTIMEM_AR=0).
"""
from __future__ import annotations

import ast
from typing import Any, Callable

import checkgen as cg
import vllm_breakable
import vllm_loops

PATH = "vllm/config/kernel.py"
NAME = "validate_flashinfer_moe_ep_model"
BACKEND, ARCHS = "FLASHINFER_MOE_EP_DEEP_GEMM", "FLASHINFER_MOE_EP_ARCHITECTURES"


def shape(w: Any) -> tuple[str, frozenset[str], int] | None:
    """(the refused backend, the allowed architectures, the raise's line) read from the release's module; None when
    the function is not ``if moe_backend != B: return`` then ``if not any(arch in A for arch in architectures):
    raise``."""
    m = w.modules.get(PATH)
    f = m.functions.get(NAME) if m else None
    if f is None:
        return None
    body = [s for s in f.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 2 or not all(isinstance(s, ast.If) and not s.orelse for s in body):
        return None
    first, second = (ast.unparse(s.test) for s in body)
    if first != f"moe_backend != {BACKEND}" or ast.unparse(body[0].body[0]) != "return" \
            or second != f"not any((arch in {ARCHS} for arch in architectures))" \
            or not isinstance(body[1].body[0], ast.Raise):
        return None
    backend = vllm_breakable._constant(m, BACKEND)
    if not (isinstance(backend, ast.Constant) and isinstance(backend.value, str)):
        return None
    try:
        archs = vllm_breakable._names(m, ast.Name(ARCHS))
    except ValueError:
        return None
    return backend.value, archs, body[1].body[0].lineno


def call_hook(w: Any, name: str, node: ast.Call, fr: cg.Frame, pc: list[str], served: Callable[[Any, Any], bool]) -> Any:
    """The call's refusal recorded for the served model (module doc); None (the call's value) when recorded, and
    also None for other calls or a shape not read here (the walk then goes on as before)."""
    if name != NAME or len(node.args) != 2 or node.keywords or getattr(w, "in_draft_walk", False):
        return None
    arch_node = node.args[1]
    if not (isinstance(arch_node, ast.Attribute) and arch_node.attr == "architectures"):
        return None
    got = shape(w)
    if got is None:
        return None
    backend, archs, line = got
    try:
        if not served(w, w.value(arch_node.value, fr, pc)):
            return None
        moe = w.as_text(w.value(node.args[0], fr, pc))
    except cg.Untranslatable:
        return None
    level = vllm_loops.depth(pc) + 1 + w.generator_depth
    if level > vllm_loops.MAX_LOOPS:
        return None
    e, names = f"_e{level}", tuple(sorted(a.lower() for a in archs))
    w.site(PATH, line, w.eff(fr, pc) + [f"({moe} == {backend.lower()!r})", "truthy(vllm_model__arch)",
                                        f"(not any(lower({e}) in {names!r} for {e} in hf__architectures))"])
    return cg.Expr(repr(cg.NONE))


def any_substring(w: Any, node: ast.Call, fr: cg.Frame, pc: list[str]) -> cg.Expr | None:
    """``any("Inkling" in arch for arch in architectures)`` over the served model's architectures (0.34.0
    lora.py:155-156, the list from the getattr hook of vllm_generated_checks): the names compare lower-cased, as
    the literal is, since the evaluator lower-cases string facts but not a list's elements; None for other forms."""
    gen = node.args[0] if len(node.args) == 1 and not node.keywords else None
    if not (isinstance(gen, ast.GeneratorExp) and len(gen.generators) == 1 and not gen.generators[0].ifs
            and isinstance(gen.generators[0].target, ast.Name) and isinstance(gen.elt, ast.Compare)
            and len(gen.elt.ops) == 1 and isinstance(gen.elt.ops[0], ast.In)
            and isinstance(gen.elt.left, ast.Constant) and isinstance(gen.elt.left.value, str)
            and isinstance(gen.elt.comparators[0], ast.Name)
            and gen.elt.comparators[0].id == gen.generators[0].target.id):
        return None
    seq = vllm_loops.sequence(w, gen.generators[0].iter, fr, pc)
    level = vllm_loops.depth(pc) + 1 + w.generator_depth
    if seq is None or "hf__architectures" not in seq or level > vllm_loops.MAX_LOOPS:
        return None
    e = f"_e{level}"
    return cg.Expr(f"any({gen.elt.left.value.lower()!r} in lower({e}) for {e} in {seq})")
