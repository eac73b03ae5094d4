"""Errors a user can cause, and problems found in catalog files.

``OptkgError`` is raised for bad input (a file, a flag, a value); the CLI prints its one-line
message and exits 2. ``Problem`` is one issue found while validating a file; validation collects
all problems in one pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class OptkgError(Exception):
    """Bad input from the user. ``str(e)`` is a one-line message naming the file/flag and what was expected."""


@dataclass(frozen=True)
class Problem:
    """One validation problem.

    file: path as given; line/column: 1-based (0 when unknown); path: field path such as
    ``couplings[2].target``; found: what was there; expected: what would be valid;
    hint: how to fix it; code: stable id of the check (e.g. ``schema-enum``, ``dangling-target``;
    ``kg.catalog.CHECKS`` describes each); severity: ``error`` (the catalog cannot be used) or
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
