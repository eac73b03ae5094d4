"""The three axes (stage x layer x dimension), read from ``catalog/axes.yaml``.

Source of the axes: shared/method/001 (the three-axis coordinate system). Nothing in kg/
hard-codes the lists; everything asks an ``Axes`` object.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml


@dataclass(frozen=True)
class Axes:
    """The catalog's coordinate axes (axes.yaml): stages, layers, dimensions and cell annotations."""

    stages: list[dict[str, Any]]
    layers: list[dict[str, Any]]
    dimensions: list[dict[str, Any]]
    cell_annotations: list[dict[str, Any]]

    @property
    def stage_ids(self) -> list[str]:
        return [s["id"] for s in self.stages]

    @property
    def layer_ids(self) -> list[str]:
        return [s["id"] for s in self.layers]

    @property
    def dimension_ids(self) -> list[str]:
        return [s["id"] for s in self.dimensions]

    def layer_span(self, layers: list[str]) -> list[str]:
        """Expand ``[L2, L3]``-style spans to every layer between (inclusive), in axis order."""
        ids = self.layer_ids
        if len(layers) == 1:
            return list(layers)
        a, b = sorted(ids.index(x) for x in layers)
        return ids[a : b + 1]

    def label(self, axis: str, item_id: str) -> str:
        for it in getattr(self, axis):
            if it["id"] == item_id:
                return it["name"]
        raise KeyError(item_id)


def load_axes(path: Path) -> Axes:
    """Load ``axes.yaml``. Raises OptkgError naming the file when a list is missing or malformed."""
    doc = load_yaml(path).data
    if not isinstance(doc, dict):
        raise OptkgError(f"{path}: expected a mapping with stages, layers and dimensions")
    out: dict[str, list[dict[str, Any]]] = {}
    for key in ("stages", "layers", "dimensions"):
        items = doc.get(key)
        if not isinstance(items, list) or not items:
            raise OptkgError(f"{path}: '{key}' must be a non-empty list")
        for i, it in enumerate(items):
            if not isinstance(it, dict) or not all(k in it for k in ("id", "name", "name_zh", "description")):
                raise OptkgError(f"{path}: {key}[{i}] needs id, name, name_zh and description")
        out[key] = items
    ann = doc.get("cell_annotations") or []
    return Axes(out["stages"], out["layers"], out["dimensions"], ann)
