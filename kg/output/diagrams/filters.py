"""``Filters``: which techniques (and map rows, columns, panels) a diagram shows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from kg.core.errors import OptkgError


# ---------------------------------------------------------------------------------------------
# filters

def _split(values: Iterable[str] | None) -> tuple[str, ...]:
    out: list[str] = []
    for v in values or []:
        for t in str(v).split(","):
            t = t.strip()
            if t and t not in out:
                out.append(t)
    return tuple(out)


@dataclass(frozen=True)
class Filters:
    """Which techniques (and map rows/columns/panels) a diagram shows. Empty = all.

    A technique is kept when it is used in one of ``stages``, spans one of ``layers``, has its
    primary dimension in ``dimensions``, carries one of ``tags`` and has one of ``statuses``."""

    stages: tuple[str, ...] = ()
    layers: tuple[str, ...] = ()
    dimensions: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()

    @classmethod
    def from_lists(cls, stages=None, layers=None, dimensions=None, tags=None, statuses=None) -> "Filters":
        return cls(_split(stages), _split(layers), _split(dimensions), _split(tags), _split(statuses))

    def validate(self, catalog) -> "Filters":
        """Raise OptkgError naming the flag and the valid values for an unknown stage/layer/dimension/status/tag."""
        from difflib import get_close_matches

        from kg.knowledge.schema import STATUSES
        ax = catalog.axes
        for flag, vals, valid in (("--stage", self.stages, ax.stage_ids), ("--layer", self.layers, ax.layer_ids),
                                  ("--dimension", self.dimensions, ax.dimension_ids),
                                  ("--status", self.statuses, list(STATUSES))):
            for v in vals:
                if v not in valid:
                    raise OptkgError(f"{flag}: unknown value '{v}' (valid: {', '.join(valid)})")
        known = sorted({t for x in catalog.techniques.values() for t in x.get("tags") or []})
        for v in self.tags:
            if v not in known:
                near = get_close_matches(v, known, n=5)
                raise OptkgError(f"--tag: no technique has tag '{v}'"
                                 + (f" (did you mean {', '.join(near)}?)" if near else ""))
        return self

    def keep(self, catalog, tid: str) -> bool:
        t = catalog.techniques[tid]
        c = t["coordinates"]
        if self.stages and not set(c["stages"]) & set(self.stages):
            return False
        if self.layers and not set(catalog.axes.layer_span(c["layers"])) & set(self.layers):
            return False
        if self.dimensions and c["dimension"] not in self.dimensions:
            return False
        if self.tags and not set(t.get("tags") or []) & set(self.tags):
            return False
        if self.statuses and t.get("status") not in self.statuses:
            return False
        return True

    def to_dict(self) -> dict[str, list[str]]:
        return {"stages": list(self.stages), "layers": list(self.layers), "dimensions": list(self.dimensions),
                "tags": list(self.tags), "statuses": list(self.statuses)}

    def is_empty(self) -> bool:
        return not any((self.stages, self.layers, self.dimensions, self.tags, self.statuses))
