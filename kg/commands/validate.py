"""Validate catalog and rule files: every problem in one pass, with file:line:column, field, valid values and a hint."""
from __future__ import annotations

import argparse
from pathlib import Path

FORMATS = ("text", "json", "sarif", "markdown", "github")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="*", type=Path,
                   help="technique files to report on (cross-file checks still see the whole catalog); default: everything")
    p.add_argument("--catalog", type=Path, default=None, help="catalog folder (default: the shipped catalog)")
    p.add_argument("--rules", type=Path, default=None, help="rules folder (default: the shipped rules/)")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("-o", "--output", type=Path)
    p.add_argument("--force", action="store_true")


def collect(args: argparse.Namespace) -> tuple[list, int, Path]:
    """Return (problems, number of technique files, catalog root)."""
    from .. import paths
    from ..catalog import load_catalog
    from ..errors import OptkgError, Problem
    from ..rules import RULESET_KINDS, load_rules
    from ..yamlio import load_yaml

    root = args.catalog
    only = None
    if args.files:
        for f in args.files:
            if not f.exists():
                raise OptkgError(f"{f}: file not found")
        if root is None:
            # a technique file names its catalog: <catalog>/techniques/<id>.yaml
            parent = args.files[0].resolve().parent
            if parent.name == "techniques" and (parent.parent / "axes.yaml").is_file():
                root = parent.parent
        only = [f for f in args.files]
    root = root or paths.catalog_dir()
    cat, problems = load_catalog(root, only=only, use_cache=False)
    problems = list(problems)
    if only is not None:
        techdir = (root / "techniques").resolve()
        for f in args.files:
            if f.resolve().parent != techdir:
                problems.append(Problem(str(f), 1, 1, "", f"file is outside {root / 'techniques'}; cross-file checks "
                                        "only see files in the catalog", "outside-catalog",
                                        hint=f"copy it to {root / 'techniques'}/ (id = file name)"))
    if only is None:
        for kind in RULESET_KINDS:
            _, rp = load_rules(kind, args.rules)
            problems.extend(rp)
        # engine flag tables must name existing techniques
        for f in sorted((root / "engines").glob("*.yaml")):
            try:
                doc = load_yaml(f)
            except OptkgError as e:
                problems.append(Problem(str(f), 1, 1, "", str(e), "yaml"))
                continue
            d = doc.data or {}
            for key in ("default_techniques",):
                for i, tid in enumerate(d.get(key) or []):
                    if cat.resolve(tid) is None:
                        line, col = doc.where((key, i))
                        problems.append(Problem(str(f), line, col, f"{key}[{i}]", f"unknown technique '{tid}'", "engine-table"))
            for i, spec in enumerate(d.get("flags") or []):
                ids = [spec.get("technique"), spec.get("removes")] + list((spec.get("technique_by_value") or {}).values())
                for tid in ids:
                    if tid and cat.resolve(tid) is None:
                        line, col = doc.where(("flags", i))
                        problems.append(Problem(str(f), line, col, f"flags[{i}]", f"unknown technique '{tid}'", "engine-table"))
    problems.sort(key=lambda p: (p.file, p.line, p.column, p.code))
    return problems, len(cat.techniques), root


def render_text(problems, n_files: int) -> str:
    out = []
    for p in problems:
        out.append(f"{p.location()}: {p.path + ': ' if p.path else ''}{p.message} [{p.code}]")
        if p.found is not None and p.code not in ("yaml",):
            out.append(f"    found: {p.found!r}")
        if p.expected:
            out.append(f"    expected: {p.expected}")
        if p.valid_values:
            out.append("    valid values:")
            for v, d in p.valid_values:
                out.append(f"      - {v}: {d}" if d else f"      - {v}")
        if p.hint:
            out.append(f"    hint: {p.hint}")
    files = len({p.file for p in problems})
    if problems:
        out.append(f"{len(problems)} problem(s) in {files} file(s)")
    else:
        out.append(f"catalog OK: {n_files} techniques, no problems")
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    from ..report import to_json
    from .common import write_output

    problems, n, root = collect(args)
    if args.format == "text":
        text = render_text(problems, n)
    else:
        d = {"schema_version": "1.0", "kind": "validate", "catalog": str(root), "techniques": n,
             "problems": [p.to_dict() for p in problems]}
        if args.format == "json":
            text = to_json(d)
        else:
            from ..formats import render
            text = render(args.format, "validate", d)
    write_output(text, args.output, force=args.force)
    return 2 if problems else 0
