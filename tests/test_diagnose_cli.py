"""optkg diagnose end to end: formats, exit codes, --verbose, --before/--after, errors (issue 6)."""
from __future__ import annotations

import json

from conftest import REPO, SHARED

M = SHARED / "data" / "metrics"
FX = REPO / "tests" / "fixtures" / "metrics"
H100_LOAD = M / "nvidia_smi_query-gpu_load__nvidia-h100-80gb-hbm3__590.48.01.csv"
VLLM = M / "vllm_metrics_datadog_fixture_opt125m.prom"


def test_text_report(cli):
    code, out, err = cli("diagnose", str(H100_LOAD))
    assert code == 0 and err == ""
    assert "VERDICT: COMPUTE SATURATION LIKELY   severity: low   confidence: low" in out
    assert "power draw 632 W is 90% of the 700 W limit" in out
    # the thresholds it used are printed, with where they came from
    assert "Thresholds used" in out and "compute_wall_util" in out and "recalibrate per machine" in out
    assert "Collection checklist" in out and "performance KPIs                 0/4" in out
    assert "(194 unknown metric names ignored; --verbose lists them)" in out


def test_verbose_lists_unknown_metric_names_and_provenance(cli):
    code, out, _ = cli("diagnose", str(VLLM), "--verbose")
    assert code == 0
    assert "Unknown metric names (ignored): 30" in out
    assert "python_gc_objects_collected_total" in out and "vllm:engine_sleep_state" in out
    assert "Threshold provenance" in out and "shared/method/001 §3" in out
    assert "Rules that did not fire" in out


def test_json_is_versioned_and_deterministic(cli):
    a = cli("diagnose", str(VLLM), "--format", "json")
    b = cli("diagnose", str(VLLM), "--format", "json")
    assert a == b and a[0] == 0
    d = json.loads(a[1])
    assert d["schema_version"] == "1.0" and d["kind"] == "diagnose"
    assert d["verdict"]["state"] == "not-loaded"
    assert d["readings"]["prefix_cache_hit_rate"] == 64 / 117
    assert d["thresholds"]["memory_wall_kv_usage"]["value"] == 0.9


def test_markdown(cli):
    code, out, _ = cli("diagnose", str(H100_LOAD), "--format", "markdown")
    assert code == 0
    assert out.startswith("<!-- optkg:diagnose -->\n## optkg diagnose")
    assert "**Verdict: compute saturation likely** (severity low, low confidence)" in out
    assert "| compute | YES (low, low confidence) |" in out
    assert "### Thresholds used" in out


def test_fail_on(cli):
    assert cli("diagnose", str(H100_LOAD))[0] == 0  # default --fail-on severe; the wall is low
    assert cli("diagnose", str(H100_LOAD), "--fail-on", "low")[0] == 1
    assert cli("diagnose", str(VLLM), "--fail-on", "low")[0] == 0  # not loaded: no wall
    # KV pool full, 12 waiting: severe memory wall
    assert cli("diagnose", str(FX / "vllm_kv_pressure.prom"))[0] == 1


def test_before_after_window_and_intermixed_inputs(cli):
    code, out, _ = cli("diagnose", "--before", str(FX / "vllm_kv_pressure_before.prom"),
                       "--after", str(FX / "vllm_kv_pressure.prom"), "--window", "60",
                       "--target-throughput", "1500", str(FX / "dcgm_sm_busy.prom"), "--format", "json",
                       "--fail-on", "never")
    assert code == 0
    d = json.loads(out)
    assert d["readings"]["throughput_tokens_per_s"] == 1000.0  # 60,000 tokens in 60 s
    assert [(i["role"]) for i in d["inputs"]] == ["before", "after", "after"]
    assert d["verdict"]["kind"] == "memory" and d["verdict"]["also"] == ["compute"]


def test_thresholds_file(cli, tmp_path):
    f = tmp_path / "my.yaml"
    f.write_text("bandwidth_wall_util: 0.1\n")
    code, out, _ = cli("diagnose", str(H100_LOAD), "--thresholds", str(f), "--format", "json")
    d = json.loads(out)
    assert d["walls"]["bandwidth"]["fired"] and d["thresholds"]["bandwidth_wall_util"]["source"] == f"override ({f}:1)"
    code, _, err = cli("diagnose", str(H100_LOAD), "--thresholds", str(f) + ".missing")
    assert code == 2 and err.startswith("optkg: error: ") and "file not found" in err


def test_stack_from_a_vllm_command(cli):
    code, out, _ = cli("diagnose", str(FX / "vllm_kv_pressure.prom"), "--vllm",
                       "vllm serve Qwen/Qwen3-235B-A22B -tp 8 --max-model-len 32768")
    assert code == 1
    assert "first: kv-head-replication" in out
    assert "- decode-context-parallelism:" in out and "do this first (kv-head-replication)" in out


