"""A calibration factor names the rows it was fitted on (engine releases, models) and reaches an engine release its
train rows do not hold only where leave-one-release-out on the train split lowered the error (newuser6 #3:
sglang/h100_sxm's TTFT x 7.87, fitted on SGLang 0.5.1.post1 rows of Qwen3-32B alone, was applied to the default
0.5.23 without saying so)."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from conftest import run_cli
from kg.speed.serving import calibrated, fitted_on

REPO = Path(__file__).resolve().parents[1]
CELL = {"ttft": [2.0, 0.0, 0.0], "tpot": [0.5, 0.0, 0.0], "models": {"aaa": "Qwen/Qwen3-32B"},
        "transfers": {"ttft": None, "tpot": None}, "releases": {"0.5.1.post1": 50},
        "transfers_release": {"ttft": None, "tpot": None}}


def test_a_release_the_fit_saw_is_calibrated_another_only_with_leave_one_release_out_evidence():
    assert calibrated(CELL, "ttft", "aaa", "h100_sxm", "0.5.1.post1", "sglang/h100_sxm") == ([2.0, 0.0, 0.0], None)
    coef, why = calibrated(CELL, "ttft", "aaa", "h100_sxm", "0.5.23", "sglang/h100_sxm")
    assert coef is None
    assert why == ("TTFT not calibrated: sglang/h100_sxm's factor was fitted on rows of Qwen/Qwen3-32B at release "
                   "0.5.1.post1, not on 0.5.23; its train rows hold one release, so nothing shows it carries to another")
    said_no = {**CELL, "transfers_release": {"ttft": False, "tpot": True}}
    coef, why = calibrated(said_no, "ttft", "aaa", "h100_sxm", "0.5.23", "sglang/h100_sxm")
    assert coef is None and why.endswith("on the train split it did not lower the error of a release it was not "
                                         "fitted on (leave-one-release-out)")
    assert calibrated(said_no, "tpot", "aaa", "h100_sxm", "0.5.23") == ([0.5, 0.0, 0.0], None)  # it carried over
    # a cell written before releases were recorded keeps applying as it did
    old = {k: v for k, v in CELL.items() if k not in ("releases", "transfers_release")}
    assert calibrated(old, "ttft", "aaa", "h100_sxm", "0.5.23") == ([2.0, 0.0, 0.0], None)


def test_fitted_on_names_releases_and_models_and_shortens_long_lists():
    assert fitted_on(CELL) == "Qwen/Qwen3-32B at release 0.5.1.post1"
    many = {"releases": {"0.12.0": 42, "0.16.0": 75, "0.18.0": 47, "0.9.2": 3, "nightly-x": 5, "unrecorded": 54},
            "models": {"a": "A", "b": "B", "c": "C"}}
    assert fitted_on(many) == "3 models at releases 0.9.2 ... nightly-x (5 releases) (+54 rows of no recorded release)"


def test_the_shipped_sglang_h100_cell_holds_one_release_and_no_release_evidence():
    cells = yaml.safe_load((REPO / "kg" / "speed" / "calibration.yaml").read_text())["cells"]
    c = cells["sglang/h100_sxm"]
    assert c["releases"] == {"0.5.1.post1": 50} and c["transfers_release"] == {"ttft": None, "tpot": None}
    assert all(set(v["transfers_release"]) == {"ttft", "tpot"} and sum(v["releases"].values()) >= v["train_rows"]
               for v in cells.values())


def _speed(*extra):
    code, out, err = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 2",
                             "--gpu", "H100", "--count", "2", "--format", "json", *extra)
    assert code == 0, err
    return json.loads(out)["speed"]


def test_sglang_h100_factor_applies_at_its_release_and_not_at_the_default():
    at_fit = _speed("--engine-version", "0.5.1.post1")
    assert at_fit["ttft_ms"] != at_fit["uncalibrated"]["ttft_ms"]
    assert any("fitted on rows of Qwen/Qwen3-32B at release 0.5.1.post1" in n for n in at_fit["notes"])
    default = _speed()  # SGLang 0.5.23, the latest release optkg knows
    assert default["ttft_ms"] == default["uncalibrated"]["ttft_ms"]
    assert default["itl_ms"] == default["uncalibrated"]["itl_ms"]
    assert any(n.startswith("TTFT not calibrated: sglang/h100_sxm's factor was fitted on rows of Qwen/Qwen3-32B at "
                            "release 0.5.1.post1, not on 0.5.23") for n in default["notes"])


def test_a_row_of_no_recorded_release_is_fitted_under_the_release_its_launch_was_checked_at():
    # InferenceX's vLLM Llama-3.1-70B rows name no release; their launch image is v0.10.2 (launches.yaml), the release
    # kg.speed.serving compares. Fitted as "unrecorded", the model's own vllm/h200 factor was refused on its own rows
    import sys
    sys.path.insert(0, str(REPO / "tools" / "accuracy"))
    import run
    from kg.speed.serving import Workload, _factors
    assert run._fit_release({"engine_release": "0.10.2", "backend_version": ""}) == "0.10.2"
    assert run._fit_release({"backend_version": "0.12.0"}) == "0.12.0"
    assert run._fit_release({"backend_version": ""}) == "unrecorded"
    cell = yaml.safe_load((REPO / "kg" / "speed" / "calibration.yaml").read_text())["cells"]["vllm/h200_sxm"]
    assert "0.10.2" in cell["releases"] and "unrecorded" not in cell["releases"]
    notes: list[str] = []
    (k_ttft, _), _ = _factors("vllm", "h200_sxm", "6469eeeab70d", Workload(922, 922, 16), notes, "fp8", False, "0.10.2")
    assert k_ttft != 1.0
    assert any(n.startswith("TTFT calibrated") and "vllm/h200_sxm, this model's own factor" in n for n in notes)


def test_a_held_prompt_is_fitted_without_its_held_steps():
    # kg.speed.serving adds a scheduler's held decode steps (SGLang --scheduler-recv-interval 30: 15 steps) after the
    # TTFT factor; where the hold is exact (SGLang's poll period) the fit takes them out of both sides: measured 500 - 15 x 20 = 200 ms against the estimate
    # 400 - 15 x 16 = 160 ms (the estimate's own TPOT), a factor of 1.25 as for an unheld row measured 200 for 160
    import sys
    sys.path.insert(0, str(REPO / "tools" / "accuracy"))
    import run
    held = {"backend": "sglang", "ttft_ms": 500.0, "tpot_ms": 20.0, "raw_ttft_ms": 400.0, "raw_tpot_ms": 16.0,
            "optkg_hold_steps": 15.0}
    assert run.fit_pair(held, "ttft") == (200.0, 160.0)
    assert run.fit_pair(held, "tpot") == (20.0, 16.0)
    assert run.fit_pair({**held, "optkg_hold_steps": 0.0}, "ttft") == (500.0, 400.0)
    # a modelled wait (TensorRT-LLM's attention-DP balance or batch waiting) leaves the row's TTFT out of the fit
    assert run.fit_pair({**held, "backend": "trtllm"}, "ttft") is None
    assert run.fit_pair({**held, "backend": "trtllm"}, "tpot") == (20.0, 16.0)
