"""Effective configuration before rules (issue 12, step 4): release lists and release-ranged engine
defaults as data (catalog/engines/releases/), the latest known release assumed when none is given."""
import json
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from kg.inputs.effective import known_releases, latest_release

DL = Path("/work/dl")


def _check(cli, *argv):
    # the effective configuration does not depend on the Speed section (tests/test_speed_serving.py)
    code, out, err = cli("check", *argv, "--format", "json", "--no-speed")
    assert code in (0, 1), err
    d = json.loads(out)
    return d, {e["setting"]: e for e in d["effective_config"]}


def test_release_lists_are_data():
    rel = known_releases("vllm")
    assert rel[0] == "0.4.0" and latest_release("vllm") == "0.34.0" and "0.5.1" in rel and "0.8.0" in rel
    assert latest_release("sglang") == "0.5.23"
    assert latest_release("no-such-engine") is None


def test_no_release_given_assumes_the_latest_and_says_so(cli):
    d, eff = _check(cli, "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8")
    assert d["stack"]["engine_version"] == "0.34.0" and d["stack"]["engine_version_assumed"] is True
    assert any("vllm release not given: assumed 0.34.0, the latest optkg knows" in n for n in d["notes"])
    _, text, _ = cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8")
    assert "engine: vllm 0.34.0 (assumed: the latest release optkg knows)" in text.splitlines()[2]
    # no GPU: the capacity rules are listed as not evaluable for lack of hardware, not dropped
    ne = {u["rule_id"]: u["needs"] for u in d["not_evaluable"]}
    for rid in ("weights-do-not-fit", "kv-budget-exhausted", "max-model-len-exceeds-kv-capacity",
                "parallel-size-exceeds-gpu-count"):
        assert ne[rid] == ["hardware"]
    # the scheduler defaults of 0.34.0 depend on the GPU class: unknown without one
    assert eff["max_num_seqs"]["source"] == "unknown" and "depends on hardware" in eff["max_num_seqs"]["why"]
    # 0.34.0: the extensible KV cache (on by default) resolves an unset utilisation to 1.0 (config/cache.py:495-501)
    assert (eff["gpu_memory_utilization"]["value"], eff["gpu_memory_utilization"]["source"]) == (1.0, "engine default")
    assert eff["enable_prefix_caching"]["value"] is True


def test_vllm_0_5_1_does_not_assume_prefix_caching(cli):
    cmd = "vllm serve meta-llama/Meta-Llama-3.1-8B"
    d, eff = _check(cli, "--vllm", cmd, "--engine-version", "0.5.1")
    assert "prefix-caching" not in d["stack"]["techniques"] and "chunked-prefill" not in d["stack"]["techniques"]
    e = eff["enable_prefix_caching"]
    assert (e["value"], e["source"], e["releases"]) == (False, "engine default", ">=0.4.0,<0.8.0")
    assert e["evidence"][0] == {"release": "0.4.0.post1", "path": "vllm/engine/arg_utils.py", "line": 30,
                                "snippet": "enable_prefix_caching: bool = False"}  # the range's lower bound
    assert e["evidence"][1] == {"release": "0.5.1", "path": "vllm/engine/arg_utils.py", "line": 44,
                                "snippet": "enable_prefix_caching: bool = False"}
    # V0 scheduler: 256 sequences; without chunked prefill max(max_model_len, 2048) = 131,072 tokens
    assert eff["max_num_seqs"]["value"] == 256 and eff["max_num_batched_tokens"]["value"] == 131072
    assert eff["vllm_use_v1"]["value"] == 0
    d, eff = _check(cli, "--vllm", cmd + " --enable-prefix-caching", "--engine-version", "0.5.1")
    assert "prefix-caching" in d["stack"]["techniques"] and eff["enable_prefix_caching"]["source"] == "given"


@pytest.mark.parametrize("gpu, version, seqs, tokens", [
    ("H200", "0.33.0", 1024, 8192),       # >= 70 GiB, not an A100
    ("B200", "0.33.0", 1024, 16384),      # >= 160 GiB tier from 0.28.0
    ("B200", "0.27.0", 1024, 8192),       # before the 160 GiB tier
    ("A100-80GB", "0.33.0", 256, 2048),   # A100 stays on the small defaults (PR 17885)
    ("L40S", "0.10.2", 256, 2048),        # 48 GiB
])
def test_scheduler_defaults_by_gpu_class(cli, gpu, version, seqs, tokens):
    _, eff = _check(cli, "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B", "--gpu", gpu,
                    "--engine-version", version)
    assert (eff["max_num_seqs"]["value"], eff["max_num_batched_tokens"]["value"]) == (seqs, tokens)


