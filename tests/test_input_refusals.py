"""Bad input is one line on stderr and exit 2: non-finite numbers, unknown engines and versions, --select terms
that match nothing, duplicate keys, unknown dtypes, binary files, folders, the kv API's arguments."""
from __future__ import annotations

import pytest

from cli_helpers import EXAMPLE, one_line_error
from conftest import REPO, run_cli
from kg.core.errors import OptkgError


@pytest.mark.parametrize("argv", [
    ["kv", "--model", "Qwen/Qwen3-235B-A22B", "--kv-budget-gib", "nan"],
    ["kv", "--model", "Qwen/Qwen3-235B-A22B", "--kv-budget-gib", "inf"],
    ["check", EXAMPLE, "--kv-budget-gib", "1e400"],
    ["fit", str(REPO / "README.md"), "--model", "meta-llama/Llama-3.1-8B", "--kv-budget-gib", "inf"],
])
def test_non_finite_numbers_are_usage_errors(argv):
    code, _, err = run_cli(*argv)
    assert "expected a finite number" in one_line_error(code, err)


def test_non_finite_setting_in_a_stack_file(catalog):
    from kg.inputs.stack import stack_from_mapping
    with pytest.raises(OptkgError, match="expected a finite number"):
        stack_from_mapping({"model": "meta-llama/Llama-3.1-8B", "settings": {"kv_budget_gib": float("inf")}}, catalog)


@pytest.mark.parametrize("argv, cmd", [
    (["kv", "--tp", "eight", "--model", "Qwen/Qwen3-32B"], "kv"),
    (["check", EXAMPLE, "--count", "eight"], "check"),
    (["fit", "x.jsonl", "--model", "m", "--causal", "maybe"], "fit"),
    (["diagnose", "x.prom", "--target-throughput", "abc"], "diagnose"),
    (["place", "x.yaml", "--fail-on", "bogus"], "place"),
])
def test_usage_errors_are_one_line(argv, cmd):
    code, out, err = run_cli(*argv)
    line = one_line_error(code, err)
    assert line.endswith(f"(see 'optkg {cmd} --help')") and "usage:" not in err and out == ""


def test_unknown_engine_and_bad_versions(catalog, tmp_path):
    from kg.inputs.stack import stack_from_mapping
    with pytest.raises(OptkgError, match=r"unknown engine 'tensorrt'; did you mean 'trtllm'\? \(known: lmdeploy, sglang, trtllm, vllm"):
        stack_from_mapping({"model": "meta-llama/Llama-3.1-8B", "engine": {"name": "tensorrt"}}, catalog)
    assert stack_from_mapping({"model": "meta-llama/Llama-3.1-8B", "engine": "TensorRT-LLM"}, catalog).engine == "trtllm"
    with pytest.raises(OptkgError, match=r"expected an engine version number such as 0.11.0 \(at most 4 numeric parts\), found 'abc'"):
        stack_from_mapping({"model": "meta-llama/Llama-3.1-8B", "engine": {"name": "vllm", "version": "abc"}}, catalog)
    code, _, err = run_cli("check", EXAMPLE, "--engine-version", "banana")
    assert "--engine-version: expected an engine version number" in one_line_error(code, err)


def test_select_that_matches_nothing_is_an_error():
    code, _, err = run_cli("check", EXAMPLE, "--select", "nonsense-rule")
    assert "--select: 'nonsense-rule' matches no rule id, tag, severity or check code" in one_line_error(code, err)
    code, _, err = run_cli("check", EXAMPLE, "--ignore", "kv-head-replicaton")
    assert "did you mean kv-head-replication" in one_line_error(code, err)
    from kg.output.filtering import check_terms
    check_terms(["kv-cache,error", "placement", "schema-enum", "place-new-direction"], ["warning"])  # all known


def test_duplicates_and_zero_length_in_stack_files(catalog, tmp_path):
    from kg.inputs.stack import load_stack_file, stack_from_mapping
    with pytest.raises(OptkgError, match=r":5: technique 'tensor-parallelism' is listed twice \(first at .*:4\)"):
        f = tmp_path / "twice.yaml"
        f.write_text("model: Qwen/Qwen3-235B-A22B\nengine: vllm\ntechniques:\n  - tensor-parallelism: {tp_size: 8}\n"
                     "  - tensor-parallelism: {tp_size: 4}\n")
        load_stack_file(f, catalog)
    f = tmp_path / "dup.yaml"
    f.write_text("model: Qwen/Qwen3-235B-A22B\nengine: vllm\nmodel: meta-llama/Llama-3.1-8B\n")
    with pytest.raises(OptkgError, match=r"dup.yaml:3: 'model' is given twice \(first on line 1\)"):
        load_stack_file(f, catalog)
    with pytest.raises(OptkgError, match="max_model_len: expected a value >= 1, found 0"):
        stack_from_mapping({"model": "Qwen/Qwen3-235B-A22B", "settings": {"max_model_len": 0}}, catalog)


