"""Print the technique x technique compatibility matrix derived from the coupling graph and the check rules."""
from __future__ import annotations

import argparse

from kg.cli.common import add_catalog_arg, load_clean_catalog, write_output


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", help="only evidence that holds on this engine (vllm, sglang, trtllm)")
    p.add_argument("--engine-version", help="with --engine: the release (e.g. 0.10.2); version-ranged rules then apply exactly")
    p.add_argument("--technique", action="append", default=[], metavar="ID",
                   help="only pairs involving this technique (id or alias; repeatable)")
    p.add_argument("--mark", choices=("conflict", "conditional"), help="only cells with this mark")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--no-grid", action="store_true", help="text: list the cells without the grid")
    p.add_argument("-o", "--output", type=__import__("pathlib").Path, help="write here instead of stdout")
    p.add_argument("--force", action="store_true", help="allow overwriting an existing output file")
    add_catalog_arg(p)


def run(args: argparse.Namespace) -> int:
    from kg.core.errors import OptkgError
    from kg.analyses.matrix import compatibility_matrix, render_matrix_text
    from kg.output.report import to_json
    from kg.engine.rules import load_ruleset

    if args.engine_version is not None:  # '' or 1.2.3.4.5.6 is no release (issue 26 #26): never read as "none"
        from kg.inputs.stack import check_engine_version
        args.engine_version = check_engine_version(args.engine_version, "--engine-version")
    catalog = load_clean_catalog(args)
    rules = load_ruleset("check", args.rules)
    m = compatibility_matrix(catalog, rules, engine=args.engine.lower() if args.engine else None,
                             version=args.engine_version)
    if args.technique:
        keep = set()
        for name in args.technique:
            tid = catalog.resolve(name)
            if tid is None:
                raise OptkgError(f"--technique: unknown technique '{name}' (ids are the file names in catalog/techniques/)")
            keep.add(tid)
        m["cells"] = [c for c in m["cells"] if c["a"] in keep or c["b"] in keep]
    if args.mark:
        m["cells"] = [c for c in m["cells"] if c["mark"] == args.mark]
    if args.format == "json":
        text = to_json(m)
    else:
        names = {tid: t.get("short_name") or t["name"] for tid, t in catalog.techniques.items()}
        text = render_matrix_text(m, names, grid=not args.no_grid)
    write_output(text, args.output, force=args.force)
    return 0
