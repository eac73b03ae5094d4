"""Draw diagrams: coordinate maps, the coupling graph, the compatibility matrix (`optkg export map|graph|matrix|all`).

Examples::

    optkg export map -o map.png                      # all stage panels + the combined panel
    optkg export map --stage inference --gaps -o inference-gaps.svg
    optkg export graph --focus tensor-parallelism --depth 2 -o tp.svg
    optkg export graph --format mermaid > graph.mmd
    optkg export matrix -o matrix.svg
    optkg export site -o site                        # the offline HTML explorer: open site/index.html
    optkg export --all                               # every diagram (and the site, exports/site/) into exports/
    optkg export --all --check                       # exit 1 when exports/ is stale

Formats: svg, png, pdf (Graphviz), dot, mermaid, graphml, json; chosen by --format or the
suffix of -o. Without -o, text formats go to stdout. Files are written atomically, only to the
path given, and never over an existing file without --force (``--all`` replaces only the files its
``manifest.json`` lists, see kg.core.outdir).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kg.core.errors import OptkgError
from kg.cli.common import add_catalog_arg, load_clean_catalog

WHAT = ("map", "graph", "matrix", "site", "all")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = "examples:\n" + (__doc__ or "").split("Examples::")[1].split("Formats:")[0].rstrip() + "\n"
    p.add_argument("what", nargs="?", choices=WHAT, help="which diagram (map, graph, matrix), the HTML explorer (site) or all")
    p.add_argument("--all", action="store_true", dest="all_", help="write every diagram into exports/ (or -o DIR)")
    p.add_argument("--check", action="store_true",
                   help="with --all or site: write nothing; exit 1 when the files in the folder are stale")
    add_catalog_arg(p)
    p.add_argument("-o", "--output", type=Path,
                   help="output file (a folder with --all, default exports/; with site, default site/)")
    p.add_argument("--format", choices=("svg", "png", "pdf", "dot", "mermaid", "graphml", "json"),
                   help="output format (default: from the -o suffix, else svg)")
    p.add_argument("--force", action="store_true", help="allow overwriting an existing output file")
    g = p.add_argument_group("filters (repeatable, comma-separated)")
    g.add_argument("--stage", action="append", default=[], help="keep techniques used in these stages (map: panels)")
    g.add_argument("--layer", action="append", default=[], help="keep techniques spanning these layers (map: rows)")
    g.add_argument("--dimension", action="append", default=[],
                   help="keep techniques whose primary dimension is one of these (map: columns)")
    g.add_argument("--tag", action="append", default=[], help="keep techniques with one of these tags")
    g.add_argument("--status", action="append", default=[], help="keep techniques with this status")
    m = p.add_argument_group("map")
    m.add_argument("--gaps", action="store_true", help="highlight ranked empty cells and annotated cells")
    m.add_argument("--combined", action="store_true", help="draw only the combined panel")
    m.add_argument("--no-combined", action="store_true", help="draw only the stage panels")
    gr = p.add_argument_group("graph")
    gr.add_argument("--focus", metavar="ID", help="draw the neighbourhood of this technique (or property)")
    gr.add_argument("--depth", type=int, default=None, help="hops around --focus (default 1; needs --focus)")
    gr.add_argument("--no-properties", action="store_true", help="leave out the property nodes")
    gr.add_argument("--engine", choices=("grid", "dot", "fdp", "sfdp", "neato"),
                    help="layout: grid (rows = layers, columns = dimensions; default for the whole graph), "
                         "dot (default for --focus), or force-directed fdp/sfdp/neato (seeded)")


def _filters(args: argparse.Namespace):
    from kg.output.diagrams.filters import Filters
    return Filters.from_lists(args.stage, args.layer, args.dimension, args.tag, args.status)


def refuse_linked_folder(out: Path, force: bool) -> None:
    """OptkgError when the output folder ``out`` is a symbolic link (to a folder): writing would land in the
    folder it points to, not the one asked for; ``--force`` writes there (as for a file, naming the target)."""
    import os
    if out.is_symlink() and not out.exists():
        raise OptkgError(f"-o {out}: is a symbolic link to {os.path.realpath(out)}, which does not exist; "
                         "refusing to write through it")
    if out.is_symlink() and not force:
        raise OptkgError(f"-o {out}: is a symbolic link to {os.path.realpath(out)}; refusing to write through it "
                         "(remove the link, give the target folder, or pass --force)")


def _run_all(args: argparse.Namespace, catalog) -> int:
    from kg.output.diagrams.exportall import export_all
    if args.format or args.focus or args.depth is not None or args.gaps or args.combined or args.no_combined:
        raise OptkgError("--all writes a fixed set of diagrams; drop --format/--focus/--depth/--gaps/--combined")
    if not _filters(args).is_empty():
        raise OptkgError("--all draws the whole catalog; drop the --stage/--layer/--dimension/--tag/--status filters")
    out = args.output or Path("exports")
    if not args.check:
        refuse_linked_folder(out, args.force)
    if not args.check and not out.exists() and out.parent.is_dir():
        out.mkdir()  # the folder asked for, and nothing above it
    problems = export_all(catalog, out, args.rules, check=args.check, force=args.force,
                          log=None if args.check else (lambda s: sys.stderr.write(s + "\n")))
    if args.check:
        if problems:
            for p in problems:
                sys.stdout.write(p + "\n")
            sys.stdout.write(f"{len(problems)} problem(s): run `optkg export --all` (make export) and commit {out}/\n")
            return 1
        sys.stdout.write(f"{out}/ is up to date\n")
    return 0


def _run_site(args: argparse.Namespace) -> int:
    from kg.output.site import build_site, check_site, write_site
    if args.format or args.focus or args.depth is not None or args.gaps or args.combined or args.no_combined \
            or args.no_properties or args.engine or not _filters(args).is_empty():
        raise OptkgError("`optkg export site` writes the whole explorer (its filters are on the pages); "
                         "drop --format/--focus/--depth/--gaps/--combined/--engine and the filters")
    out = args.output or Path("site")
    if not args.check:
        refuse_linked_folder(out, args.force)
    if out.exists() and not out.is_dir():
        raise OptkgError(f"-o {out}: not a folder (the site is a folder of pages)")
    if not out.exists() and not args.check and not out.parent.is_dir():
        raise OptkgError(f"-o {out}: folder {out.parent} does not exist")
    catalog = load_clean_catalog(args)
    files = build_site(catalog, args.rules)
    if args.check:
        problems = check_site(files, out)
        for p in problems:
            sys.stdout.write(p + "\n")
        if problems:
            sys.stdout.write(f"{len(problems)} problem(s): run `optkg export site -o {out}`\n")
            return 1
        sys.stdout.write(f"{out}/ is up to date\n")
        return 0
    if not out.exists():
        out.mkdir()  # the folder asked for, and nothing above it
    write_site(files, out, force=args.force, log=lambda s: sys.stderr.write(s + "\n"))
    sys.stdout.write(f"open {out / 'index.html'}\n")
    return 0


def run(args: argparse.Namespace) -> int:
    from kg.output.diagrams.exportall import _load_matrix
    from kg.output.diagrams.graphview import coupling_graph
    from kg.output.diagrams.map import coordinate_map
    from kg.output.diagrams.matrix import matrix_diagram
    from kg.output.diagrams.render import BINARY, format_for, write_diagram

    if args.all_ or args.what == "all":
        catalog = load_clean_catalog(args)
        return _run_all(args, catalog)
    if args.what == "site":
        return _run_site(args)
    if args.check:
        raise OptkgError("--check goes with --all or site")
    if not args.what:
        raise OptkgError("say what to draw: optkg export map|graph|matrix|all (see --help)")
    catalog = load_clean_catalog(args)
    filters = _filters(args).validate(catalog)
    if args.depth is not None and not args.focus:
        raise OptkgError("--depth counts hops around --focus: add --focus ID, or drop --depth")
    if args.what != "graph" and (args.focus or args.no_properties or args.engine):
        raise OptkgError("--focus, --depth, --no-properties and --engine go with `optkg export graph`")
    if args.what != "map" and (args.gaps or args.combined or args.no_combined):
        raise OptkgError("--gaps, --combined and --no-combined go with `optkg export map`")
    fmt = format_for(args.output, args.format)
    if args.what == "map":
        if args.combined and args.no_combined:
            raise OptkgError("--combined and --no-combined exclude each other")
        if args.gaps and args.combined:
            raise OptkgError("--gaps marks cells of the stage panels (gaps are per stage); drop --combined")
        gaps = None
        if args.gaps:
            from kg.analyses.gaps import find_gaps
            from kg.engine.rules import load_ruleset
            gaps = find_gaps(catalog, load_ruleset("gaps", args.rules),
                             stages=list(filters.stages) or None, layers=list(filters.layers) or None,
                             dimensions=list(filters.dimensions) or None)
        d = coordinate_map(catalog, filters, combined=not args.no_combined, stage_panels=not args.combined,
                           gaps=gaps)
    elif args.what == "graph":
        d = coupling_graph(catalog, filters, focus=args.focus, depth=1 if args.depth is None else args.depth,
                           properties=not args.no_properties, engine=args.engine)
    else:
        matrix = _load_matrix(catalog, args.rules)
        if matrix is None:
            raise OptkgError("the compatibility matrix (kg.analyses.matrix) is not available in this installation")
        d = matrix_diagram(matrix, catalog, filters)
    if args.output is None or str(args.output) == "-":
        if fmt in BINARY:
            raise OptkgError(f"--format {fmt} is binary: give a file with -o")
        sys.stdout.write(d.render(fmt).decode("utf-8"))
        return 0
    write_diagram(d, args.output, fmt, force=args.force)
    return 0
