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

``input`` is interpreted by the runner of the rule's ruleset kind (``RUNNERS``): a stack mapping
for ``check``, a metrics snapshot for ``diagnose``, workload features for ``fit``, a cell for
``gaps``. A runner is ``fn(input, catalog, ruleset, base_dir) -> list[Firing]``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kg.core import paths
from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml

RUNNERS: dict[str, str] = {
    "check": "kg.analyses.check:run_fixture",
    "diagnose": "kg.analyses.diagnose:run_fixture",
    "fit": "kg.analyses.fit:run_fixture",
    "gaps": "kg.analyses.gaps:run_fixture",
    "training": "kg.analyses.training:run_fixture",
}


@dataclass
class FixtureCase:
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


def runner(kind: str):
    if kind not in RUNNERS:
        raise OptkgError(f"no fixture runner for ruleset kind '{kind}'")
    mod, fn = RUNNERS[kind].split(":")
    return getattr(importlib.import_module(mod), fn)


def run_case(case: FixtureCase, catalog, ruleset) -> tuple[bool, Any]:
    """Run one case; return (ok, detail). ``detail`` is the rule's Firing (or an explanation)."""
    firings = runner(ruleset.kind)(case.input, catalog, ruleset, Path(case.file).parent)
    mine = [f for f in firings if f.rule.id == case.rule]
    if not mine:
        return False, f"rule {case.rule} not in ruleset {ruleset.kind}"
    f = mine[0]
    if f.fired != case.expect_fire:
        return False, f
    if case.expect_fire:
        if "severity" in case.expect and case.expect["severity"] != f.severity:
            return False, f
        for k, v in (case.expect.get("numbers") or {}).items():
            got = f.numbers.get(k)
            if isinstance(v, float) or isinstance(got, float):
                if got is None or abs(float(got) - float(v)) > 1e-9 * max(1.0, abs(float(v))):
                    return False, f
            elif got != v:
                return False, f
    return True, f
