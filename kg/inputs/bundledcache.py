"""Bundled model configs found and parsed once per process (``kg.inputs.modelcfg.resolve_model``):
an index of the models folder kept while the folder's mtime is unchanged, and each file's facts kept
while it and its companion files keep their size and mtime. Every caller gets its own copy."""
from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, Callable

_SEEN: dict[Any, tuple[Any, Any]] = {}  # per process: folder indexes and files' parsed data, with their stamps


def folder_index(d: Path, key: Callable[[Path], str]) -> dict[str, Path]:
    """``key(f)`` -> f for the ``*.json`` files of ``d`` (the first in name order, as a scan finds it),
    listed again only when the folder's mtime changes (a file added, removed or renamed)."""
    stamp = (d.stat().st_mtime_ns if d.is_dir() else None, key)
    hit = _SEEN.get(d)
    if hit is None or hit[0] != stamp:
        index: dict[str, Path] = {}
        for f in sorted(d.glob("*.json")):
            index.setdefault(key(f), f)
        _remember(d, hit := (stamp, index))
    return hit[1]


def parsed_once(f: Path, companions: tuple[Path, ...], load: Callable[[Path], Any]) -> Any:
    """A copy of ``load(f)``, computed once per process while ``f`` and ``companions`` keep their size and mtime
    (checking the shipped fixtures resolves the same few models ~1,100 times)."""
    stamp = (load, tuple((s.st_size, s.st_mtime_ns) if (s := _stat(q)) else None for q in (f, *companions)))
    hit = _SEEN.get(f)
    if hit is None or hit[0] != stamp:
        _remember(f, hit := (stamp, load(f)))
    return copy.deepcopy(hit[1])


def _remember(k: Any, v: tuple[Any, Any]) -> None:
    if len(_SEEN) > 1024:  # bounded: a long process reading many folders does not grow it
        _SEEN.clear()
    _SEEN[k] = v


def _stat(p: Path) -> os.stat_result | None:
    try:
        return p.stat()
    except OSError:
        return None
