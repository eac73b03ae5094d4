"""What optkg knows per engine release: options a release refuses (an ERROR with the nearest accepted spelling) vs
options it accepts but optkg does not model (a note); vLLM 0.34.0 as the newest known release (block size 64, the
extensible KV cache with gpu_memory_utilization 1.0, no Model Runner V1) and the note every command prints for a
release newer than that; the onboarding merge of a new release into a generated per-release table."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import REPO, run_cli

sys.path.insert(0, str(REPO / "tools"))


def _check_json(*argv: str) -> dict:
    code, out, err = run_cli("check", *argv, "--format", "json", "--no-speed")  # no test here reads the Speed section
    assert code in (0, 1), err
    return json.loads(out)


def _finding(d: dict, rid: str) -> dict | None:
    return next((f for f in d["findings"] if f["rule_id"] == rid), None)


def test_a_misspelled_option_is_an_error_naming_the_accepted_spelling():
    d = _check_json("--vllm", "vllm serve meta-llama/Llama-3.1-8B --tensor-paralel-size 2", "--engine-version", "0.34.0")
    f = _finding(d, "engine-option-refused")
    assert f is not None and f["severity"] == "error"
    assert f["message"] == ('vllm refuses to start (argparse "unrecognized arguments"): --tensor-paralel-size is not an '
                            "option of vllm 0.34.0; did you mean --tensor-parallel-size?")
    assert not any("tensor-paralel" in x for x in d["ignored_flags"])  # refused, not "ignored (not modelled)"


def test_a_prefix_of_two_options_is_refused_as_ambiguous_not_unrecognized():
    # argparse (allow_abbrev, vLLM's FlexibleArgumentParser keeps it) stops --kv-cache-dt with "ambiguous option":
    # vllm 0.34.0 defines both --kv-cache-dtype and --kv-cache-dtype-skip-layers (engine/arg_utils.py:819)
    d = _check_json("--vllm", "vllm serve meta-llama/Llama-3.1-8B --kv-cache-dt fp8", "--engine-version", "0.34.0")
    f = _finding(d, "engine-option-refused")
    assert f["message"] == ('vllm refuses to start (argparse "ambiguous option"): --kv-cache-dt is ambiguous in vllm '
                            "0.34.0 (could match --kv-cache-dtype, --kv-cache-dtype-skip-layers); did you mean "
                            "--kv-cache-dtype?")



def test_an_ambiguous_prefix_suggests_the_option_it_abbreviates_not_a_lookalike():
    # newuser8: SGLang 0.5.23 has --pp-size, --pp-async-batch-depth and --pp-max-micro-batch-size (fields/parallel.py),
    # so `--pp 2` stops with "ambiguous option"; the did-you-mean named --ep (one letter away), now --pp-size
    d = _check_json("--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 2 --pp 2",
                    "--engine-version", "0.5.23")
    assert _finding(d, "engine-option-refused")["message"].endswith("did you mean --pp-size?")

def test_frontend_options_of_vllm_029_to_032_are_accepted():
    # 0.29.0-0.32.0 define the server's options in vllm/entrypoints/launchers/cli_args.py (BaseFrontendArgs and
    # FrontendArgs; e.g. 0.31.0 :70), a file the option scan first missed: --api-key was "refused" there
    d = _check_json("--vllm", "vllm serve Qwen/Qwen3-32B --api-key sk-1 --port 8000 --host 0.0.0.0 --chat-template t.j",
                    "--engine-version", "0.30.0")
    assert _finding(d, "engine-option-refused") is None


def test_an_unscanned_release_does_not_refuse_an_option_of_the_next_scanned_one():
    # vLLM 0.10.0 was not scanned (0.9.1 and 0.10.2 were); --async-scheduling exists from 0.10.2 in the table and is
    # defined at 0.10.0 (engine/arg_utils.py:821): a note that it is not known, no refusal; a typo is still refused,
    # naming the scanned release that stands for 0.10.0
    d = _check_json("--vllm", "vllm serve Qwen/Qwen3-32B --async-scheduling", "--engine-version", "0.10.0")
    assert _finding(d, "engine-option-refused") is None
    assert any("0.10.0 was not scanned: --async-scheduling is in the next scanned release (0.10.2)" in n
               for n in d["notes"])
    d = _check_json("--vllm", "vllm serve Qwen/Qwen3-32B --tensor-paralel-size 2", "--engine-version", "0.10.0")
    assert "is not an option of vllm 0.9.1 (the scanned release that stands for 0.10.0)" in \
        _finding(d, "engine-option-refused")["message"]


YARN = '{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}'


def test_qwens_yarn_recipe_starts_on_the_releases_that_scale_from_the_original_length():
    # Up to vLLM 0.29.0 YaRN restarts from original_max_position_embeddings and multiplies by factor: 32,768 x 4 =
    # 131,072 (0.10.0 config.py:3549-3552, 0.29.0 config/model.py:2457-2458); from 0.30.0 max_position_embeddings
    # (40,960 for Qwen3-32B) is kept (0.34.0 config/model.py:2654-2667), so 131,072 is refused there.
    # --hf-overrides replaces the keys (0.24.0 transformers_utils/config.py:759-761); --rope-scaling joins it (<= 0.11.0)
    for flag, release, limit in (("--rope-scaling", "0.10.2", 131072), ("--hf-overrides", "0.24.0", 131072),
                                 ("--hf-overrides", "0.34.0", 40960)):
        value = YARN if flag == "--rope-scaling" else '{"rope_scaling":' + YARN + "}"
        d = _check_json("--vllm", f"vllm serve Qwen/Qwen3-32B -tp 4 --max-model-len 131072 {flag} '{value}'",
                        "--engine-version", release)
        assert d["derived"]["max_model_len_limit"] == limit, (flag, release)
        assert (_finding(d, "max-model-len-exceeds-max-position-embeddings") is not None) is (limit < 131072)


def test_an_accepted_option_optkg_does_not_model_stays_a_note():
    d = _check_json("--vllm", "vllm serve meta-llama/Llama-3.1-8B --disable-log-stats --no-enable-log-requests",
                    "--engine-version", "0.34.0")
    assert _finding(d, "engine-option-refused") is None
    assert "--disable-log-stats" in d["ignored_flags"]


def test_an_option_the_release_does_not_have_yet_is_refused_with_the_releases_that_have_it():
    # --enable-extensible-kv-cache first appears in 0.34.0 (catalog/engines/options/vllm.yaml)
    d = _check_json("--vllm", "vllm serve meta-llama/Llama-3.1-8B --enable-extensible-kv-cache", "--engine-version", "0.33.0")
    f = _finding(d, "engine-option-refused")
    assert f is not None and "it exists in vllm >=0.34.0" in f["message"]


def _effective(d: dict, name: str):
    return next(e for e in d["effective_config"] if e["setting"] == name)


def test_vllm_034_defaults_block_size_64_and_utilization_1_with_the_extensible_kv_cache():
    d = _check_json("--vllm", "vllm serve meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--engine-version", "0.34.0")
    assert _effective(d, "block_size")["value"] == 64  # config/cache.py:185 DEFAULT_BLOCK_SIZE
    assert _effective(d, "gpu_memory_utilization")["value"] == 1.0  # cache.py:495-501 resolved_gpu_memory_utilization
    off = _check_json("--vllm", "vllm serve meta-llama/Llama-3.1-8B --no-enable-extensible-kv-cache", "--gpu", "H100-SXM",
                      "--engine-version", "0.34.0")
    assert _effective(off, "gpu_memory_utilization")["value"] == 0.92  # DEFAULT_GPU_MEMORY_UTILIZATION
    old = _check_json("--vllm", "vllm serve meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--engine-version", "0.33.0")
    assert (_effective(old, "block_size")["value"], _effective(old, "gpu_memory_utilization")["value"]) == (16, 0.92)


def test_vllm_034_has_no_v1_model_runner():
    from kg.engines.vllm.runner import uses_v2_model_runner
    assert uses_v2_model_runner("0.34.0", "LlamaForCausalLM", speculative_method="suffix", env=False)[0] is True
    assert uses_v2_model_runner("0.33.0", "LlamaForCausalLM", speculative_method="suffix")[0] is False


def test_a_release_newer_than_known_is_noted_by_kv_check_sweep_and_fit():
    note = "vllm 0.35.0 is newer than the latest release optkg knows (0.34.0): checked with the knowledge of 0.34.0"
    code, out, err = run_cli("kv", "--model", "meta-llama/Llama-3.1-8B", "--engine-version", "0.35.0")
    assert code == 0 and note in err
    assert note in _check_json("--vllm", "vllm serve meta-llama/Llama-3.1-8B", "--engine-version", "0.35.0")["notes"]
    code, out, err = run_cli("sweep", "--vllm", "vllm serve meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM",
                             "--engine-version", "0.35.0", "--tp", "1", "--format", "json")
    assert note in json.loads(out)["notes"]
    code, out, err = run_cli("fit", "rules/fixtures/traces/small_prefix.jsonl", "--model", "meta-llama/Llama-3.1-8B",
                             "--engine-version", "0.35.0", "--format", "json")
    assert note in err


def test_onboarding_merges_a_new_release_into_a_per_release_table():
    from onboard import merge_ranges
    old = {"--a": {"since": "0.1", "last_seen": "0.2", "evidence": {"release": "0.2"}},
           "--b": {"since": "0.1", "last_seen": "0.2", "evidence": {"release": "0.2"}},
           "--c": {"since": "0.1", "last_seen": "0.1", "until": "0.2", "evidence": {"release": "0.1"}}}
    table, added, removed = merge_ranges(old, {"--a": ("x.py", 5), "--c": ("x.py", 9), "--d": ("x.py", 7)}, "0.3",
                                         ["0.1", "0.2"], "pkg")
    assert added == ["--c", "--d"] and removed == ["--b"]
    assert table["--b"]["until"] == "0.3" and table["--a"]["last_seen"] == "0.3"
    assert table["--c"]["absent_in"] == ["0.2"] and "until" not in table["--c"]
    assert table["--d"] == {"evidence": {"line": 7, "package": "pkg", "path": "x.py", "release": "0.3"},
                            "last_seen": "0.3", "since": "0.3"}


def test_a_long_spelling_of_a_short_alias_suggests_the_alias():
    # vllm 0.34.0 defines -tp and -dcp only beside --tensor-parallel-size / --decode-context-parallel-size
    # (engine/arg_utils.py:1224); argparse refuses --tp (no long option starts with it) and --dcp (a prefix of
    # --dcp-comm-backend, --dcp-kv-cache-interleave-size, --dcp-q-replicate): the did-you-mean was none / a lookalike
    d = _check_json("--vllm", "vllm serve Qwen/Qwen3-32B --tp 2", "--engine-version", "0.34.0")
    assert _finding(d, "engine-option-refused")["message"] == (
        'vllm refuses to start (argparse "unrecognized arguments"): --tp is not an option of vllm 0.34.0; did you '
        "mean -tp?")
    d = _check_json("--vllm", "vllm serve Qwen/Qwen3-32B --dcp 2", "--engine-version", "0.34.0")
    assert _finding(d, "engine-option-refused")["message"].endswith(
        "(could match --dcp-comm-backend, --dcp-kv-cache-interleave-size, --dcp-q-replicate); did you mean -dcp?")


def test_a_value_error_under_an_expanded_prefix_names_the_option_it_was_read_as():
    # vllm 0.34.0: argparse reads --ep as the unique prefix of --eplb-config (a JSON option); -ep is
    # --enable-expert-parallel. The error said only "--vllm --ep: expected a JSON object, found '2'"
    from conftest import run_cli
    code, _, err = run_cli("check", "--vllm", "vllm serve Qwen/Qwen3-32B --ep 2", "--engine-version", "0.34.0")
    assert (code, err) == (2, "optkg: error: --vllm --ep (read as --eplb-config, a unique prefix; did you mean -ep?): "
                              "expected a JSON object, found '2'\n")