def test_newer_than_known_release_gets_the_newest_knowledge(cli):
    d, eff = _check(cli, "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B", "--engine-version", "0.99.0")
    assert d["stack"]["engine_version"] == "0.99.0" and d["stack"]["engine_version_assumed"] is False
    assert any("0.99.0 is newer than the latest release optkg knows (0.34.0)" in n for n in d["notes"])
    assert eff["gpu_memory_utilization"]["value"] == 1.0


@pytest.mark.parametrize("version, tail", [
    ("0.0.1", "it is older than every known release, so the rules and defaults bounded from a known release on do "
              "not apply to it"),
    ("0.7.4", "release-bounded rules and defaults are matched against 0.7.4 as given (between 0.7.3 and 0.8.0)"),
])
def test_release_not_in_the_list_gets_one_note(cli, version, tail):
    d, _ = _check(cli, "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B", "--engine-version", version)
    notes = [n for n in d["notes"] if "not in optkg's release list" in n]
    assert notes == [f"release {version} is not in optkg's release list for vllm (known: 0.4.0-0.34.0); {tail}"]
    # a listed release gets none
    d, _ = _check(cli, "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B", "--engine-version", "0.7.3")
    assert not [n for n in d["notes"] if "not in optkg's release list" in n]


def test_given_settings_win(cli):
    _, eff = _check(cli, "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --gpu-memory-utilization 0.8 "
                    "--max-num-seqs 64", "--gpu", "H200")
    assert eff["gpu_memory_utilization"]["source"] == "given" and eff["gpu_memory_utilization"]["value"] == 0.8
    assert eff["max_num_seqs"]["source"] == "given" and eff["max_num_seqs"]["value"] == 64


EXCERPTS = REPO / "tests/fixtures/vllm_release_excerpts/excerpts.json"  # copied from the wheels (SOURCES.md)


def test_every_default_cites_the_released_source():
    # runs in CI: the cited lines of the released wheels are copied into tests/fixtures (make_excerpts.py)
    table = yaml.safe_load((REPO / "catalog/engines/releases/vllm.yaml").read_text())
    excerpts = json.loads(EXCERPTS.read_text())
    checked = 0
    for e in table["defaults"]:
        assert e["evidence"], e
        for ev in e["evidence"]:
            x = excerpts.get(f"{ev['release']}:{ev['path']}:{ev['line']}")
            assert x is not None, ("no excerpt of the released source; run make_excerpts.py", e["setting"], ev)
            assert ev["snippet"] in x["lines"][ev["line"] - x["first_line"]], (e["setting"], ev)
            checked += 1
    # 34 + the 0.33.0 lines of the five open-ended defaults (vllm_use_v1, max_num_seqs 256, max_num_batched_tokens x3)
    # 48 = 39 + the 0.4.0.post1 / 0.4.2 lower bounds of the V0 defaults + the V2-runner async entry (2); + 8 for 0.34.0:
    # gpu_memory_utilization 1.0 (3) and 0.92 (1), block_size 16 (1) and 64 (2), async scheduling (1); + 12 for V0's
    # long-context chunked prefill (7: 0.5.4, 0.6.3.post1, 0.7.2) and V1 on 0.7.x (3), lora_extra_vocab_size (3);
    # + 8 for GB10's small tier from 0.33.0 (max_num_seqs 1024 / 256 rows: 3 + 2, max_num_batched_tokens 8192 /
    # 2048 rows: 2 + 2, less the 0.33.0 line the old 8192 row cited); + 6 for max_num_seqs clamped to a given
    # max_num_batched_tokens from 0.10.1 (newuser7), + 7 for the budget raised to the model length with chunked
    # prefill off (newuser7), + 6 for --performance-mode throughput doubling both (newuser7)
    assert checked == 96


