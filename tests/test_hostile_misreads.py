"""Bad input is refused, never read as something else: an unknown GPU, a stack file explain would have
ignored, metrics with no usable sample, digits that are not ASCII, a config.json whose numbers cannot be
what they claim, duplicate keys, YAML's octal/hex/string spellings of counts, flags given with no value.

Each is a one-line ``optkg: error:`` with exit 2 naming the file (and line) or the flag and the field.
The reproducers of ../shared/reference/hostile_inputs_turn3.md carry their number in the docstring.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO, SHARED, run_cli
from test_hostile_numbers import EXAMPLE, Q, one_line_error

QWEN32 = json.loads((REPO / "catalog" / "models" / "Qwen__Qwen3-32B.json").read_text())
SMI = SHARED / "data/metrics/nvidia_smi_query-gpu_load__nvidia-h100-80gb-hbm3__590.48.01.csv"
PROM = SHARED / "data/metrics/vllm_metrics_datadog_fixture_opt125m.prom"
STACK = ("name: t\nmodel: Qwen/Qwen3-235B-A22B\nengine: {{name: vllm}}\nhardware: {{gpu: {gpu}, count: 8}}\n"
         "techniques:\n  - tensor-parallelism: {{tp_size: {tp}}}\n")


def _stack(tmp_path: Path, gpu: str = "H200", tp: str = "8", extra: str = "") -> str:
    p = tmp_path / "s.yaml"
    p.write_text(STACK.format(gpu=gpu, tp=tp) + extra)
    return str(p)


# ---- #18 unknown GPU ----------------------------------------------------------------------------------

def test_nvidia_smis_own_gpu_name_resolves_in_a_stack_file(tmp_path):
    """hostile_inputs_turn3.md #18: ``hardware: {gpu: 'NVIDIA H200'}`` (as nvidia-smi prints it) was an unknown GPU,
    a note, exit 0 and every hardware rule skipped. It is H200: nothing else in the catalog has that word."""
    code, out, err = run_cli("check", _stack(tmp_path, gpu="'NVIDIA H200'"), "--format", "json")
    assert code in (0, 1), err
    d = json.loads(out)
    assert d["stack"]["hardware"] == "H200"
    assert "hardware" not in {m for u in d["not_evaluable"] for m in u.get("missing") or []}


@pytest.mark.parametrize("name,near", [("H200x", "H200"), ("H10", "H100-SXM"), ("NVIDIA H200 NVL", "H200")])
def test_an_unknown_gpu_is_an_error_with_the_closest_names(tmp_path, name, near):
    """hostile_inputs_turn3.md #18: ``--gpu H200x`` / ``H10`` / a stack file's unknown GPU were a note with exit 0
    (in CI a GPU typo turned the memory checks green). ``H200 NVL`` is not the SXM part: no nearest guess."""
    code, out, err = run_cli("check", "--vllm", f"vllm serve {Q} -tp 8", "--gpu", name)
    one_line_error(code, err, f"--gpu: unknown GPU '{name}'; did you mean", near, "--gpu-memory-gib")
    code, out, err = run_cli("check", _stack(tmp_path, gpu=f"'{name}'"))
    one_line_error(code, err, f"s.yaml:4: unknown GPU '{name}'", "memory_gib: N")
    code, out, err = run_cli("sweep", "--vllm", f"vllm serve {Q}", "--gpu", name, "--tp", "4,8")
    one_line_error(code, err, f"unknown GPU '{name}'")


def test_a_gpu_not_in_the_catalog_is_described_by_its_memory(tmp_path):
    """The way out the error names: ``--gpu-memory-gib`` (and ``--gpu-compute-capability``), or ``memory_gib:``."""
    code, out, err = run_cli("check", "--vllm", f"vllm serve {Q} -tp 8", "--gpu", "MyGPU", "--gpu-memory-gib", "141",
                             "--gpu-compute-capability", "9.0", "--count", "8", "--format", "json")
    assert code in (0, 1), err
    d = json.loads(out)
    assert d["stack"]["hardware"] == "MyGPU"
    missing = {m for u in d["not_evaluable"] for m in u.get("missing") or []}
    assert "hardware" not in missing and "gpu_memory_gib" not in missing
    code, out, err = run_cli("check", "--vllm", f"vllm serve {Q} -tp 8", "--gpu-memory-gib", "141")
    one_line_error(code, err, "--gpu-memory-gib describes the GPU --gpu names")


# ---- #19 explain with a stack ------------------------------------------------------------------------

@pytest.mark.parametrize("argv,needle", [
    (["--stack", "/dev/zero"], "/dev/zero: file is over the limit"),
    (["--stack", "missing.yaml"], "missing.yaml: file not found"),
    (["--vllm", "vllm serve x -tp nan"], "--vllm -tp: expected an integer, found 'nan'"),
])
def test_explain_one_technique_reads_the_stack_it_is_given(argv, needle):
    """hostile_inputs_turn3.md #19: ``explain tensor-parallelism --stack /dev/zero`` (a missing file, a FIFO, a YAML
    bomb, ``--vllm '... -tp nan'``) exited 0: one technique ignored the stack."""
    code, out, err = run_cli("explain", "tensor-parallelism", *argv)
    one_line_error(code, err, needle)


def test_explain_one_technique_keeps_the_chains_that_can_hold_for_the_stack():
    code, out, err = run_cli("explain", "kv-cache-quantization", "--stack", EXAMPLE, "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    full = json.loads(run_cli("explain", "kv-cache-quantization", "--format", "json")[1])
    # the example runs kv_cache_dtype auto: every chain needs a quantised KV cache or another engine
    assert d["left_out"] == len(full["chains"]) - len(d["chains"]) and d["left_out"] > 0
    assert any("kv_cache_dtype != 'auto' is false for this stack" in r for r in d["left_out_reasons"])


# ---- #21 / #22 diagnose ------------------------------------------------------------------------------

def test_diagnose_refuses_inputs_with_no_usable_sample(tmp_path):
    """hostile_inputs_turn3.md #21: a file of unknown metric names, a header-only nvidia-smi CSV, a row of 200k
    commas and an empty folder as ``--before`` each gave a verdict with exit 0."""
    unk = tmp_path / "unk.prom"
    unk.write_text('foo_bar 1\nbaz_qux{a="b"} 2\n')
    one_line_error(*run_cli("diagnose", str(unk))[::2], f"{unk}: no usable sample: no reading optkg uses",
                   "names it does not read: baz_qux, foo_bar")
    head = SMI.read_text().split("\n", 1)[0] + "\n"
    hdr = tmp_path / "hdr.csv"
    hdr.write_text(head)
    one_line_error(*run_cli("diagnose", str(hdr))[::2], f"{hdr}: no usable sample")
    commas = tmp_path / "commas.csv"
    commas.write_text(head + "," * 200_000 + "\n")
    one_line_error(*run_cli("diagnose", str(commas))[::2], f"{commas}: no usable sample")
    empty = tmp_path / "before"
    empty.mkdir()
    one_line_error(*run_cli("diagnose", str(PROM), "--before", str(empty))[::2], f"{empty}: no metrics file in this folder")


@pytest.mark.parametrize("line", [
    'vllm:num_requests_running{{model_name="m"}} {big}',
    'vllm:num_requests_running{{model_name="m"}} 1 {big}',
    'DCGM_FI_DEV_GPU_UTIL{{gpu="{big}",modelName="NVIDIA H100 80GB HBM3"}} 50',
])
def test_diagnose_refuses_5000_digit_values_timestamps_and_labels(tmp_path, line):
    """hostile_inputs_turn3.md #22: 5,000-digit metric values, timestamps, DCGM ``gpu=`` labels and MiB values were
    accepted without an error (a value read as inf vanished)."""
    p = tmp_path / "m.prom"
    p.write_text("# TYPE x gauge\n" + line.format(big="9" * 5000) + "\n")
    one_line_error(*run_cli("diagnose", str(p))[::2], f"{p}:2: a number of 5,000 digits")


def test_diagnose_refuses_a_5000_digit_mib_value_in_an_nvidia_smi_csv(tmp_path):
    head, rows = SMI.read_text().split("\n", 1)
    first = rows.split("\n", 1)[0].split(", ")
    mib = next(i for i, c in enumerate(first) if c.endswith(" MiB"))
    first[mib] = "9" * 5000 + " MiB"
    p = tmp_path / "smi.csv"
    p.write_text(head + "\n" + ", ".join(first) + "\n")
    one_line_error(*run_cli("diagnose", str(p))[::2], f"{p}:2: a number of 5,000 digits")


# ---- #23 non-ASCII digits ----------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["kv", "--model", Q, "--tp=١٢"],
    ["fit", str(SHARED / "data/traces/mooncake_fast25_conversation_trace.jsonl"), "--model", Q, "--tp", "١٢"],
    ["check", "--vllm", f"vllm serve {Q}", "--count", "٨"],
    ["check", "--vllm", f"vllm serve {Q}", "--kv-budget-gib", "١٢"],
    ["explain", "tensor-parallelism", "--depth", "٣"],
    ["diagnose", str(PROM), "--window", "٣٠"],
    ["gaps", "--top", "٣"],
    ["gaps", "--threshold", "crowded_layer_min=٢"],
])
def test_arabic_indic_digits_are_not_numbers(argv):
    """hostile_inputs_turn3.md #23: ``--tp=١٢`` was read as 12 by every numeric flag of kv, fit, check, sweep,
    explain, diagnose and gaps (Python's int() and float() read Unicode digits)."""
    code, out, err = run_cli(*argv)
    one_line_error(code, err, "ASCII digits")


# ---- #24 / #25 config.json ---------------------------------------------------------------------------

@pytest.mark.parametrize("key,value,needle", [
    ("head_dim", 0, "'head_dim' is 0"),
    ("max_position_embeddings", 0, "'max_position_embeddings' must be a positive number of tokens, found 0"),
    ("max_position_embeddings", [], "found []"),
    ("max_position_embeddings", True, "found True"),
    ("max_position_embeddings", -0.0, "found -0.0"),
    ("num_hidden_layers", 0, "'num_hidden_layers' must be at least 1"),
])
def test_a_config_number_that_cannot_be_is_an_error_naming_file_line_and_field(tmp_path, key, value, needle):
    """hostile_inputs_turn3.md #24: ``head_dim: 0`` was replaced by hidden/heads, ``max_position_embeddings`` of 0,
    ``[]``, ``true`` or ``-0.0`` was ignored (longest request 6,990,480 tokens), ``num_hidden_layers: 0`` accepted."""
    c = dict(QWEN32)
    c[key] = value
    p = tmp_path / "config.json"
    p.write_text(json.dumps(c, indent=1))
    line = next(i for i, ln in enumerate(p.read_text().splitlines(), 1) if f'"{key}"' in ln)
    for argv in (["check", "--config", str(p)], ["kv", "--config", str(p), "--tp", "2"]):
        one_line_error(*run_cli(*argv)[::2], f"{p}:{line}: ", needle)


def test_a_config_key_given_twice_is_an_error(tmp_path):
    """hostile_inputs_turn3.md #25: ``"num_hidden_layers": 2, "num_hidden_layers": 99999`` -- the last one won
    silently (``full x99999``); stack YAML refuses duplicates, JSON now too. A Latin-1 byte is not UTF-8."""
    text = json.dumps(QWEN32, indent=1).replace('"num_hidden_layers": 64', '"num_hidden_layers": 2,\n "num_hidden_layers": 99999')
    p = tmp_path / "config.json"
    p.write_text(text)
    line = [i for i, ln in enumerate(text.splitlines(), 1) if '"num_hidden_layers"' in ln][1]
    one_line_error(*run_cli("kv", "--config", str(p), "--tp", "2")[::2],
                   f"{p}:{line}: key 'num_hidden_layers' appears twice in one object")
    p.write_bytes(json.dumps(QWEN32).encode().replace(b'"qwen3"', b'"qwen3\xe9"'))
    one_line_error(*run_cli("kv", "--config", str(p), "--tp", "2")[::2], "not valid UTF-8 (byte 0xe9")


# ---- #26 engine versions -----------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["", "1.2.3.4.5.6", "18446744073709551616"])
def test_an_engine_version_that_is_no_release_is_an_error(tmp_path, version):
    """hostile_inputs_turn3.md #26: ``--engine-version ''``, ``1.2.3.4.5.6`` and ``version: 18446744073709551616`` were
    accepted."""
    code, out, err = run_cli("check", "--vllm", f"vllm serve {Q} -tp 8", "--engine-version", version)
    one_line_error(code, err, "--engine-version: expected an engine version number such as 0.11.0")
    p = tmp_path / "v.yaml"
    shown = version or "''"
    p.write_text(STACK.format(gpu="H200", tp="8") + f"engine_version: {shown}\n")
    one_line_error(*run_cli("check", str(p))[::2], f"{p}:7: engine_version")


# ---- #27 YAML spellings of numbers -------------------------------------------------------------------

@pytest.mark.parametrize("tp,needle", [("0o17", "'0o17'"), ("!!str 8", "'8'"), ('"8"', "'8'"), ("0x1f", "'0x1f'")])
def test_a_stack_count_written_as_octal_hex_or_text_is_an_error(tmp_path, tp, needle):
    """hostile_inputs_turn3.md #27: ``tp_size: 0o17`` was read as 15, ``tp_size: !!str 8`` as 8, ``count: 0x1f`` as
    31. A stack file writes numbers plainly."""
    p = _stack(tmp_path, tp=tp)
    one_line_error(*run_cli("check", p)[::2], f"{p}:6: tensor-parallelism.tp_size: expected an integer, found the "
                   f"text {needle}")
    p2 = tmp_path / "c.yaml"
    p2.write_text(STACK.format(gpu="H200", tp="8").replace("count: 8", f"count: {tp}"))
    one_line_error(*run_cli("check", str(p2))[::2], f"{p2}:4: count: expected an integer")


def test_a_negative_zero_kv_budget_is_an_error(tmp_path):
    """hostile_inputs_turn3.md #27: ``kv_budget_gib: -0.0`` was accepted."""
    p = _stack(tmp_path, extra="settings:\n  kv_budget_gib: -0.0\n")
    one_line_error(*run_cli("check", p)[::2], f"{p}:8: kv_budget_gib: expected a value >= 0 (a negative zero")


# ---- #28 flags with no value --------------------------------------------------------------------------

def test_a_filter_flag_with_no_value_is_an_error():
    """hostile_inputs_turn3.md #28: ``gaps --stage ',,,'`` was no filter at all."""
    one_line_error(*run_cli("gaps", "--stage", ",,,")[::2], "--stage: no value in ',,,'")


@pytest.mark.parametrize("method,code,needle", [
    ("<script>", 2, "--speculative-config.method: unknown speculative method '<script>'"),
    ("eagl", 2, "did you mean 'eagle'?"),
    ("deepseek_mtp", 0, None),  # vLLM's MTPModelTypes (0.34.0 config/speculative.py:53): a real method
    ("eagle3", 0, None),
])
def test_an_unknown_speculative_method_is_an_error(method, code, needle):
    """hostile_inputs_turn3.md #28: ``fit --speculative-config '{"method": "<script>"}'`` was accepted; vLLM raises
    'Unknown speculative method' at startup (0.34.0 config/speculative.py:1626-1633)."""
    spec = json.dumps({"method": method})
    got = run_cli("check", "--vllm", f"vllm serve {Q} -tp 8 --speculative-config '{spec}'", "--gpu", "H200",
                  "--no-speed")
    if needle:
        one_line_error(got[0], got[2], needle)
        one_line_error(*run_cli("fit", str(SHARED / "data/traces/mooncake_fast25_conversation_trace.jsonl"), "--model",
                                Q, "--gpu", "H200", "--tp", "8", "--speculative-config", spec)[::2], needle)
    else:
        assert got[0] in (0, 1) and "speculative method" not in got[2], got[2]


@pytest.mark.parametrize("version", ["", "1.2.3.4.5.6"])
def test_matrix_refuses_an_engine_version_that_is_no_release(version):
    """Found by make fuzz (the #26 class): ``matrix --engine-version ''`` printed the matrix with exit 0, as if
    no release had been given."""
    one_line_error(*run_cli("matrix", "--engine", "vllm", "--engine-version", version)[::2],
                   "--engine-version: expected an engine version number such as 0.11.0")
