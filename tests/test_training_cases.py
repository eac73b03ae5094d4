"""Real training failures (tests/fixtures/training_cases/cases.yaml): each fires its rule with the
report's numbers, read from the input format its users ran (Megatron argv, DeepSpeed JSON + launcher,
accelerate YAML + Trainer flags, torchtitan TOML, verl overrides, stack YAML)."""
from pathlib import Path

import pytest

from kg.analyses.training import run_fixture
from kg.core.yamlio import load_yaml
from kg.engine.rules import load_ruleset

HERE = Path(__file__).parent / "fixtures" / "training_cases"
CASES = load_yaml(HERE / "cases.yaml").data


@pytest.fixture(scope="module")
def training_rules():
    return load_ruleset("training")


def test_at_least_26_cases_each_with_a_public_source():
    assert len(CASES) >= 26
    assert len({c["id"] for c in CASES}) == len(CASES)
    assert all(c["source"].startswith("https://github.com/") for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_case_fires_with_its_numbers(case, catalog, training_rules):
    firings = {f.rule.id: f for f in run_fixture(case["input"], catalog, training_rules, HERE)}
    exp = case["expect"]
    f = firings[exp["rule"]]
    assert f.fired, f"{case['id']}: {exp['rule']} did not fire: {f.reason}"
    assert f.severity == exp["severity"]
    for k, v in (exp.get("numbers") or {}).items():
        assert f.numbers[k] == v, (k, f.numbers)