def test_excerpts_are_the_released_text():
    # provenance of the excerpts where the unpacked wheels are at hand (the check above runs everywhere)
    import hashlib
    excerpts = json.loads(EXCERPTS.read_text())
    present = [x for x in excerpts.values() if (DL / f"vllm-{x['release']}" / x["path"]).is_file()]
    if not present:
        pytest.skip("released vLLM sources are not unpacked under /work/dl on this machine")
    for x in present:
        data = (DL / f"vllm-{x['release']}" / x["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == x["file_sha256"], x["path"]
        lines = data.decode().splitlines()
        assert lines[x["first_line"] - 1:x["first_line"] - 1 + len(x["lines"])] == x["lines"], x["path"]


def test_fit_and_check_use_the_same_scheduler_default(catalog, cli):
    from kg.analyses.fit import _thresholds, scheduler_limit
    from kg.engine.rules import load_ruleset
    th = _thresholds(load_ruleset("fit"), None)
    for gpu in sorted(catalog.hardware):
        hw = catalog.hardware[gpu]
        fit_value, _ = scheduler_limit(th, {"gpu": gpu, "gpu_name": hw.get("name"), "gpu_memory_gib": hw.get("memory_gib"),
                                            "gpu_compute_capability": hw.get("compute_capability")})
        _, eff = _check(cli, "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B", "--gpu", gpu)
        assert eff["max_num_seqs"]["value"] == fit_value, gpu


def test_chunked_prefill_budget_before_0_4_2_is_the_non_chunked_one(cli):
    # vLLM 0.4.0.post1 config.py:562 sizes max_num_batched_tokens as max(max_model_len, 2048) whether chunked prefill
    # is on or not; the 512-token chunk budget arrives in 0.4.2 (config.py:621)
    cmd = "vllm serve meta-llama/Meta-Llama-3.1-8B --max-model-len 4096 --enable-chunked-prefill"
    _, eff = _check(cli, "--vllm", cmd, "--engine-version", "0.4.1")
    assert eff["max_num_batched_tokens"]["value"] == 4096
    _, eff = _check(cli, "--vllm", cmd, "--engine-version", "0.4.2")
    assert eff["max_num_batched_tokens"]["value"] == 512


def test_vllm_033_keeps_gb10_on_the_small_batch_tier(cli):
    # vllm 0.33.0 engine/arg_utils.py:2963 is_gb10 = cc (12, 1); :2986 `and not is_gb10` -> OPENAI_API_SERVER
    # 2,048 tokens (:3001) and 256 sequences (:3005); 0.34.0 :3023, :3038, :3042; absent in 0.32.0 (:2923)
    cmd = "vllm serve Qwen/Qwen3-8B"
    d, eff = _check(cli, "--vllm", cmd, "--gpu", "GB10", "--count", "1", "--engine-version", "0.33.0")
    assert (eff["max_num_seqs"]["value"], eff["max_num_batched_tokens"]["value"]) == (256, 2048)
    assert eff["max_num_seqs"]["evidence"][0]["line"] == 3005
    # the dummy sampler then runs 256 requests: 256 x 151,936 x 14 B = 544,538,624 B (was 1,024 requests)
    act = next(x for x in d["derived"]["kv_budget_breakdown"] if x["name"] == "activation peak")
    assert act["bytes"] == 256 * 151_936 * 14 == 544_538_624
    assert d["derived"]["kv_tokens_per_gpu"] == 727_856
    _, eff34 = _check(cli, "--vllm", cmd, "--gpu", "GB10", "--count", "1", "--engine-version", "0.34.0")
    assert (eff34["max_num_seqs"]["value"], eff34["max_num_batched_tokens"]["value"]) == (256, 2048)
    # before 0.33.0 GB10's 128 GiB put it on the H100 tier
    d32, eff32 = _check(cli, "--vllm", cmd, "--gpu", "GB10", "--count", "1", "--engine-version", "0.32.0")
    assert (eff32["max_num_seqs"]["value"], eff32["max_num_batched_tokens"]["value"]) == (1024, 8192)
    assert d32["derived"]["kv_tokens_per_gpu"] == 716_784
    # not GB10 (H100, cc 9.0): the large tier at 0.33.0 as before
    _, h100 = _check(cli, "--vllm", cmd, "--gpu", "H100-SXM", "--count", "1", "--engine-version", "0.33.0")
    assert (h100["max_num_seqs"]["value"], h100["max_num_batched_tokens"]["value"]) == (1024, 8192)
    from kg.engines.vllm.kv_plan import default_max_num_batched_tokens
    assert default_max_num_batched_tokens(128, "GB10", "12.1", "0.33.0") == 2048
    assert default_max_num_batched_tokens(128, "GB10", "12.1", "0.32.0") == 8192
    assert default_max_num_batched_tokens(128, "GB10", "12.1") == 2048  # None: the latest release
