"""Write a commented template for a new technique (refuses to overwrite; ids are never reused).

Usage: ``optkg new <id> [--from <existing>] [-o DIR]`` writes ``DIR/<id>.yaml`` (default DIR: the
catalog's techniques/ folder). The file starts with a ``yaml-language-server`` ``$schema`` modeline so editors (VS Code YAML,
any yaml-language-server client) complete field names and enum values from the JSON Schema.
Enum choices (stages, layers, dimensions, coupling kinds, ...) are listed in comments, generated
from ``catalog/axes.yaml`` and kg.knowledge.schema. Placeholders read ``TODO``; ``optkg validate`` reports
each one left. ``--from`` starts from an existing neighbour (its coordinates, benefits, costs,
parameters, couplings and references). Never overwrites a file; refuses an id (or alias) that the
catalog already uses, since ids are never reused.
"""
from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
MAX_ID = 100  # characters; file names stop at 255 bytes
TEMPLATE = Path(__file__).resolve().parent.parent / "templates" / "technique.yaml"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="id of the new technique (lower-case-with-dashes; becomes <id>.yaml)")
    p.add_argument("--from", dest="from_id", metavar="EXISTING", help="start from an existing technique (id or alias)")
    p.add_argument("-o", "--output-dir", type=Path, default=None,
                   help="folder to write <id>.yaml into (default: the catalog's techniques/ folder)")
    p.add_argument("--catalog", type=Path, default=None,
                   help="catalog folder (default: $OPTKG_HOME/catalog, else ./catalog if present, else the shipped catalog)")


def _doc_lines(items: list[tuple[str, str]], prefix: str) -> str:
    return "\n".join(f"{prefix}{k}: {v}" if v else f"{prefix}{k}" for k, v in items)


def schema_ref(out_dir: Path, catalog_root: Path) -> str:
    """Modeline target: the catalog's schema file relative to ``out_dir``, else the published schema id."""
    from kg.knowledge.schema import SCHEMA_ID
    local = catalog_root / "schema" / "technique.schema.json"
    if local.is_file():
        try:
            return Path(os.path.relpath(local.resolve(), out_dir.resolve())).as_posix()
        except ValueError:  # another drive (Windows)
            return local.resolve().as_uri()
    return SCHEMA_ID


def blank_template(tid: str, axes, ref: str, shown_path: str, validate_args: str | None = None) -> str:
    """The commented template for ``tid`` (text). ``validate_args``: what to pass to ``optkg validate``
    (default ``shown_path``)."""
    from string import Template
    from kg.knowledge.schema import COUPLING_KINDS, PARAM_TYPES, REFERENCE_KINDS, SEVERITIES, STATUSES

    def axis(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [(it["id"], f"{it['name']} ({it['name_zh']}): {it['description']}") for it in items]

    return Template(TEMPLATE.read_text(encoding="utf-8")).substitute(
        id=tid, schema_ref=ref, path=shown_path, validate_args=validate_args or shown_path,
        status_doc=_doc_lines(list(STATUSES.items()), "#   "),
        stages_doc=_doc_lines(axis(axes.stages), "  #   "),
        layers_doc=_doc_lines(axis(axes.layers), "  #   "),
        dimensions_doc=_doc_lines(axis(axes.dimensions), "  #   "),
        param_types_doc=_doc_lines(list(PARAM_TYPES.items()), "#       "),
        kinds_doc=_doc_lines(list(COUPLING_KINDS.items()), "#       "),
        severity_doc=_doc_lines(list(SEVERITIES.items()), "#       "),
        ref_kinds_doc=_doc_lines(list(REFERENCE_KINDS.items()), "#   "),
    )


def _dump(value: Any) -> str:
    import yaml
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=110, default_flow_style=False)