def test_malformed_file_is_one_line_error(cli, tmp_path):
    bad = tmp_path / "bad.prom"
    bad.write_text("vllm:num_requests_waiting 1\nvllm:kv_cache_usage_perc{a=\"b\" 0.5\n")
    code, out, err = cli("diagnose", str(bad))
    assert code == 2 and out == ""
    assert err.startswith(f"optkg: error: {bad}:2: not valid Prometheus text") and err.count("\n") == 1


def test_usage_errors(cli, tmp_path):
    code, _, err = cli("diagnose")
    assert code == 2 and "no metrics given" in err
    code, _, err = cli("diagnose", str(VLLM), "--target-throughput", "-5")
    assert code == 2 and "--target-throughput: expected a positive number" in err
    code, _, err = cli("diagnose", str(VLLM), "--window", "0", "--before", str(VLLM))
    assert code == 2 and "--window: expected a positive number of seconds" in err


def test_output_file_is_not_overwritten_without_force(cli, tmp_path):
    out = tmp_path / "report.json"
    assert cli("diagnose", str(VLLM), "--format", "json", "-o", str(out))[0] == 0
    assert json.loads(out.read_text())["kind"] == "diagnose"
    code, _, err = cli("diagnose", str(VLLM), "-o", str(out))
    assert code == 2 and "refusing to overwrite" in err
    assert cli("diagnose", str(VLLM), "-o", str(out), "--force")[0] == 0
    assert out.read_text().startswith("optkg diagnose:")


def test_whole_shared_directory_is_read_with_notes(cli):
    # every format at once; files of different GPUs at index 0 disagree and the report says so
    code, out, _ = cli("diagnose", str(M), "--format", "json", "--fail-on", "never")
    assert code == 0
    d = json.loads(out)
    assert len(d["inputs"]) == 18
    assert any("diagnose one machine at a time" in n for n in d["notes"])


def test_disagreeing_inputs_text(cli):
    code, out, err = cli("diagnose", str(VLLM), str(H100_LOAD), "--target-throughput", "2000")
    assert code == 0 and err == ""
    assert "VERDICT: METRICS DISAGREE: NOT FROM THE SAME RUN   severity: warning" in out
    assert "COMPUTE SATURATION LIKELY" not in out.split("Walls")[0]
    # quantiles: '=' one observation, '<=' bounded by the mean; the PromQL estimates are named in the note
    assert "queue_time_seconds        6        1.226e-05  <=1.84e-05  <=7.358e-05  <=7.358e-05" in out
    assert "prompt_length_tokens      1        5          =5          =5           =5" in out
    assert "queue_time_seconds: PromQL interpolates p50 0.15, p90 0.27, p99 0.297" in out


def test_invalid_readings_in_text_and_verbose(cli, tmp_path):
    f = tmp_path / "vllm.prom"
    f.write_text('vllm:kv_cache_usage_perc{model_name="m"} NaN\nvllm:num_requests_waiting{model_name="m"} -5\n'
                 'vllm:num_requests_running{model_name="m"} 1\n')
    code, out, _ = cli("diagnose", str(f))
    assert code == 0
    assert "nan %" not in out and "-5 requests" not in out
    assert "WARNING [invalid-readings]: 2 reading(s) left out" in out
    flat = " ".join(out.split())  # the report wraps at 110 columns
    assert "invalid queue depth: read but invalid, so not used: vllm:num_requests_waiting for vllm reads -5 (negative)" in flat
    code, out, _ = cli("diagnose", str(f), "--verbose")
    flat = " ".join(out.split())
    assert "Invalid readings (left out): 2" in out
    assert "vllm:kv_cache_usage_perc for vllm (kv_cache_usage) = nan: not a number" in flat


def test_same_file_before_and_after_is_an_input_error(cli):
    f = str(FX / "vllm_kv_pressure.prom")
    code, out, err = cli("diagnose", "--before", f, "--after", f)
    assert code == 2 and out == "" and err.count("\n") == 1 and "are the same file" in err


def test_served_model_name_in_the_command_matches_the_metrics(cli):
    base = ("diagnose", str(VLLM), "--format", "json", "--vllm")
    d = json.loads(cli(*base, "vllm serve meta-llama/Meta-Llama-3.1-8B")[1])
    assert [w["rule_id"] for w in d["input_warnings"]] == ["metrics-model-mismatch"]
    d = json.loads(cli(*base, "vllm serve meta-llama/Meta-Llama-3.1-8B --served-model-name facebook/opt-125m")[1])
    assert d["input_warnings"] == []
