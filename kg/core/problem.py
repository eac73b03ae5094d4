"""One problem found while validating a catalog, rules or stack file (``from kg.core.errors import Problem`` works too)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One validation problem.

    file: path as given; line/column: 1-based (0 when unknown); path: field path such as
    ``couplings[2].target``; found: what was there; expected: what would be valid;
    hint: how to fix it; code: stable id of the check (e.g. ``schema-enum``, ``dangling-target``;
    ``kg.knowledge.checks.CHECKS`` describes each); severity: ``error`` (the catalog cannot be used) or
    ``warning`` (usable, but should be fixed).
    """

    file: str
    line: int
    column: int
    path: str
    message: str
    code: str
    found: Any = None
    expected: str = ""
    hint: str = ""
    valid_values: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    severity: str = "error"  # error: the catalog cannot be used; warning: it can, but should be fixed

    def location(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"

    def one_line(self) -> str:
        where = f" [{self.path}]" if self.path else ""
        return f"{self.location()}:{where} {self.message} ({self.code})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file, "line": self.line, "column": self.column, "path": self.path,
            "code": self.code, "message": self.message, "found": self.found, "expected": self.expected,
            "hint": self.hint, "severity": self.severity, "valid_values": [{"value": v, "description": d} for v, d in self.valid_values],
        }
