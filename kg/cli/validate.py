"""Validate catalog and rule files: every problem in one pass, with file:line:column, field, valid values and a hint.

``optkg validate`` checks the whole catalog (techniques, properties, hardware, engine flag tables)
and the rules (schema, expressions, technique ids they name, fixtures). ``optkg validate a.yaml
b.yaml`` (or ``--changed-since origin/main``) reports only on those technique files, while the
cross-file checks (ids, aliases, names, coupling targets, contradictions) still see the whole
catalog the files belong to. Exit codes: 2 when an error-severity problem remains (the catalog
cannot be used), 1 when only problems at or above ``--fail-on`` remain (default: warning), else 0.
The checks and their codes are listed in ``kg.knowledge.checks.CHECKS`` and in docs/rules.md.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kg.core.paths import default_catalog_root, display_path, rules_dir_for
from kg.knowledge.checks import problem_dict
from kg.output.validate_report import render_text

FORMATS = ("text", "json", "sarif", "markdown", "github")
SCHEMA_VERSION = "1.0"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="*", type=Path,
                   help="technique files to report on (cross-file checks still see the whole catalog); default: everything")
    p.add_argument("--catalog", type=Path, default=None,
                   help="catalog folder (default: the one the files sit in, else $OPTKG_HOME/catalog, else ./catalog "
                        "if present, else the shipped catalog)")
    p.add_argument("--rules", type=Path, default=None,
                   help="rules folder (default: rules/ beside the catalog; a catalog without one is checked on its own)")
    p.add_argument("--changed-since", metavar="GIT_REF",
                   help="report on technique files changed since the merge base with GIT_REF (committed, staged, "
                        "unstaged and untracked); deleted files must keep their id resolvable (ids never die)")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--fail-on", choices=("info", "warning", "error", "never"), default="warning",
                   help="exit 1 when a warning-level problem at or above this severity remains (default: warning); "
                        "error-level problems always exit 2")
    p.add_argument("--select", action="append", default=[], metavar="CODE|TAG|SEVERITY",
                   help="keep only problems whose check code, tag or severity matches (repeatable, comma-separated)")
    p.add_argument("--ignore", action="append", default=[], metavar="CODE|TAG|SEVERITY",
                   help="drop problems whose check code, tag or severity matches (repeatable, comma-separated)")
    p.add_argument("--baseline", type=Path, help="JSON file of accepted problems to hide (see --write-baseline)")
    p.add_argument("--write-baseline", type=Path, help="write the current problems as a baseline file")
    p.add_argument("-o", "--output", type=Path, help="write the report here instead of stdout")
    p.add_argument("--force", action="store_true", help="allow overwriting existing output files")


# ---------------------------------------------------------------------------------------------

def _git(args: list[str], cwd: Path, failure: str | None = None) -> str:
    import subprocess
    from kg.core.errors import OptkgError
    from kg.core.textsafe import one_line
    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise OptkgError("--changed-since: git is not installed") from None
    except subprocess.TimeoutExpired:
        raise OptkgError(f"--changed-since: `git {args[0]}` did not answer within 60 s") from None
    if r.returncode != 0:
        msg = failure or (r.stderr.strip().splitlines() or ["failed"])[-1]
        raise OptkgError(f"--changed-since: `git {' '.join(args)}` failed: {one_line(msg)[:300]}")
    return r.stdout


def changed_technique_files(ref: str, root: Path) -> tuple[list[Path], list[Path]]:
    """(changed or added, deleted) ``*.yaml`` files under ``<root>/techniques`` since the merge base of ``ref`` and HEAD.

    Compares the merge base with the working tree, so staged, unstaged and untracked files count.
    Raises OptkgError when git fails (not a repository, unknown ref).
    """
    from kg.core.errors import OptkgError
    from kg.core.textsafe import one_line
    # a revision never starts with '-' (git check-ref-format): '--fork-point', '--', '--help' are options git
    # would obey; refuse them before git sees them, and pass the revision after --end-of-options anyway
    if not ref.strip() or ref.startswith("-") or any(ord(c) < 32 or ord(c) == 127 for c in ref) or len(ref) > 256:
        raise OptkgError(f"--changed-since: {one_line(ref[:80])!r} is not a git revision (a branch, tag or commit, "
                         "e.g. origin/main; it never starts with '-')")
    techdir = (root / "techniques").resolve()
    top = Path(_git(["rev-parse", "--show-toplevel"], techdir if techdir.is_dir() else root).strip())
    commit = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], top,
                  f"unknown revision {one_line(ref)!r}").strip()
    base = _git(["merge-base", commit, "HEAD"], top).strip()
    changed: list[Path] = []
    deleted: list[Path] = []
    fields = _git(["diff", "-z", "--name-status", "--no-renames", base, "--"], top).split("\0")
    for status, name in zip(fields[0::2], fields[1::2]):
        p = (top / name).resolve()
        if p.parent != techdir or p.suffix != ".yaml":
            continue
        (deleted if status.startswith("D") else changed).append(p)
    for name in _git(["ls-files", "-z", "--others", "--exclude-standard"], top).split("\0"):
        if not name:
            continue
        p = (top / name).resolve()
        if p.parent == techdir and p.suffix == ".yaml":
            changed.append(p)
    return sorted(set(changed)), sorted(set(deleted))


def _rules_problems(cat, rules_dir: Path | None) -> list:
    """Rule files: schema and expressions (kg.engine.rules), technique ids they name, and their fixtures."""
    from kg.knowledge.checks import problem
    from kg.engine.rules import RULESET_KINDS, folder_files, load_rules

    out = []
    folder = Path(rules_dir)
    folder_files(folder)  # a missing or empty rules folder is an error, never "catalog OK"
    fixtures = folder / "fixtures"
    seen: set = set()
    for kind in RULESET_KINDS:
        rs, rp = load_rules(kind, folder)
        for p in rp:  # a file-level problem (not a mapping, unknown ruleset) comes back once per kind
            if (p.file, p.line, p.column, p.code, p.message) not in seen:
                seen.add((p.file, p.line, p.column, p.code, p.message))
                out.append(p)
        if kind in ("check", "training"):  # a hand rule and the coupling it refines must agree (issue 12)
            from kg.knowledge.couplings import refine_problems
            out.extend(refine_problems(cat, rs))
        for r in rs.rules:
            named = [("match", p["technique"]) for p in r.match if p.get("kind") == "technique" and "technique" in p]
            named += [("involves", t) for t in r.involves] + [("fixes", t) for t in r.fixes]
            for fld, tid in named:
                if cat.resolve(str(tid)) is None:
                    out.append(problem(r.file, r.line, 1, f"{r.id}.{fld}", f"rule '{r.id}' names unknown technique '{tid}'",
                                       "rule-unknown-technique", found=tid,
                                       hint="use a technique id from catalog/techniques/ (or add the technique)"))
            if not (fixtures / f"{r.id}.yaml").is_file():
                out.append(problem(r.file, r.line, 1, r.id, f"rule '{r.id}' has no fixture file", "rule-no-fixture",
                                   expected=display_path(str(fixtures / f"{r.id}.yaml")),
                                   hint="add fire: and pass: cases (see kg/engine/fixtures.py)"))
    return out


def _engine_problems(cat, root: Path) -> list:
    from kg.knowledge.checks import problem
    from kg.core.errors import OptkgError
    from kg.core.yamlio import load_yaml

    out = []
    for f in sorted((root / "engines").glob("*.yaml")):
        try:
            doc = load_yaml(f)
        except OptkgError as e:
            out.append(problem(str(f), 1, 1, "", str(e), "yaml"))
            continue
        from kg.inputs.stack import engine_table_problems
        for msg in engine_table_problems(doc.data):
            out.append(problem(str(f), 1, 1, "", msg, "engine-table"))
        d = doc.data if isinstance(doc.data, dict) else {}
        for i, tid in enumerate(d.get("default_techniques") or []):
            if cat.resolve(str(tid)) is None:
                line, col = doc.where(("default_techniques", i))
                out.append(problem(str(f), line, col, f"default_techniques[{i}]", f"unknown technique '{tid}'", "engine-table",
                                   found=tid))
        from kg.engines import get
        # engines whose flag tables are checked against released wheels name each flag's releases and evidence
        needs_scope = bool(getattr(get(str(d.get("engine") or "")), "flags_need_release_evidence", False))
        for i, spec in enumerate(d.get("flags") or []):
            if not isinstance(spec, dict):
                continue
            if needs_scope and not (spec.get("since") and spec.get("evidence")):
                line, col = doc.where(("flags", i))
                out.append(problem(str(f), line, col, f"flags[{i}]",
                                   f"flag {(spec.get('names') or ['?'])[0]} has no since:/evidence: (the releases it exists in, "
                                   "and where the released wheel defines it)", "engine-flag-scope", severity="warning"))
            ids = [spec.get("technique"), spec.get("removes")] + list((spec.get("technique_by_value") or {}).values())
            for tid in ids:
                if tid and cat.resolve(str(tid)) is None:
                    line, col = doc.where(("flags", i))
                    out.append(problem(str(f), line, col, f"flags[{i}]", f"unknown technique '{tid}'", "engine-table", found=tid))
    return out


def _removed_id_problems(cat, deleted: list[Path]) -> list:
    from kg.knowledge.checks import problem
    out = []
    for p in deleted:
        tid = p.stem
        if cat.resolve(tid) is not None:
            continue
        users = sorted(o for o, t in cat.techniques.items()
                       for c in (t.get("couplings") or []) if isinstance(c, dict) and c.get("target") == tid)
        more = f"; still named by: {', '.join(users)}" if users else ""
        out.append(problem(str(p), 1, 1, "id", f"technique '{tid}' was deleted and its id no longer resolves{more}",
                           "removed-id", found=tid,
                           hint="ids never die: restore the file with status: deprecated and replaced_by: <successor>, "
                                "or add the old id to the successor's aliases"))
    return out


def collect(args: argparse.Namespace) -> tuple[list, int, Path]:
    """Return (problems, number of techniques loaded, catalog root). Problems are errors and warnings, sorted."""
    import dataclasses
    from kg.core import paths
    from kg.knowledge.catalog import load_catalog
    from kg.knowledge.checks import problem
    from kg.core.errors import OptkgError

    root = args.catalog
    files = list(args.files or [])
    for f in files:
        if not f.exists():
            raise OptkgError(f"{f}: file not found")
        if f.is_dir():
            raise OptkgError(f"{f}: is a directory; give technique files (or no files for the whole catalog)")
    if root is None and files:
        # a technique file names its catalog: <catalog>/techniques/<id>.yaml
        parent = files[0].resolve().parent
        if parent.name == "techniques" and (parent.parent / "axes.yaml").is_file():
            root = parent.parent
    root = Path(root or default_catalog_root())
    if not (root / "axes.yaml").is_file():
        raise OptkgError(f"{root}: not a catalog folder (no axes.yaml); pass --catalog")
    deleted: list[Path] = []
    since = getattr(args, "changed_since", None)
    if since is not None:
        # argparse turns `--changed-since=--` into [] (it drops a lone '--'): still an option, not a revision
        changed, deleted = changed_technique_files(since if isinstance(since, str) else "--", root)
        files += [c for c in changed if c.exists()]
    only = files if (files or since is not None) else None
    techdir = (root / "techniques").resolve()
    # a file outside the catalog is still read and checked (its YAML, schema and placeholders), as
    # `optkg place` does for a draft; outside-catalog is reported beside its own problems
    outside = [f for f in files if f.resolve().parent != techdir and f.suffix in (".yaml", ".yml")]
    cat, errors = load_catalog(root, only=only, use_cache=False, extra=outside or None)
    problems = list(errors) + list(cat.warnings)
    if only is not None:
        for f in files:
            if f.resolve().parent != techdir:
                problems.append(problem(str(f), 1, 1, "", f"file is outside {root / 'techniques'}; cross-file checks "
                                        "only see files in the catalog", "outside-catalog",
                                        hint=f"copy it to {root / 'techniques'}/ (id = file name)"))
        problems.extend(_removed_id_problems(cat, deleted))
    else:
        rules = args.rules or rules_dir_for(root)
        if rules is None and root.resolve() == paths.catalog_dir().resolve():
            rules = paths.rules_dir()
        if rules is not None:  # a catalog kept elsewhere without rules/ beside it is checked on its own
            problems.extend(_rules_problems(cat, rules))
        problems.extend(_engine_problems(cat, root))
    problems = [dataclasses.replace(p, file=display_path(p.file)) for p in problems]
    problems.sort(key=lambda p: (p.file, p.line, p.column, p.code))
    return problems, len(cat.techniques), root


def report(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    """The validate report dict (versioned JSON shape) and the exit code."""
    from kg.output.filtering import apply_filters, fail_code, write_baseline

    problems, n, root = collect(args)
    items = [problem_dict(p) for p in problems]
    # errors are never baselined: a baseline cannot make an unusable catalog pass
    kept, suppressed = apply_filters(items, args.select, args.ignore, args.baseline, never_baselined=("error",))
    if args.write_baseline:
        sel, _ = apply_filters(items, args.select, args.ignore, None)
        n_err = sum(1 for p in sel if p["severity"] == "error")
        if n_err:
            import sys
            print(f"optkg: note: {n_err} error(s) left out of {args.write_baseline}: errors cannot be baselined, fix them",
                  file=sys.stderr)
        write_baseline(args.write_baseline, [p for p in sel if p["severity"] != "error"], force=args.force)
    errors = sum(1 for p in kept if p["severity"] == "error")
    d = {"schema_version": SCHEMA_VERSION, "kind": "validate", "catalog": display_path(str(root)), "techniques": n,
         "problems": kept, "suppressed": suppressed,
         "summary": {"errors": errors, "warnings": len(kept) - errors, "files": len({p["file"] for p in kept})}}
    code = 2 if errors else fail_code(kept, args.fail_on)
    return d, code


def run(args: argparse.Namespace) -> int:
    from kg.output.report import to_json
    from kg.cli.common import write_output

    d, code = report(args)
    if args.format == "text":
        text = render_text(d["problems"], d["techniques"], d["suppressed"])
    elif args.format == "json":
        text = to_json(d)
    else:
        from kg.output.formats import render
        text = render(args.format, "validate", d)
    write_output(text, args.output, force=args.force)
    return code