def test_unknown_torch_dtype_is_refused():
    from kg.inputs.modelcfg import parse_config
    with pytest.raises(OptkgError, match=r"cfg.json: torch_dtype 'weird' is not a dtype optkg knows"):
        parse_config({"num_attention_heads": 8, "num_hidden_layers": 2, "hidden_size": 512, "torch_dtype": "weird"}, "cfg.json")


def test_binary_catalog_file_hint(tmp_path):
    import shutil
    cat = tmp_path / "cat"
    shutil.copytree(REPO / "catalog", cat)
    (cat / "techniques" / "zz-bin.yaml").write_bytes(bytes([0x8E, 0xFF, 0x00, 0x10]) * 20)
    code, out, err = run_cli("validate", "--catalog", str(cat))
    assert code != 0 and "not a UTF-8 text file (binary?)" in out and "check indentation" not in out


def test_place_on_a_folder():
    code, _, err = run_cli("place", "/tmp")
    assert "/tmp: is a folder; place takes one technique file" in one_line_error(code, err)


def test_big_but_honest_yaml_is_not_an_alias_bomb():
    from kg.core.yamlio import MAX_NODES, parse_yaml
    with pytest.raises(OptkgError) as e:
        parse_yaml("- 1\n" * (MAX_NODES + 1), "big.yaml")
    assert "has more than 200,000 nodes" in str(e.value) and "alias" not in str(e.value)


@pytest.mark.parametrize("value, message", [
    ("100000000000000000000000", "--max-model-len: max_model_len: expected a value <= 1e+15, found 100000000000000000000000"),
    ("0", "--max-model-len: max_model_len: expected a value >= 1, found 0"),
])
def test_kv_refuses_max_model_len_as_check_does(value, message):
    cfg = str(REPO / "catalog/models/Qwen__Qwen3-32B.json")
    code, out, err = run_cli("kv", "--config", cfg, "--tp", "8", "--max-model-len", value, "--kv-budget-gib", "30")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"optkg: error: {message}"]
    code2, out2, err2 = run_cli("check", "--vllm", "vllm serve Qwen/Qwen3-32B", "--max-model-len", value, "--gpu", "H100")
    assert code2 == 2 and err2.strip().splitlines() == [f"optkg: error: {message}"]


def test_api_kv_checks_its_numbers_like_the_cli():
    # tester item 9: nan / inf budgets and a nan max_model_len were raw ValueErrors; "10" built a 2 GiB string
    import pytest

    import kg
    for kw, msg in (({"kv_budget_gib": float("nan")}, "kv: kv_budget_gib: expected a finite number, found nan"),
                    ({"kv_budget_gib": float("inf")}, "kv: kv_budget_gib: expected a finite number, found inf"),
                    ({"kv_budget_gib": -1}, "kv: kv_budget_gib: expected a value >= 0, found -1"),
                    ({"max_model_len": float("nan")}, "kv: max_model_len: expected an integer, found nan")):
        with pytest.raises(kg.OptkgError) as e:
            kg.kv("Qwen/Qwen3-32B", **kw)
        assert str(e.value) == msg
    # a numeric string is read the way a stack file's value is: Qwen3-32B 64 layers x 8 KV heads x 128 x 2 x 2 B
    # = 262,144 B/token; 10 GiB / 262,144 = 40,960 tokens
    assert kg.kv("Qwen/Qwen3-32B", kv_budget_gib="10")["capacity"]["kv_tokens_per_gpu"] == 40960


def test_a_model_config_json_given_as_the_stack_says_where_it_goes():
    # newuser9: `optkg check config.json` listed the stack fields against 'architectures'
    cfg = str(REPO / "catalog" / "models" / "Qwen__Qwen3-32B.json")
    code, _, err = run_cli("check", cfg)
    assert one_line_error(code, err) == (
        f"optkg: error: {cfg}: a model config.json, not a stack file: give it as --config beside a launch "
        f"(optkg check --vllm \"vllm serve\" --config {cfg}) or to optkg kv --config")
