"""The accuracy harness's fixed inputs: the held-out split is the documented rule and unchanged, the
calibration says it was fitted on the train split, and docs/speed-accuracy.md was generated from the current
inputs (its header holds their digest; `make accuracy` regenerates it)."""
from __future__ import annotations

import csv
import hashlib
import math
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools" / "accuracy"))


def test_the_split_is_sha256_of_the_configuration_group_and_never_refitted():
    with (REPO / "tools" / "accuracy" / "split.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        want = "heldout" if int(hashlib.sha256(r["group"].encode()).hexdigest()[:8], 16) % 10 < 3 else "train"
        assert r["split"] == want, r["group"]
    # 479 configuration groups of silicon_sample.csv (aiconfigurator-core 0.12.0): 1,440 of 5,221 rows held out
    assert len(rows) == 479
    assert sum(int(r["rows"]) for r in rows) == 5221
    assert sum(int(r["rows"]) for r in rows if r["split"] == "heldout") == 1440


def test_every_measured_row_has_a_split(tmp_path):
    import run
    split = run.load_split()
    with (run.package_dir() / "systems" / "silicon_sample.csv").open(newline="") as f:
        assert all(run.group_of(r) in split for r in csv.DictReader(f))


def test_the_calibration_was_fitted_on_the_train_split_only():
    doc = yaml.safe_load((REPO / "kg" / "speed" / "calibration.yaml").read_text())
    assert doc["fitted_on"]["split"] == "train"
    for cell, v in doc["cells"].items():
        # [a, b, c], [a, b, c, t0] (t0 >= 0 ms added after the factor) or [a, b, c, t0, d] (d: the log2(osl)
        # term), or null where no form lowered the left-out error (factor 1)
        assert all(v[m] is None or len(v[m]) == 3 or (len(v[m]) in (4, 5) and v[m][3] >= 0) for m in ("ttft", "tpot"))
        assert v["train_rows"] >= 30, cell
        assert 1 <= v["concurrency"][0] <= v["concurrency"][1] and 1 <= v["isl"][0] <= v["isl"][1], cell
        # its coverage: the models it saw and whether it carried over to a left-out model (and GPU, engine-wide)
        assert v["models"] and set(v["transfers"]) == {"ttft", "tpot"}, cell
        assert cell.endswith("/*") == ("transfers_gpu" in v), cell
        # a cell with one configuration group takes the engine-wide factor for that metric (where it lowers the
        # cell's own train error), never its own
        for m, use in (v.get("fallback") or {}).items():
            assert not (use and v[m]) and cell.split("/")[0] + "/*" in doc["cells"], cell


def test_a_cell_factor_reaches_other_models_only_where_leaving_one_out_on_train_lowered_the_error():
    import run
    # rows: (concurrency, isl, measured / estimated, model signature, GPU, group, estimated ms); 40 rows per model
    rows = lambda model, q: [(c, 1024, q, model, "h200_sxm", model, 100.0) for c in (4, 8, 16, 32) * 10]  # noqa: E731
    # every model runs 1.5x slower than estimated: fitted on the others, the factor fixes the left-out one
    assert run._transfers(rows("a", 1.5) + rows("b", 1.5) + rows("c", 1.5), 3) is True
    # one model 1.5x slower, another 1.5x faster: fitted on one, the factor doubles the other's error
    assert run._transfers(rows("a", 1.5) + rows("b", 1 / 1.5), 3) is False
    # a single model cannot show it either way (nothing is left to fit on): no evidence, not a failure
    assert run._transfers(rows("a", 1.5), 3) is None


def test_a_fixed_time_is_added_to_the_factor_only_where_leaving_a_group_out_on_train_says_so():
    import run
    # rows: (concurrency, isl, measured / estimated, model, GPU, group, estimated ms); one group per estimate size
    def rows(measured):
        return [(c, 1024, measured(est) / est, "m", "h100_sxm", f"g{est}", float(est))
                for est in (40, 80, 160, 320) for c in (4, 8, 16, 32) * 4]
    # measured = 150 ms + the estimate: no factor alone fits a 40 ms and a 320 ms estimate at once; the fixed time
    # does, and it carries over to a left-out group
    assert run._form(rows(lambda e: 150.0 + e))[:2] == (True, True)
    coef = run._lsq(rows(lambda e: 150.0 + e), overhead=True)
    assert len(coef) == 4 and 100 < coef[3] <= 150
    # measured = 1.5 x the estimate: a factor alone, no fixed time
    assert run._form(rows(lambda e: 1.5 * e))[:2] == (True, False)
    from kg.speed.serving import Workload, calibration_factor
    assert calibration_factor(run._lsq(rows(lambda e: 1.5 * e)), Workload(1024, 1, 8)) == pytest.approx(1.5, rel=0.01)


def test_the_accuracy_doc_is_generated_from_the_current_inputs():
    import run
    assert run.main(["--check"]) == 0, "docs/speed-accuracy.md is stale: run `make accuracy`"


def test_every_public_serving_row_cites_a_listed_source_and_was_scored_into_the_doc():
    import public_serving
    sources, rows = public_serving.load()
    assert len(rows) == 320 and len({r["id"] for r in rows}) == 320
    for r in rows:
        assert r["source"] in sources and r["table"] and r["measured"]["output_tokens_per_s"] > 0, r["id"]
    for s in sources.values():
        assert s["url"].startswith("https://github.com/") and s["commit"] in s["url"]
    assert public_serving.main(["--check"]) == 0, "docs/speed-accuracy-public.md is stale: run `make accuracy`"


def test_check_states_the_held_out_accuracy_the_doc_measured():
    # kg/speed/accuracy.yaml is the held-out table of docs/speed-accuracy.md, cell by cell; check's Speed section
    # prints it beside every estimate of that engine x GPU (an estimator error of 95 % must not read as a fact)
    import run
    from kg.speed.serving import accuracy_note
    got = yaml.safe_load((REPO / "kg" / "speed" / "accuracy.yaml").read_text())["cells"]
    assert got == run.held_out_cells((REPO / "docs" / "speed-accuracy.md").read_text()), "run `make accuracy`"
    v = got["vllm/h200_sxm"]
    assert accuracy_note("vllm", "h200_sxm") == (
        f"measured accuracy for vllm on h200_sxm: mean error TTFT {v['ttft_mape']:.1f} %, TPOT {v['tpot_mape']:.1f} % "
        f"over {v['rows']:,} held-out rows (docs/speed-accuracy.md)")
    assert accuracy_note("vllm", "l40s") == ("accuracy not measured: no held-out measured rows for vllm on l40s "
                                             "(docs/speed-accuracy.md)")


def test_an_osl_term_is_kept_only_where_leaving_a_group_out_on_train_says_so():
    import run
    # rows: (concurrency, isl, measured / estimated, model, GPU, group, estimated ms, osl); one group per OSL
    def rows(q):
        return [(c, 1024, q(osl), "m", "h200_sxm", f"g{osl}", 50.0, osl)
                for osl in (128, 512, 2048, 8192) for c in (4, 8, 16, 32) * 4]
    # measured / estimated = (osl / 1024) ** 0.25: no factor of concurrency and ISL fits a left-out OSL, the OSL
    # term does (the fourth element of _form), and the fitted d is 0.25 / log2 e's share: exp(d log2 osl) = osl**0.25
    kept, overhead, evidence, osl = run._form(rows(lambda o: (o / 1024) ** 0.25))
    assert (kept, osl) == (True, True) and evidence["factor_osl"] < evidence["factor"]
    coef = run._lsq(rows(lambda o: (o / 1024) ** 0.25), overhead, osl)
    assert len(coef) == 5 and coef[4] == pytest.approx(0.25 * math.log(2), abs=0.01)
    # a ratio that does not depend on the OSL (here: on the concurrency) keeps the plain factor
    flat = [(c, i, 1.5 * (c / 8) ** 0.2, *rest) for c, i, _, *rest in rows(lambda o: 1.0)]
    assert run._form(flat)[1] is False and run._form(flat)[3] is False


def test_a_leave_one_out_fit_needs_20_train_rows_not_30():
    import run
    # two configuration groups of 24 rows each (sglang/h100 train: Qwen3-32B TP 2 and TP 4, 24 and 27 rows): each is
    # fitted on the other's 24 rows; at the former bound of 30 neither could be left out (no evidence either way)
    rows = [(c, 1024, 2.0, "m", "h100_sxm", g, 50.0, 512) for g in ("tp2", "tp4") for c in (4, 8, 16, 32, 64, 128) * 4]
    assert run.MIN_FIT_ROWS == 20 and run._form(rows)[0] is True


def test_a_leave_one_out_fit_needs_4_rows_per_coefficient_of_its_form():
    import run
    assert [run.min_fit_rows(t0, osl) for t0, osl in ((False, False), (True, False), (False, True), (True, True))] == \
        [12, 16, 16, 20]
    # a model measured in two groups of 15 rows (vLLM Llama-3.1-70B on H100 train: TP 2 and TP 4): the factor alone
    # (3 coefficients) is fitted on the other group's 15 rows; the largest form (5) is not, so it has no evidence
    rows = [(c, 1024, 2.0, "a", "h100_sxm", g, 100.0, 1024, "a") for g in ("tp2", "tp4") for c in (4, 8, 16, 32, 64) * 3]
    assert run._left_out_error(rows, 5) is not None and run._left_out_error(rows, 5, True, True) is None
    other = [(c, 1024, 1.0, "b", "h100_sxm", f"b{g}", 100.0, 1024, "b") for g in (1, 2) for c in (4, 8, 16, 32) * 5]
    cell = {"ttft": rows + other, "tpot": other}
    own = run._per_model(cell, {m: run._form(cell[m]) for m in cell}, {"a": "model-a", "b": "model-b"})
    assert set(own) == {"a"} and len(own["a"]["ttft"]) == 3


def test_a_cell_that_refused_its_own_factor_gives_the_engine_wide_one_to_the_models_it_carries_to():
    import run
    # the engine's other GPU measures 2x the estimate; in the cell, model a does as well (one group), model b measures
    # 0.5x in one group and 2x in the other, so no factor of the cell lowers the error of a left-out group
    engine = [(c, 1024, 2.0, "a", "b200_sxm", f"e{g}", 100.0, 1024, "a") for g in (1, 2, 3, 4)
              for c in (4, 8, 16, 32) * 4]
    cell = {"ttft": [(c, 1024, 2.0, "a", "h200_sxm", "ga", 100.0, 1024, "a") for c in (4, 8, 16, 32) * 4]
            + [(c, 1024, q, "b", "h200_sxm", f"gb{q}", 100.0, 1024, "b") for q in (0.5, 2.0) for c in (4, 8, 16, 32) * 4]}
    cell["tpot"] = cell["ttft"]
    form = {m: run._form(cell[m]) for m in cell}
    assert form["ttft"][0] is False
    eng_rows = {m: engine + cell["ttft"] for m in cell}
    got = run._engine_for(cell, eng_rows, form, {m: run._form(eng_rows[m]) for m in cell}, {"a": "A", "b": "B"})
    # a: the engine-wide factor fitted without its group (mostly 2x rows) predicts it better than 1; b: the one fitted
    # without its 0.5x group predicts that group 4x too high (uncalibrated errors 100 % and 50 %)
    assert set(got["ttft"]) == {"a"} and got["ttft"]["a"]["left_out_mape"]["uncalibrated"] == 50.0
    assert got["ttft"]["a"]["left_out_mape"]["engine"] == 0.0  # every other row of a measures 2x as well


def test_a_launch_scripts_exported_variables_precede_the_engine_command():
    import measured
    import run
    # InferenceX gpt-oss on B200, vLLM 0.15.1 (single_node/gptoss_fp4_b200.sh @ d2c2acb19:43 exports
    # VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1): the command optkg reads carries it, so the stack is timed as vLLM ran
    row = {"id": "x", "silicon_data_source": "db-dump/2026-04-27; silicon_concurrency=4; measured=2026-02-25T00:00:00Z",
           "backend": "vllm", "backend_version": "0.15.1", "model_path": "openai/gpt-oss-120b", "system": "b200_sxm",
           "precision": "fp4", "mode": "agg", "isl": "1024", "osl": "1024", "batch_size": "4", "tp_size": "2",
           "pp_size": "1", "attention_dp_size": "", "moe_tp_size": "2", "moe_ep_size": "1"}
    r = measured.run_of(row, is_moe=True)
    assert r.env == {"VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8": "1"}
    assert run.command("/m", r).startswith("VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 vllm serve /m -tp 2 ")


def test_the_accuracy_digest_covers_the_kv_budget_and_model_facts_the_numbers_are_made_of():
    # main's commits that moved the serving numbers while `--check` stayed green (acc5, bc1a704 / c7e380e): H200 / B200
    # visible memory (8f721c3), MTP draft weights (f83878c), vLLM LoRA slots (cb5e847), DSA FP8 KV (1d790a0). Every
    # file of theirs that computes a fact the Speed section reads is a digest input now
    import run
    inputs = {str(f.relative_to(run.REPO)) for f in run.serving_inputs()}
    moved = {"catalog/hardware/H200.yaml", "catalog/hardware/B200.yaml", "kg/derive/drafts.py", "kg/analyses/stackfacts.py",
             "kg/derive/budget.py", "kg/derive/lora.py", "kg/engines/base.py", "kg/engines/vllm/__init__.py",
             "kg/engines/vllm/budget.py", "catalog/support/vllm-attention-backends.yaml", "kg/engines/dsa_kv.py",
             "kg/engines/sglang/__init__.py", "kg/engines/vllm/kv_dtype.py", "kg/inputs/modelcfg.py",
             "kg/engines/trtllm/kv.py"}  # TensorRT-LLM's own pool (kvsem10), which caps its running requests
    assert moved <= inputs, moved - inputs
    # and not the training-memory model or a GPU the estimator does not time
    assert "kg/derive/training_memory.py" not in inputs and "catalog/hardware/T4.yaml" not in inputs


def test_a_model_gets_its_own_factor_only_where_its_own_rows_left_out_by_group_beat_the_cells():
    import run
    # rows: (concurrency, isl, measured / estimated, model, GPU, group, estimated ms, osl, per-model key); the estimator
    # times model
    # "a" at half its measured time and "b" right, two configuration groups of 20 rows each (a left-out fit needs 20)
    def rows(model, q):
        return [(c, 1024, q, model, "h100_sxm", f"{model}{g}", 100.0, 1024, model) for g in (1, 2)
                for c in (4, 8, 16, 32) * 5]
    cell = {"ttft": rows("a", 2.0) + rows("b", 1.0), "tpot": rows("a", 1.0) + rows("b", 1.0)}
    form = {m: run._form(cell[m]) for m in ("ttft", "tpot")}
    own = run._per_model(cell, form, {"a": "model-a", "b": "model-b"})
    # a's TTFT: its own factor (x 2, left out by group: 0 %) beats the cell's pooled one (about x 1.4)
    assert set(own) == {"a"} and own["a"]["model"] == "model-a" and "tpot" not in own["a"]
    from kg.speed.serving import Workload, calibration_factor
    assert calibration_factor(own["a"]["ttft"], Workload(1024, 1024, 8)) == pytest.approx(2.0, rel=0.01)
    assert own["a"]["left_out_mape"]["ttft"]["own"] < 1.0 < own["a"]["left_out_mape"]["ttft"]["cell"]
    assert own["a"]["train_rows"] == 8 and own["a"]["concurrency"] == [4, 32]
    # one group only: no evidence that its own factor carries over to another configuration
    one = {"ttft": [r for r in cell["ttft"] if r[5] != "a2"], "tpot": cell["tpot"]}
    assert run._per_model(one, {m: run._form(one[m]) for m in one}, {"a": "model-a", "b": "model-b"}) == {}
