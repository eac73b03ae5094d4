"""Regenerate the technique and rule reference (docs/techniques.md, docs/rules.md); --check exits 1 when stale."""
from __future__ import annotations

import argparse
from pathlib import Path

from kg.core.textsafe import one_line


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--catalog", type=Path, default=None,
                   help="catalog folder (default: $OPTKG_HOME/catalog, else ./catalog if present, else the shipped catalog)")
    p.add_argument("--rules", type=Path, default=None, help="rules folder (default: the one beside the catalog)")
    p.add_argument("-o", "--output-dir", type=Path, default=None, help="docs folder (default: docs/ beside the catalog)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a committed file is stale")
    p.add_argument("--force", action="store_true",
                   help="replace files in the folder that optkg did not generate (without it they are never touched)")


def run(args: argparse.Namespace) -> int:
    from kg.core import paths
    from kg.output.docs import write_docs
    from kg.core.paths import default_catalog_root, display_path, rules_dir_for

    root = Path(args.catalog) if args.catalog else default_catalog_root()
    rules = args.rules or rules_dir_for(root) or paths.rules_dir()
    out_dir = args.output_dir or (root.resolve().parent / "docs")
    if Path(out_dir).is_symlink():  # found by make fuzz: docs -o LINK wrote into the folder behind it (cf. #5)
        import os
        from kg.core.errors import OptkgError
        raise OptkgError(f"-o {one_line(str(out_dir))}: is a symbolic link to {one_line(os.path.realpath(out_dir))}; "
                         "refusing to write through it (give the target folder itself)")
    results = write_docs(root, Path(rules), out_dir, check=args.check, force=args.force)
    stale = False
    for path, status in results:
        shown = display_path(str(path))
        if status == "stale":
            stale = True
            print(f"{one_line(shown)}: stale; run `optkg docs` and commit the result")
        elif status == "written":
            print(f"wrote {one_line(shown)}")
        else:
            print(f"{one_line(shown)}: fresh")
    return 1 if stale else 0
