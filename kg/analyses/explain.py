"""Coupling paths that can hold for one stack (``optkg explain A B --stack FILE|--vllm CMD``).

A path (kg.knowledge.graph.coupling_paths) can hold for a stack when every edge on it can:

- its ``engines`` list (if any) names the stack's engine (when the stack has one);
- every technique on it can be used at the stack's stage: ``inference`` for a stack with a serving
  engine, ``training`` for one with a training framework (no stage filter otherwise);
- its ``condition`` (except on ``requires`` edges, where it is the constraint itself) is not false over the stack's facts (kg.analyses.check.stack_facts after the
  engine's effective configuration). A condition that reads a fact the stack lacks *may* hold: the path
  is kept and the unknown facts are listed.

``filter_paths`` returns (kept, left_out): kept paths keep their order (shortest first); each left-out
entry says which edge rules it out and why.
"""
from __future__ import annotations

from typing import Any

from kg.engine.expr import ExprTypeError, MissingFact, evaluate
from kg.inputs.stack import Stack


def stack_namespace(stack: Stack) -> tuple[dict[str, Any], str | None]:
    """(facts, stage) of ``stack`` as ``check`` sees them: effective configuration applied first."""
    import copy

    from kg.analyses.check import stack_facts
    from kg.engines import of
    from kg.inputs.effective import effective_configuration
    st = copy.copy(stack)
    st.settings, st.notes = dict(stack.settings), list(stack.notes)
    st.techniques = {k: dict(v) for k, v in stack.techniques.items()}
    effective_configuration(st, of(st).release_facts)
    _, ns = stack_facts(st)
    stage = "inference" if st.engine else "training" if st.framework else None
    return ns, stage


def _why_not(g, step, ns: dict[str, Any], stage: str | None, engine: str | None,
             functions: dict[str, Any]) -> tuple[str | None, list[str]]:
    """(reason the edge cannot hold, or None; facts its condition needs that the stack lacks)."""
    d = step.data
    engines = d.get("engines") or []
    if engine and engines and engine not in engines:
        return f"{step.key} holds on {', '.join(engines)} only; the stack runs {engine}", []
    for n in (step.src, step.dst):
        node = g.nodes[n]
        if stage and node.get("type") == "technique" and stage not in (node.get("stages") or []):
            return f"{node['id']} is not used at the {stage} stage", []
    cond = d.get("condition")
    if cond and d.get("kind") != "requires":  # a requires condition is a constraint, not "when it applies"
        try:
            if not evaluate(cond, ns, functions):
                return f"{step.key}: {cond} is false for this stack", []
        except MissingFact as e:
            return None, [e.name]
        except (ExprTypeError, ZeroDivisionError, TypeError, ValueError):
            return None, []
    return None, []


def filter_paths(g, paths: list[list[Any]], stack: Stack) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split ``paths`` into those that can hold for ``stack`` and those that cannot (module doc).

    kept: ``[{"path": steps, "unknown": [fact names]}]``; left_out: ``[{"path": steps, "why": text}]``."""
    ns, stage = stack_namespace(stack)
    return filter_paths_over(g, paths, ns, stage, stack.engine, set(stack.techniques))


def filter_paths_over(g, paths: list[list[Any]], ns: dict[str, Any], stage: str | None, engine: str | None,
                      present: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``filter_paths`` over given facts: ``ns``, the ``stage``, the serving ``engine`` (None for a training
    job) and the techniques ``present`` (a training job's: kg.analyses.training.training_facts)."""
    functions = {"has": present.__contains__}
    kept, left = [], []
    for p in paths:
        unknown: list[str] = []
        why = None
        for s in p:
            why, miss = _why_not(g, s, ns, stage, engine, functions)
            if why:
                break
            unknown += [m for m in miss if m not in unknown]
        if why:
            left.append({"path": p, "why": why})
        else:
            kept.append({"path": p, "unknown": unknown})
    return kept, left


RAISES = ("causes", "amplifies")


def _meets_opposed(path: list[Any]) -> bool:
    """A two-edge path through a property that one end raises (causes / amplifies) and the other mitigates:
    the most useful thing explain can say about a pair ("A causes X, B mitigates X")."""
    if len(path) != 2:
        return False
    kinds = {path[0].data.get("kind"), path[1].data.get("kind")}
    return "mitigates" in kinds and bool(kinds & set(RAISES))


def rank_paths(g, paths: list[list[Any]]) -> list[list[Any]]:
    """``paths`` most direct first: fewer edges; then a path through a property one end raises and the other
    mitigates; then paths through less connected nodes (the sum of log2(degree) of the nodes between the ends, so
    a hub such as communication volume, touched by dozens of couplings, says less than a specific property);
    then the node ids (deterministic)."""
    import math

    def key(p: list[Any]) -> tuple:
        inner = [s.dst if s.forward else s.src for s in p[:-1]]
        hub = sum(math.log2(max(2, g.degree(n))) for n in inner)
        ids = tuple((s.src, s.dst) for s in p)
        return (len(p), not _meets_opposed(p), round(hub, 6), ids)
    return sorted(paths, key=key)
