"""`optkg gaps` on the hand-made tiny catalog: exactly the empty cells worked out by hand.

tests/fixtures/catalogs/tiny: stages train, serve; layers L1-L3; dimensions compute, storage,
network (18 cells). Occupied (8): alpha-split (train+serve, L2, compute); beta-cache (serve, L3,
storage); gamma-link (train, L1..L2, network); delta-kernel (train+serve, L2, storage);
epsilon-queue (serve, L3, compute). Empty (10). Annotated (4): serve x L1 x * out-of-scope (3),
train x L3 x storage impossible (1). Directions (6), with the shipped thresholds of rules/gaps.yaml:

- serve x L2 x network: row = {alpha, delta} = 2 (< crowded_layer_min 3); other stages at L2
  network = {gamma} = 1 -> gap-other-stages low (2 points); cost_landings(serve, network) =
  {alpha, epsilon} = 2 (< 4). Score 2, neighbours 2 + 0 + 1 = 3.
- train x L3 x compute: row 0; adjacent (train, L2, compute) = {alpha} = 1 (< 2); other stages
  at L3 compute = {epsilon} = 1 -> low. Score 2, neighbours 0 + 1 + 1 = 2.
- train x L1 x compute: row {gamma} 1, adjacent {alpha} 1, other 0 -> score 0, neighbours 2.
- train x L1 x storage: row {gamma} 1, adjacent {delta} 1, other 0; costs in storage for train =
  {alpha, gamma} 2 (< 4); crossings {gamma -> beta: network -> storage} 1 (< 2) -> score 0, n 2.
- serve x L3 x network: row {beta, epsilon} 2, adjacent 0, other 0; crossings {epsilon ->
  alpha: compute -> network} 1 (< 2) -> score 0, neighbours 2.
- train x L3 x network: row 0, adjacent {gamma} 1, other 0 -> score 0, neighbours 1.
Ranking: score, then neighbours, then axis order (train before serve; L1 before L3; compute,
storage, network).
"""
from __future__ import annotations

import json
import shutil

from export_helpers import TINY

EXPECTED_ORDER = [("serve", "L2", "network"), ("train", "L3", "compute"), ("train", "L1", "compute"),
                  ("train", "L1", "storage"), ("serve", "L3", "network"), ("train", "L3", "network")]
EXPECTED_ANNOTATED = {("serve", "L1", "compute"): "out-of-scope", ("serve", "L1", "storage"): "out-of-scope",
                      ("serve", "L1", "network"): "out-of-scope", ("train", "L3", "storage"): "impossible"}


def _json(cli, *args):
    code, out, err = cli("gaps", "--catalog", str(TINY), "--format", "json", *args)
    assert code == 0, err
    return json.loads(out)


def test_exact_cells_and_ranking(cli):
    d = _json(cli)
    assert d["kind"] == "gaps" and d["schema_version"] == "1.0"
    assert d["summary"] == {"techniques": 5, "cells": 18, "occupied": 8, "empty": 10, "directions": 6,
                            "annotated": 4, "conflicts": 0, "listed": 6}
    assert [(x["stage"], x["layer"], x["dimension"]) for x in d["directions"]] == EXPECTED_ORDER
    assert [x["rank"] for x in d["directions"]] == [1, 2, 3, 4, 5, 6]
    assert [x["score"] for x in d["directions"]] == [2, 2, 0, 0, 0, 0]
    assert [x["neighbours"] for x in d["directions"]] == [3, 2, 2, 2, 2, 1]
    # impossible / out-of-scope cells are reported apart, never as directions
    assert {(a["stage"], a["layer"], a["dimension"]): a["status"] for a in d["annotated"]} == EXPECTED_ANNOTATED
    assert d["conflicts"] == []


def test_reasons_come_from_the_rules(cli):
    d = _json(cli)
    first = d["directions"][0]
    assert [r["rule"] for r in first["reasons"]] == ["gap-other-stages"]
    r = first["reasons"][0]
    assert r["severity"] == "low" and r["numbers"] == {"other_stage_count": 1}
    assert r["message"] == ("1 technique(s) work on network at L2 in train (e.g. Gamma link); "
                            "a counterpart in serve may transfer")
    f = d["directions"][3]["features"]  # train x L1 x storage
    assert (f["row_count"], f["adjacent_count"], f["cost_landings"], f["relief"], f["crossings_in"]) == (1, 1, 2, 1, 1)
    assert f["cost_relief_ratio"] == 2.0  # 2 costs / max(1 relief, 1)
    assert d["rules"] == ["gap-crowded-layer", "gap-adjacent-layers", "gap-other-stages", "gap-cost-sink",
                          "gap-crossing-target"]


def test_threshold_override_adds_a_reason(cli):
    # crowded_layer_min=2: rows of 2 now fire gap-crowded-layer (band low: 2 < moderate 5):
    # serve x L2 x network 2 + 2 = 4; serve x L3 x network 0 + 2 = 2 ties train x L3 x compute (2) on
    # score and neighbours (2), and train comes first on the stage axis.
    d = _json(cli, "--threshold", "crowded_layer_min=2")
    assert [(x["stage"], x["layer"], x["dimension"], x["score"]) for x in d["directions"][:3]] == [
        ("serve", "L2", "network", 4), ("train", "L3", "compute", 2), ("serve", "L3", "network", 2)]
    assert d["thresholds"]["crowded_layer_min"] == 2.0


