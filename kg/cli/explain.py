"""Explain couplings: the paths from technique A to B, or the chains of effects starting at A."""
from __future__ import annotations

import argparse

from pathlib import Path

from kg.cli.common import add_catalog_arg, add_stack_args, load_clean_catalog
from kg.core.textsafe import join_lines


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="technique id/alias, or property id")
    p.add_argument("b", nargs="?", help="second technique/property: show the paths between them")
    p.add_argument("--depth", type=int, default=4, help="longest chain or path, in edges (default 4)")
    p.add_argument("--top", type=int, default=3, help="show the N most direct paths (default 3; ranked by length, "
                   "then a property one end raises and the other mitigates, then how specific the nodes between are)")
    p.add_argument("--all", action="store_true", help="show every path (up to 200), ranked")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--stack", type=Path, metavar="FILE",
                   help="keep only the paths whose conditions can hold for this stack file (or --vllm/--sglang)")
    add_stack_args(p, positional=False)
    add_catalog_arg(p)


def _label(g, n: str) -> str:
    d = g.nodes[n]
    return d["name"] if d["type"] == "technique" else f"[{d['name']}]"


def _qualifier(d: dict) -> str:
    """`` when <condition>`` and `` (engines: trtllm)`` for a coupling that holds only there."""
    cond = f" when {d['condition']}" if d.get("condition") else ""
    eng = f" (engines: {', '.join(map(str, d['engines']))})" if d.get("engines") else ""
    return cond + eng


def _step_text(g, s) -> str:
    d = s.data
    cross = f"{d.get('from_dimension')} -> {d.get('to_dimension')}"
    return f"{_label(g, s.src)} --{d['kind']} ({cross}){_qualifier(d)}--> {_label(g, s.dst)}"


def _hop_text(g, s) -> str:
    """One hop of a chain: ``kind [when condition] [engines]: target`` (the qualifiers keep a
    conditional or engine-specific coupling from reading as unconditional)."""
    d = s.data
    parts = ([f"when {d['condition']}"] if d.get("condition") else []) + \
        ([f"engines: {', '.join(map(str, d['engines']))}"] if d.get("engines") else [])
    return f"{d['kind']}{' (' + '; '.join(parts) + ')' if parts else ''}: {_label(g, s.dst)}"


def _property_lines(g, p: str, out: dict) -> list[str]:
    """The edges touching property node ``p``: what raises it (causes/amplifies/requires/... into it),
    what mitigates it, and what it leads to (its own effects). Fills out['into'] / out['out_of']."""
    from kg.knowledge.graph import Step
    ins = [Step(u, p, k, d, True) for u, _, k, d in sorted(g.in_edges(p, keys=True, data=True), key=lambda e: (e[0], e[2]))]
    outs = [Step(p, v, k, d, True) for _, v, k, d in sorted(g.out_edges(p, keys=True, data=True), key=lambda e: (e[1], e[2]))]
    out["into"] = [s.to_dict() for s in ins]
    out["out_of"] = [s.to_dict() for s in outs]
    d = g.nodes[p]
    lines = [f"{_label(g, p)}: {d.get('kind', 'derived')} property, dimension {d.get('dimension') or '-'}"
             + (f" -- {d['description']}" if d.get("description") else "")]
    groups = [("raised by (edges into it)", [s for s in ins if s.data["kind"] != "mitigates"], lambda s: s.src),
              ("mitigated by", [s for s in ins if s.data["kind"] == "mitigates"], lambda s: s.src),
              ("leads to (its effects)", outs, lambda s: s.dst)]
    for title, steps, _ in groups:
        if steps:
            lines.append(f"{title}:")
            lines.extend(f"  {_step_text(g, s)}" for s in steps)
    if not ins and not outs:
        lines.append("  no coupling in the catalog touches this property")
    return lines


