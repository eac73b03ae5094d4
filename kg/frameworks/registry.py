"""The training frameworks optkg knows: every subpackage of kg.frameworks that exports ``FRAMEWORKS``.

``get(id)`` is the framework a job names (the generic TrainingFramework for a framework that has a
catalog entry but no package); ``resolve`` turns a name or alias into an id; ``command_framework``
and ``file_framework`` pick the framework whose reader takes a pasted command or a config file.
Packages are found on first use (pkgutil over this folder), so adding a framework edits no list.
"""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from pathlib import Path
from typing import Any

from kg.frameworks.protocol import TrainingFramework


@lru_cache(maxsize=1)
def all_frameworks() -> dict[str, TrainingFramework]:
    """Framework id -> instance, from every ``kg.frameworks.<package>.FRAMEWORKS``, sorted by id."""
    out: dict[str, TrainingFramework] = {}
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if not info.ispkg:
            continue
        mod = importlib.import_module(f"{__package__}.{info.name}")
        for fw in getattr(mod, "FRAMEWORKS", ()):
            if not isinstance(fw, TrainingFramework) or not fw.id:
                raise TypeError(f"kg.frameworks.{info.name}: FRAMEWORKS holds {fw!r}, not a TrainingFramework with an id")
            if fw.id in out:
                raise ValueError(f"framework id '{fw.id}' exported twice (kg.frameworks.{info.name})")
            out[fw.id] = fw
    return dict(sorted(out.items()))


def ids() -> tuple[str, ...]:
    return tuple(all_frameworks())


def get(framework_id: str | None) -> TrainingFramework:
    """The framework ``framework_id`` names; the generic one (id kept) when no package implements it."""
    fw = all_frameworks().get(str(framework_id or ""))
    if fw is not None:
        return fw
    generic = TrainingFramework()
    generic.id = str(framework_id or "")
    return generic


def resolve(name: Any) -> str | None:
    """Canonical framework id for ``name`` (case-insensitive, id or alias), or None."""
    key = str(name).strip().lower()
    for fid, fw in all_frameworks().items():
        if key == fid or key in fw.aliases:
            return fid
    return None


def command_framework(cmd: Any, args: str, script: str) -> TrainingFramework:
    """The framework whose reader takes the split command ``cmd``: the highest ``claims_command``
    (ties: the first id in sorted order)."""
    best, score = None, 0
    for fw in all_frameworks().values():
        s = fw.claims_command(cmd, args, script)
        if s > score:
            best, score = fw, s
    if best is None:  # every package declines: a bug of the registry's packages, not of the user's input
        raise LookupError("no training framework reads this command (the HF Trainer reader should)")
    return best


def file_framework(path: Path, data: Any) -> TrainingFramework | None:
    """The framework whose config ``path`` is (``data``: parsed YAML/JSON, or None), or None."""
    for fw in all_frameworks().values():
        if fw.claims_file(path, data):
            return fw
    return None
