"""The rows of ``optkg reconcile``: per quantity what the engine logged, what optkg reproduces from the logged
numbers and optkg's own estimate (kg.analyses.reconcile; each engine's ``reconcile_log`` fills them)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Row:
    """One quantity: ``logged`` / ``reproduced`` / ``estimated`` in ``unit`` (bytes, tokens, blocks, x)."""

    quantity: str
    unit: str
    logged: float | None
    reproduced: float | None = None
    estimated: float | None = None
    explanation: str = ""

    def diff_pct(self, other: float | None) -> float | None:
        if self.logged in (None, 0) or other is None:
            return None
        return round(100.0 * (other - self.logged) / self.logged, 2)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["reproduced_diff_pct"] = self.diff_pct(self.reproduced)
        d["estimated_diff_pct"] = self.diff_pct(self.estimated)
        return d


@dataclass
class Reconciliation:
    """An engine's startup log beside optkg's memory estimate: one row per number the log states."""

    log: str
    engine: str
    generation: str
    model: str | None
    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    kv_bytes_logged: float | None = None      # KV pool per GPU the log implies (bytes)
    weights_estimated: float | None = None
    total_memory: float | None = None
    utilization: float | None = None

    def row(self, quantity: str) -> Row | None:
        return next((r for r in self.rows if r.quantity == quantity), None)

    def to_dict(self) -> dict[str, Any]:
        return {"log": self.log, "engine": self.engine, "generation": self.generation, "model": self.model,
                "rows": [r.to_dict() for r in self.rows], "notes": self.notes,
                "kv_bytes_logged": self.kv_bytes_logged, "weights_estimated": self.weights_estimated,
                "total_memory": self.total_memory, "utilization": self.utilization}
