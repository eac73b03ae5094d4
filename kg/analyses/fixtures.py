"""Running rule fixtures (kg.engine.fixtures loads them) through the analysis of each ruleset kind.

``RUNNERS`` maps a ruleset kind to its runner, ``fn(input, catalog, ruleset, base_dir) -> list[Firing]``:
a stack mapping for ``check``, a metrics snapshot for ``diagnose``, workload features for ``fit``, a
cell for ``gaps``, a training job for ``training``. ``run_case`` runs one case and compares the rule's firing, severity and numbers.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from kg.core.errors import OptkgError
from kg.engine.fixtures import FixtureCase

RUNNERS: dict[str, str] = {
    "check": "kg.analyses.check:run_fixture",
    "diagnose": "kg.analyses.diagnose:run_fixture",
    "fit": "kg.analyses.fitfixtures:run_fixture",
    "gaps": "kg.analyses.gaps:run_fixture",
    "training": "kg.analyses.training:run_fixture",
}


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
