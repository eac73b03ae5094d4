"""SGLang 0.5.23 engine checks, rows 36-69 of docs/engine-checks.md (arg_groups model_hook.py ... validation_hook.py):
the rules of rules/engine_checks_sglang_b.yaml, the flags and environment variables they read
(catalog/engines/sglang.yaml) and the release-ranged SGLang defaults that make them decidable on a plain command
(catalog/engines/releases/sglang.yaml). Release boundaries come from the unzipped wheels 0.5.2-0.5.23."""
import json
import re

import yaml

from conftest import REPO
from kg.analyses.enginechecks import coverage, load_checks
from kg.engine.rules import load_rules

LAUNCH = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B"
MINE = {r["id"] for r in yaml.safe_load((REPO / "rules" / "engine_checks_sglang_b.yaml").read_text())["rules"]}


def _check(cli, *argv):
    code, out, err = cli("check", *argv, "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)


def test_rows_36_to_69_are_all_covered_by_rules():
    ids = {r.id for r in load_rules("check")[0].rules}
    files = coverage(load_checks(REPO / "catalog" / "engines" / "checks"), ids)
    sg = next(f for f in files if f["engine"] == "sglang" and f["release"] == "0.5.23")
    rows = sg["rows"][35:]
    assert len(rows) == 34
    assert rows[0]["check"].path.endswith("model_hook.py") and rows[0]["check"].line == 1094
    assert rows[-1]["check"].path.endswith("validation_hook.py") and rows[-1]["check"].line == 260
    assert [r["check"].line for r in rows if not r["check"].covered_by] == []
    # rows 44 and 46 share a rule, row 45 has two (PP; ep x moe_dp); row 42 is lane a's sglang-tp-lm-head-all-to-all-with-dp-lm-head
    assert len(MINE) == 31
    used = {rid for r in rows for rid in r["check"].covered_by}
    assert MINE <= used


def test_plain_command_decides_every_new_rule(cli):
    """The SGLang defaults table gives each switch the rules read first, so none of them is 'not evaluable'."""
    d = _check(cli, "--sglang", LAUNCH)
    assert d["stack"]["engine_version"] == "0.5.23"
    assert not [u["rule_id"] for u in d["not_evaluable"] if u["rule_id"] in MINE]
    assert not [f["rule_id"] for f in d["findings"] if f["rule_id"] in MINE]
    eff = {e["setting"]: e for e in d["effective_config"]}
    e = eff["enable_watermark"]
    assert (e["value"], e["source"], e["releases"], e["brief"]) == (False, "engine default", ">=0.5.22", True)
    assert e["evidence"][1] == {"release": "0.5.23", "path": "sglang/srt/arg_groups/fields/exec_.py", "line": 74,
                                "snippet": "enable_watermark: A[", "note": "default False at line 77 (] = False)"}
    assert (eff["disaggregation_mode"]["value"], eff["moe_a2a_backend"]["value"]) == ("null", "none")
    assert eff["sglang_flashinfer_megamoe_combine_dtype"]["value"] == "bf16"
    # the text report folds the plain switches into one paragraph: 32 ServerArgs switches + disaggregation_mode,
    # moe_a2a_backend + 5 "given or not" switches + 4 SGLANG_* variables + disaggregation_decode_enable_radix_cache
    # = 44, less mm_enable_dp_encoder at 0.5.23
    _, text, _ = cli("check", "--sglang", LAUNCH)
    # 43 is more than the 8 named inline: the text gives the count and points at --verbose
    assert "+ 43 engine default(s) no finding reads (--verbose: each with its value and release range;" in text
    assert "enable_watermark" not in text
    _, text, _ = cli("check", "--sglang", LAUNCH, "--verbose")  # each on its own line, with its release range
    assert re.search(r"^  enable_watermark +false +engine default: ", text, re.M)


def test_watermark_default_at_its_release_boundary(cli):
    """--enable-watermark appeared in 0.5.22: its default exists from there, and not in 0.5.21."""
    eff22 = {e["setting"]: e for e in _check(cli, "--sglang", LAUNCH, "--engine-version", "0.5.22")["effective_config"]}
    eff21 = {e["setting"]: e for e in _check(cli, "--sglang", LAUNCH, "--engine-version", "0.5.21")["effective_config"]}
    assert eff22["enable_watermark"]["value"] is False and "enable_watermark" not in eff21
    assert eff21["sglang_enable_pp_spec"]["value"] is False and eff21["enable_response_store"]["value"] is False
    # mm_enable_dp_encoder: False up to 0.5.22, None (resolved at start-up) in 0.5.23, so no default there
    assert eff22["mm_enable_dp_encoder"]["value"] is False
    eff23 = {e["setting"]: e for e in _check(cli, "--sglang", LAUNCH)["effective_config"]}
    assert "mm_enable_dp_encoder" not in eff23


def test_watermark_with_pd_fires_from_0_5_22_only(cli):
    cmd = LAUNCH + " --enable-watermark --disaggregation-mode prefill"
    d = _check(cli, "--sglang", cmd, "--engine-version", "0.5.22")
    f = [f for f in d["findings"] if f["rule_id"] == "sglang-watermark-with-pd-disaggregation"]
    assert len(f) == 1 and f[0]["severity"] == "error"
    assert f[0]["message"].startswith("--enable-watermark with --disaggregation-mode prefill is rejected by SGLang 0.5.22")
    d = _check(cli, "--sglang", cmd, "--engine-version", "0.5.21")
    assert not [f for f in d["findings"] if f["rule_id"].startswith("sglang-watermark")]


def test_pp_spec_environment_variable(cli):
    """SGLANG_ENABLE_PP_SPEC (srt/environ.py from 0.5.21) with PP + EAGLE on a prefill server."""
    cmd = ("SGLANG_ENABLE_PP_SPEC=1 python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B --pp-size 2 "
           "--speculative-algorithm EAGLE --disaggregation-mode prefill")
    d = _check(cli, "--sglang", cmd)
    assert d["stack"]["settings"]["sglang_enable_pp_spec"] is True
    assert "sglang-pp-spec-with-pd-disaggregation" in {f["rule_id"] for f in d["findings"]}
    d = _check(cli, "--sglang", cmd, "--engine-version", "0.5.20")
    assert "sglang-pp-spec-with-pd-disaggregation" not in {f["rule_id"] for f in d["findings"]}


def test_grpc_port_and_api_key_flags_keep_no_secret(cli):
    """--grpc-port starts the native gRPC server; --api-key is recorded as given, its value is not kept."""
    cmd = LAUNCH + " --grpc-port 30001 --api-key sk-do-not-print-7731"
    code, out, err = cli("check", "--sglang", cmd, "--format", "json")
    assert "sk-do-not-print-7731" not in out + err
    d = json.loads(out)
    s = d["stack"]["settings"]
    assert (s["grpc_port"], s["grpc_server"], s["http_api_key_set"]) == (30001, True, True)
    f = [f for f in d["findings"] if f["rule_id"] == "sglang-grpc-port-with-api-key"]
    assert len(f) == 1 and "--grpc-port 30001 with --api-key/--admin-api-key is rejected by SGLang 0.5.23" in f[0]["message"]
    # the legacy gRPC mode takes precedence over --grpc-port (serving_hook.py: native_grpc = ... and not legacy_grpc)
    d = _check(cli, "--sglang", cmd + " --grpc-mode")
    assert "sglang-grpc-port-with-api-key" not in {f["rule_id"] for f in d["findings"]}


def test_mixed_chunk_by_speculative_method(cli):
    """SpeculativeAlgorithm.supports_mixed_chunk (0.5.19-0.5.23): EAGLE, EAGLE3, DFLASH, DSPARK; NEXTN is EAGLE."""
    base = LAUNCH + " --enable-mixed-chunk --speculative-algorithm "
    fired = {m: "sglang-mixed-chunk-with-unsupported-speculative" in {f["rule_id"] for f in _check(cli, "--sglang", base + m)["findings"]}
             for m in ("NGRAM", "EAGLE3", "NEXTN")}
    assert fired == {"NGRAM": True, "EAGLE3": False, "NEXTN": False}
    d = _check(cli, "--sglang", base + "NGRAM", "--engine-version", "0.5.18")
    assert "sglang-mixed-chunk-with-unsupported-speculative" not in {f["rule_id"] for f in d["findings"]}
