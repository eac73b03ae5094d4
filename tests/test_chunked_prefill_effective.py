"""Chunked prefill / prefix caching as the engine runs them: the effective setting, not only the technique list.

Found by a fresh-user test: a stack YAML that does not list `chunked-prefill` got the startup ERROR
batched-tokens-below-max-model-len (max_num_batched_tokens 8,192 < max_model_len 40,960) although vLLM
0.33.0 runs chunked prefill by default (catalog/engines/releases/vllm.yaml: arg_utils.py:3048 at 0.33.0);
and `--no-enable-chunked-prefill` / `--no-enable-prefix-caching` removed the technique but left the
setting at the engine default (true)."""
import json

from kg.cli import main

RULE = "batched-tokens-below-max-model-len"


def _check(args, capsys):
    code = main(["check", *args, "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    return code, out


def _ids(out):
    return {f["rule_id"] for f in out["findings"]}


def _effective(out, name):
    return next(e for e in out["effective_config"] if e["setting"] == name)


def test_stack_file_without_the_technique_uses_the_engine_default(tmp_path, capsys):
    f = tmp_path / "plain.yaml"
    f.write_text("name: t\nmodel: Qwen/Qwen3-235B-A22B\nengine: {name: vllm}\nhardware: {gpu: H200, count: 8}\n"
                 "techniques: [{tensor-parallelism: {tp_size: 8}}]\n")
    code, out = _check([str(f)], capsys)
    assert RULE not in _ids(out)
    e = _effective(out, "enable_chunked_prefill")
    assert (e["value"], e["source"]) == (True, "engine default")


def test_no_enable_chunked_prefill_turns_the_setting_off_and_the_rule_fires(capsys):
    code, out = _check(["--vllm", "vllm serve meta-llama/Llama-3.1-8B --max-num-batched-tokens 4096 "
                        "--no-enable-chunked-prefill --max-model-len 32768"], capsys)
    assert code == 1 and RULE in _ids(out)
    f = next(f for f in out["findings"] if f["rule_id"] == RULE)
    assert f["numbers"] == {"max_num_batched_tokens": 4096, "max_model_len": 32768}
    assert (_effective(out, "enable_chunked_prefill")["value"], _effective(out, "enable_chunked_prefill")["source"]) \
        == (False, "given")


def test_the_same_budget_with_the_default_on_does_not_fire(capsys):
    code, out = _check(["--vllm", "vllm serve meta-llama/Llama-3.1-8B --max-num-batched-tokens 4096 "
                        "--max-model-len 32768"], capsys)
    assert RULE not in _ids(out)


def test_no_enable_prefix_caching_is_given_false(capsys):
    code, out = _check(["--vllm", "vllm serve meta-llama/Llama-3.1-8B --no-enable-prefix-caching"], capsys)
    e = _effective(out, "enable_prefix_caching")
    assert (e["value"], e["source"]) == (False, "given")
    assert "prefix-caching" not in out["stack"]["techniques"]


def test_stack_file_both_sides_of_the_effective_setting(tmp_path, capsys):
    # the same stack YAML without the `chunked-prefill` technique, 8,192 batched tokens < max_model_len 40,960:
    # held with the engine default (vLLM 0.33.0 runs chunked prefill), fired when the file turns it off
    base = ("name: t\nmodel: Qwen/Qwen3-235B-A22B\nengine: {name: vllm, version: 0.33.0}\nhardware: {gpu: H200, count: 8}\n"
            "techniques: [{tensor-parallelism: {tp_size: 8}}]\n"
            "settings: {max_num_batched_tokens: 8192, max_model_len: 40960%s}\n")
    on, off = tmp_path / "on.yaml", tmp_path / "off.yaml"
    on.write_text(base % "")
    off.write_text(base % ", enable_chunked_prefill: false")
    _, out = _check([str(on)], capsys)
    assert RULE not in _ids(out)
    assert RULE in {h["rule"] for h in out.get("not_fired", [])} or RULE not in {u["rule_id"] for u in out["not_evaluable"]}
    assert (_effective(out, "enable_chunked_prefill")["value"], _effective(out, "enable_chunked_prefill")["source"]) \
        == (True, "engine default")
    code, out = _check([str(off)], capsys)
    assert code == 1 and RULE in _ids(out)
    f = next(f for f in out["findings"] if f["rule_id"] == RULE)
    assert f["numbers"] == {"max_num_batched_tokens": 8192, "max_model_len": 40960}
    assert _effective(out, "enable_chunked_prefill")["value"] is False
