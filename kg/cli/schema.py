"""Write catalog/schema/technique.schema.json from the axes (or --check that it is fresh)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from kg.core.errors import OptkgError


def schema_text(catalog_dir: Path) -> str:
    from kg.knowledge.axes import load_axes
    from kg.knowledge.schema import technique_schema
    return json.dumps(technique_schema(load_axes(catalog_dir / "axes.yaml")), indent=2, ensure_ascii=False) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--catalog", type=Path, default=None)
    p.add_argument("--check", action="store_true", help="exit 1 if the committed schema is stale")


def run(args: argparse.Namespace) -> int:
    from kg.core import paths
    from kg.core.yamlio import atomic_write
    root = args.catalog or paths.catalog_dir()
    target = root / "schema" / "technique.schema.json"
    text = schema_text(root)
    if args.check:
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if current != text:
            print(f"{target}: stale; run `optkg schema`")
            return 1
        print(f"{target}: fresh")
        return 0
    if not target.parent.is_dir():
        raise OptkgError(f"{target.parent}: folder does not exist")
    if target.is_file() and target.read_text(encoding="utf-8") == text:
        print(f"{target}: fresh")  # nothing to write (and nothing fails on a read-only checkout)
        return 0
    atomic_write(target, text)
    print(f"wrote {target}")
    return 0
