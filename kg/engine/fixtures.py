"""Rule fixtures: every rule ships inputs on which it must fire and inputs on which it must not.

A fixture file ``rules/fixtures/<rule-id>.yaml``::

    rule: kv-head-replication
    fire:                      # each case must make the rule fire ...
      - name: Qwen3-235B at TP 8
        input: {model: Qwen/Qwen3-235B-A22B, techniques: [{tensor-parallelism: {tp_size: 8}}]}
        expect:                # ... with exactly these values (optional)
          severity: warning
          numbers: {replication_factor: 2}
    pass:                      # each case must NOT make the rule fire
      - name: TP 4
        input: {...}

``input`` is interpreted by the runner of the rule's ruleset kind (kg.analyses.fixtures.RUNNERS, one
level up because the runners are the analyses): a stack mapping for ``check``, a metrics snapshot for
``diagnose``, workload features for ``fit``, a cell for ``gaps``. This module loads the cases.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kg.core import paths
from kg.core.yamlio import load_yaml

@dataclass
class FixtureCase:
    """One fixture of a rule: its input, whether the rule must fire, and the values expected."""

    rule: str
    expect_fire: bool
    name: str
    input: Any
    expect: dict[str, Any]
    file: str


def fixtures_dir() -> Path:
    return paths.rules_dir() / "fixtures"


def load_fixture_cases(folder: Path | None = None) -> list[FixtureCase]:
    """Every case of every fixture file, in file order."""
    folder = folder or fixtures_dir()
    out = []
    for f in sorted(folder.glob("*.yaml")):
        d = load_yaml(f).data or {}
        rule = d.get("rule") or f.stem
        for fire, key in ((True, "fire"), (False, "pass")):
            for i, case in enumerate(d.get(key) or []):
                out.append(FixtureCase(rule, fire, case.get("name", f"{key}[{i}]"), case.get("input"),
                                       case.get("expect") or {}, str(f)))
    return out