def test_filters_and_top(cli):
    d = _json(cli, "--stage", "train", "--top", "2")
    assert [(x["stage"], x["layer"], x["dimension"]) for x in d["directions"]] == [
        ("train", "L3", "compute"), ("train", "L1", "compute")]
    assert d["summary"]["cells"] == 9 and d["summary"]["directions"] == 4 and d["summary"]["listed"] == 2
    assert d["summary"]["annotated"] == 1  # train x L3 x storage
    d = _json(cli, "--layer", "L1", "--dimension", "compute,storage")
    assert [(x["stage"], x["layer"], x["dimension"]) for x in d["directions"]] == [
        ("train", "L1", "compute"), ("train", "L1", "storage")]


def test_text_and_markdown(cli):
    code, out, _ = cli("gaps", "--catalog", str(TINY))
    assert code == 0
    assert out.splitlines()[0] == "optkg gaps: 10 empty cell(s) of 18 (8 occupied; 4 annotated as not a direction)"
    assert "#1   serve × L2 × network  (Kernels)   score 2" in out
    assert "  impossible (axes.yaml:20): train × L3 × storage\n      In this fixture" in out
    assert "out-of-scope (axes.yaml:15): serve × L1 × compute; serve × L1 × storage; serve × L1 × network" in out
    code, out, _ = cli("gaps", "--catalog", str(TINY), "--format", "markdown")
    assert "| 1 | serve | L2 | network | 2 | **low** 1 technique(s) work on network" in out
    assert "| train × L3 × storage | impossible | In this fixture" in out


def test_output_file_is_not_overwritten(cli, tmp_path):
    out = tmp_path / "gaps.json"
    assert cli("gaps", "--catalog", str(TINY), "--format", "json", "-o", str(out))[0] == 0
    first = out.read_bytes()
    code, _, err = cli("gaps", "--catalog", str(TINY), "-o", str(out))
    assert code == 2 and "refusing to overwrite" in err and out.read_bytes() == first
    assert cli("gaps", "--catalog", str(TINY), "-o", str(out), "--force")[0] == 0


def test_bad_input_is_one_line_and_exit_2(cli, tmp_path):
    code, _, err = cli("gaps", "--catalog", str(TINY), "--threshold", "nope=1")
    assert code == 2 and "unknown threshold 'nope'" in err and "crowded_layer_min" in err
    code, _, err = cli("gaps", "--catalog", str(TINY), "--threshold", "crowded_layer_min")
    assert code == 2 and "expected NAME=NUMBER" in err
    code, _, err = cli("gaps", "--catalog", str(TINY), "--stage", "inference")
    assert code == 2 and "--stage: unknown value 'inference' (valid: train, serve)" in err
    # a broken annotation names axes.yaml and its line
    cat = tmp_path / "cat"
    shutil.copytree(TINY, cat)
    axes = (cat / "axes.yaml").read_text().replace("stage: train\n    layer: L3", "stage: trian\n    layer: L3")
    (cat / "axes.yaml").write_text(axes)
    code, _, err = cli("gaps", "--catalog", str(cat))
    assert code == 2 and "axes.yaml:20: cell_annotations stage: unknown stage 'trian'" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    axes = axes.replace("stage: trian", "stage: train").replace("status: impossible", "status: unlikely")
    (cat / "axes.yaml").write_text(axes)
    code, _, err = cli("gaps", "--catalog", str(cat))
    assert code == 2 and "cell_annotations[1].status: 'unlikely' is not one of impossible, out-of-scope" in err


def test_annotation_on_an_occupied_cell_is_a_conflict(cli, tmp_path):
    cat = tmp_path / "cat"
    shutil.copytree(TINY, cat)
    axes = (cat / "axes.yaml").read_text().replace(
        "  - stage: train\n    layer: L3\n    dimension: storage",
        "  - stage: train\n    layer: [L2, L3]\n    dimension: storage")
    (cat / "axes.yaml").write_text(axes)
    d = json.loads(cli("gaps", "--catalog", str(cat), "--format", "json")[1])
    # train x L2 x storage holds delta-kernel: reported as a contradiction, not as annotated
    assert d["conflicts"] == [{"stage": "train", "layer": "L2", "dimension": "storage", "status": "impossible",
                               "reason": "In this fixture the training engine keeps no state of its own, so no "
                                         "technique can sit here.", "source": "axes.yaml:20",
                               "occupied_by": ["delta-kernel"]}]
    assert d["summary"]["annotated"] == 4


def test_fixture_runner_with_a_fixture_catalog():
    # the rules/fixtures runner also takes a whole catalog folder (relative to the fixture file)
    from export_helpers import CATALOGS
    from kg.knowledge.catalog import load_catalog
    from kg.analyses.gaps import run_fixture
    from kg.engine.rules import load_ruleset
    rs = load_ruleset("gaps")
    cat = load_catalog(TINY, use_cache=False)[0]
    firings = run_fixture({"cell": {"stage": "serve", "layer": "L2", "dimension": "network"}, "catalog": "tiny"},
                          cat, rs, CATALOGS)
    fired = {f.rule.id: f for f in firings if f.fired}
    assert list(fired) == ["gap-other-stages"] and fired["gap-other-stages"].numbers == {"other_stage_count": 1}
    import pytest
    from kg.core.errors import OptkgError
    with pytest.raises(OptkgError, match="occupied by alpha-split"):
        run_fixture({"cell": {"stage": "serve", "layer": "L2", "dimension": "compute"}, "catalog": "tiny"},
                    cat, rs, CATALOGS)