def from_neighbour(tid: str, src_id: str, src: dict[str, Any], ref: str, shown_path: str,
                   validate_args: str | None = None) -> str:
    """A new entry that starts from ``src`` (a technique dict): everything about it that a neighbour
    plausibly shares is copied and marked for review; name and summary are placeholders."""
    head = [
        f"# yaml-language-server: $schema={ref}",
        f"# New optkg technique '{tid}', started from '{src_id}'. Everything below the summary was copied",
        f"# from '{src_id}': keep what holds for '{tid}', change or delete the rest. Then run",
        f"#   optkg validate {validate_args or shown_path}",
        f"#   optkg place {shown_path}",
        "# Walkthrough: CONTRIBUTING.md.",
        "",
    ]
    body: dict[str, Any] = {
        "id": tid,
        "name": f"TODO display name (started from {src.get('name', src_id)})",
        "aliases": [],
        "summary": "TODO one sentence in your own words",
        "status": "experimental",
    }
    for key in ("tags", "coordinates", "benefits", "costs", "parameters", "couplings", "references"):
        if src.get(key):
            body[key] = src[key]
    out = list(head)
    for key, value in body.items():
        if key in ("coordinates", "benefits", "costs", "parameters", "couplings", "references"):
            out.append(f"# {key}: copied from {src_id}; review")
        out.append(_dump({key: value}).rstrip())
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    from kg.knowledge.catalog import load_catalog
    from kg.knowledge.filechecks import _slug
    from kg.core.errors import OptkgError
    from kg.core.yamlio import atomic_write

    tid = args.id
    if not ID_RE.match(tid):
        raise OptkgError(f"id '{tid}': use lower-case letters, digits and dashes (e.g. {_slug(tid)})")
    if len(tid) > MAX_ID:
        raise OptkgError(f"id '{tid[:40]}...': {len(tid)} characters; an id has at most {MAX_ID} (it is a file name)")
    from kg.core.paths import default_catalog_root
    root = Path(args.catalog) if args.catalog else default_catalog_root()
    if not (root / "axes.yaml").is_file():
        raise OptkgError(f"{root}: not a catalog folder (no axes.yaml); pass --catalog")
    if args.output_dir is not None:
        out_dir = args.output_dir
    else:
        out_dir = root / "techniques"
        if "_data" in root.resolve().parts and root.resolve().parent.name == "_data":
            raise OptkgError("the catalog is the one bundled in the installed package; pass -o DIR (or --catalog)")
    if out_dir.is_symlink():  # writing through it would create the file in the folder it points to
        raise OptkgError(f"-o {out_dir}: is a symbolic link to {os.path.realpath(out_dir)}; refusing to write through "
                         "it (give the target folder itself)")
    if out_dir.exists() and not out_dir.is_dir():
        raise OptkgError(f"-o {out_dir}: is a file, expected the folder to write <id>.yaml into")
    if not out_dir.is_dir():
        raise OptkgError(f"-o {out_dir}: folder does not exist")
    target = out_dir / f"{tid}.yaml"
    if target.exists():
        raise OptkgError(f"{target}: exists; refusing to overwrite (ids are never reused: pick another id, or edit the file)")
    cat, _ = load_catalog(root, use_cache=False)
    owner = cat.resolve(tid)
    if owner is not None:
        what = "the id of a technique" if owner == tid else f"an alias of '{owner}'"
        raise OptkgError(f"id '{tid}' is already {what} ({cat.files.get(owner, root)}); ids are never reused")
    from kg.core.textsafe import one_line
    rel = os.path.relpath(target, Path.cwd())
    shown = one_line(rel if not rel.startswith("..") else str(target))  # a name, printed and written into the template
    # outside <catalog>/techniques `optkg validate` reports only [outside-catalog]; `optkg place` checks
    # the entry as if it were in the catalog, so it is the first step there, validate after the move
    inside = out_dir.resolve() == (root / "techniques").resolve()
    in_catalog = one_line(root / "techniques" / target.name)
    validate_args = shown if inside else f"{in_catalog} (after moving it there)"
    ref = schema_ref(out_dir, root)
    if args.from_id:
        src_id = cat.resolve(args.from_id)
        if src_id is None:
            from difflib import get_close_matches
            near = get_close_matches(args.from_id, list(cat.techniques), n=3)
            raise OptkgError(f"--from: unknown technique '{args.from_id}'" + (f"; did you mean {', '.join(near)}?" if near else ""))
        text = from_neighbour(tid, src_id, cat.techniques[src_id], ref, shown, validate_args)
    else:
        text = blank_template(tid, cat.axes, ref, shown, validate_args)
    atomic_write(target, text, force=False)
    print(f"wrote {shown}")
    if inside:
        print(f"next: replace the TODOs, then `optkg validate {shown}` and `optkg place {shown}`")
    else:
        print(f"next: replace the TODOs, then `optkg place {shown}` (checks the entry as if it were in the catalog "
              f"and places it); then move it to {in_catalog} and run `optkg validate {in_catalog}`")
    return 0
