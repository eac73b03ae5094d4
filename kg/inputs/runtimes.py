"""Training frameworks and data-driven settings a stack may name (``catalog/frameworks/``, ``catalog/settings/``).

A stack names its runtime: ``engine:`` for serving (``catalog/engines/*.yaml``) and ``framework:``
for training. Frameworks are data, one file per framework::

    # catalog/frameworks/deepspeed.yaml
    framework: deepspeed            # the id rules and coupling conditions compare (framework == 'deepspeed')
    name: DeepSpeed
    aliases: [microsoft-deepspeed]
    stages: [training]
    source: {title: ..., url: https://...}

Settings beyond the serving ones in ``kg.inputs.stack.BASE_SETTINGS`` are data too:
``catalog/settings/*.yaml`` hold ``settings: {name: {type, description, minimum?, maximum?}}``
(``type`` one of integer, number, boolean, string). Tables are read once per set of file versions.
Errors: OptkgError naming the unknown framework and the known ones.
"""
from __future__ import annotations

from difflib import get_close_matches
from typing import Any

from kg.core import paths
from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml

_CACHE: dict[tuple, Any] = {}


def _read_folder(name: str) -> list[dict[str, Any]]:
    files = sorted((paths.catalog_dir() / name).glob("*.yaml"))
    key = (name,) + tuple((str(f), f.stat().st_mtime_ns) for f in files)
    if key not in _CACHE:
        out = []
        for f in files:
            data = load_yaml(f).data
            if not isinstance(data, dict):
                raise OptkgError(f"{f}:1: expected a mapping")
            out.append({**data, "_file": str(f)})
        for k in [k for k in _CACHE if k[0] == name]:
            del _CACHE[k]
        _CACHE[key] = out
    return _CACHE[key]


def frameworks() -> dict[str, dict[str, Any]]:
    """Framework entries by id (``catalog/frameworks/*.yaml``)."""
    out = {}
    for t in _read_folder("frameworks"):
        fid = t.get("framework")
        if not isinstance(fid, str):
            raise OptkgError(f"{t['_file']}:1: a framework file needs `framework: <id>`")
        out[fid] = t
    return out


def resolve_framework(name: Any, where: str) -> str:
    """The framework id for ``name`` (case-insensitive, aliases allowed); OptkgError listing the known ones."""
    table = frameworks()
    by_name: dict[str, str] = {}
    for fid, t in table.items():
        by_name[fid.lower()] = fid
        for a in t.get("aliases") or []:
            by_name[str(a).lower()] = fid
    key = str(name).strip().lower()
    if key in by_name:
        return by_name[key]
    near = get_close_matches(key, list(by_name), n=1)
    hint = f"; did you mean '{by_name[near[0]]}'?" if near else ""
    raise OptkgError(f"{where}: unknown framework '{name}'{hint} (known: {', '.join(sorted(table))}; "
                     "add catalog/frameworks/<framework>.yaml to teach optkg another one)")


def extra_settings() -> dict[str, dict[str, Any]]:
    """Settings declared in ``catalog/settings/*.yaml``: name -> {type, description, minimum?, maximum?}."""
    out: dict[str, dict[str, Any]] = {}
    for t in _read_folder("settings"):
        for k, spec in (t.get("settings") or {}).items():
            if not isinstance(spec, dict) or spec.get("type") not in ("integer", "number", "boolean", "string"):
                raise OptkgError(f"{t['_file']}: setting '{k}' needs type integer, number, boolean or string")
            out[str(k)] = spec
    return out
