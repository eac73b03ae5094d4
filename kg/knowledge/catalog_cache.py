"""The catalog as plain cache data and back (issue 17: the cache holds JSON, never a pickle).

``catalog_data(cat)`` turns a validated ``Catalog`` into JSON-able data; ``catalog_from_data(d, root)``
rebuilds it, or returns None when ``d`` does not have the expected shape (the caller then loads and
validates the catalog from its files). ``kg.core.cache`` checks the entry's checksum, version and key
before this module sees the data.
"""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from kg.core.cache import mentions, moved
from kg.core.errors import Problem
from kg.knowledge.axes import Axes

SHAPE = 2  # 2: paths written beside the folder they were built in ("root"), moved to the reading folder
_PROBLEM_FIELDS = [f.name for f in fields(Problem)]


def catalog_data(cat: Any) -> dict[str, Any]:
    """``cat`` (a kg.knowledge.catalog.Catalog) as plain data."""
    ax = cat.axes
    d = {
        "shape": SHAPE,
        "axes": {"stages": ax.stages, "layers": ax.layers, "dimensions": ax.dimensions,
                 "cell_annotations": ax.cell_annotations},
        "techniques": cat.techniques, "properties": cat.properties, "hardware": cat.hardware,
        "aliases": cat.aliases, "files": cat.files,
        "warnings": [[[list(v) for v in p.valid_values] if n == "valid_values" else getattr(p, n) for n in _PROBLEM_FIELDS]
                     for p in cat.warnings],
        "problem_fields": _PROBLEM_FIELDS,
    }
    # the catalog's folder appears only in the file paths (each technique's, each warning's), which
    # catalog_from_data moves to the folder it reads the entry for; anywhere else it pins the entry to this folder
    root = str(cat.root)
    rest = {k: v for k, v in d.items() if k != "files"}
    rest["warnings"] = [[v for n, v in zip(_PROBLEM_FIELDS, row) if n != "file"] for row in d["warnings"]]
    d["root"], d["pinned"] = root, mentions(rest, root)
    return d


def catalog_from_data(d: Any, root: Path, catalog_cls: type) -> Any | None:
    """A ``catalog_cls`` rebuilt from ``catalog_data`` output, or None when ``d`` has another shape."""
    try:
        if not isinstance(d, dict) or d.get("shape") != SHAPE or d.get("problem_fields") != _PROBLEM_FIELDS:
            return None
        old, new = d["root"], str(root)
        if not isinstance(old, str) or (d["pinned"] is not False and old != new):
            return None
        a = d["axes"]
        axes = Axes(a["stages"], a["layers"], a["dimensions"], a["cell_annotations"])
        warnings = []
        for row in d["warnings"]:
            p = dict(zip(_PROBLEM_FIELDS, row))
            p["file"] = moved(p["file"], old, new)
            p["valid_values"] = tuple(tuple(v) for v in p.get("valid_values") or ())
            warnings.append(Problem(**p))
        parts = (d["techniques"], d["properties"], d["hardware"], d["aliases"], d["files"])
        if not all(isinstance(x, dict) for x in parts):
            return None
        if old != new:
            parts = (*parts[:4], {k: moved(v, old, new) for k, v in parts[4].items()})
        return catalog_cls(root, axes, *parts, warnings)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