def run(args: argparse.Namespace) -> int:
    from kg.core.errors import OptkgError
    from kg.knowledge.graph import build_graph, chains_from, coupling_paths, mitigations_of, node_for
    from kg.output.report import to_json

    if args.depth < 1:
        raise OptkgError(f"--depth: expected a positive integer, found {args.depth}")
    cat = load_clean_catalog(args)
    g = build_graph(cat)
    a = node_for(g, cat, args.a)
    out: dict = {"schema_version": "1.0", "kind": "explain", "from": a}
    lines: list[str] = []
    # a stack given is read (and refused when it is bad) for one technique as for two: never ignored
    stack = training = None
    if any(getattr(args, k, None) is not None for k in ("stack", "cmd", "vllm", "sglang", "config")):
        from kg.cli.common import stack_from_args
        try:
            stack = stack_from_args(args, cat)
        except OptkgError:
            # a training job file (framework + training:, a DeepSpeed JSON, a TOML ...) or command, which the
            # serving stack reader refuses: read as `check` reads it
            from kg.cli.check_training import wants_training
            if not wants_training(args):
                raise
            training = _training_view(args, cat)
    else:  # a stack option without a stack would be silently ignored: say so instead
        given = [f"--{k.replace('_', '-')}" for k in ("gpu", "count", "engine_version", "kv_budget_gib", "max_model_len",
                                                      "request_len", "isl", "osl") if getattr(args, k, None) is not None]
        if given:
            verb = "describes" if len(given) == 1 else "describe"
            raise OptkgError(f"{', '.join(given)} {verb} a stack: give it with --stack FILE, --vllm or --sglang "
                             "(explain alone reads the catalog's couplings, which do not depend on them)")
    if args.b:
        b = node_for(g, cat, args.b)
        if b == a:
            raise OptkgError(f"explain: '{args.a}' and '{args.b}' are the same {g.nodes[a]['type']} ({a[2:]}); "
                             "give two different ones, or one to see its effects")
        out["to"] = b
        from kg.analyses.explain import filter_paths, rank_paths
        if args.top < 1:
            raise OptkgError(f"--top: expected a positive integer, found {args.top}")
        every = rank_paths(g, coupling_paths(g, a, b, max_len=args.depth, limit=200))
        unknown: list[list[str]] = [[] for _ in every]
        if training is not None:
            from kg.analyses.explain import filter_paths_over
            kept, left = filter_paths_over(g, every, training["ns"], "training", None, training["techniques"])
        elif stack is not None:
            kept, left = filter_paths(g, every, stack)
        if stack is not None or training is not None:
            stack = stack or training["view"]
            every, unknown = [k["path"] for k in kept], [k["unknown"] for k in kept]
            out["stack"] = stack.name
            out["left_out"] = len(left)
            out["left_out_reasons"] = sorted({x["why"] for x in left})
        shown = len(every) if args.all else min(args.top, len(every))
        paths, unknown = every[:shown], unknown[:shown]
        out["paths"] = [[s.to_dict() for s in p] for p in paths]
        out["paths_total"] = len(every)
        head = f"{_label(g, a)} <-> {_label(g, b)}: {len(every)} path(s) up to {args.depth} edges"
        if stack is not None:
            head += f" that can hold for {stack.name} ({out['left_out']} left out)"
        if shown < len(every):
            head += f"; the {shown} most direct (--all for every path, --top N for more)"
        lines.append(head)
        for i, p in enumerate(paths, 1):
            extra = f" (may hold: depends on {', '.join(unknown[i - 1])}, which the stack does not give)" \
                if stack is not None and unknown[i - 1] else ""
            lines.append(f"path {i}:{extra}")
            for s in p:
                lines.append(f"  {_step_text(g, s)}")
                if s.data.get("mechanism"):
                    lines.append(f"      why: {s.data['mechanism']}")
        if stack is not None and out["left_out_reasons"]:
            lines.append("left out because:")
            lines.extend(f"  {r}" for r in out["left_out_reasons"][:10])
        if not paths:
            lines.append("  no coupling path: the two do not interact through the catalog"
                         + (" in a way that can hold for this stack" if stack is not None else ""))
    elif a.startswith("p:"):
        lines.extend(_property_lines(g, a, out))
    else:
        chains = list(chains_from(g, a, args.depth))
        left_out: list[dict] = []
        if stack is not None:  # only the chains whose conditions can hold for the stack (as for paths)
            from kg.analyses.explain import filter_paths
            kept, left_out = filter_paths(g, chains, stack)
            chains = [k["path"] for k in kept]
            out["stack"] = stack.name
            out["left_out"] = len(left_out)
            out["left_out_reasons"] = sorted({x["why"] for x in left_out})
        out["chains"] = [[s.to_dict() for s in c] for c in chains]
        lines.append(f"effects of {_label(g, a)}" + (f" that can hold for {stack.name}:" if stack is not None else ":"))
        if not chains and stack is not None:
            lines.append("  none: every chain of effects needs a condition this stack does not meet")
        seen_mit = set()
        mits = []
        for c in chains:
            lines.append("  " + " -> ".join([_label(g, c[0].src)] + [_hop_text(g, s) for s in c]))
            for s in c:
                for m in mitigations_of(g, s.dst):
                    if m.key not in seen_mit and m.src != a:
                        seen_mit.add(m.key)
                        mits.append(m)
        out["mitigations"] = [m.to_dict() for m in mits]
        if mits:
            lines.append("mitigated by:")
            for m in mits:
                lines.append(f"  {_step_text(g, m)}")
        if left_out:
            lines.append(f"left out ({len(left_out)} chain(s) that cannot hold for this stack):")
            lines.extend(f"  {r}" for r in out["left_out_reasons"][:10])
    if args.format == "json":
        print(to_json(out), end="")
    else:
        from kg.output.report import fit_width
        print(fit_width(join_lines(lines)))  # output for people fits 100 columns; names stay on their line
    return 0


def _training_view(args: argparse.Namespace, catalog) -> dict:
    """A training job file or command (the stack `check` reads as training: framework + training) as explain's
    stack: its namespace and techniques from kg.analyses.training.training_facts."""
    from types import SimpleNamespace

    from kg.analyses.training import training_facts
    from kg.cli.check_training import build_job
    for k in ("model", "seq_length", "micro_batch_size", "global_batch_size", "framework_version", "gpu_memory_gib",
              "train"):
        if not hasattr(args, k):
            setattr(args, k, None)
    job = build_job(args, catalog)
    _, ns, _ = training_facts(job)
    name = Path(str(args.stack)).name if getattr(args, "stack", None) else job.name
    return {"ns": ns, "techniques": set(ns.get("techniques") or ()), "view": SimpleNamespace(name=name)}
