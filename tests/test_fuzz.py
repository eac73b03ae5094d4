"""Property-based fuzzing of every input optkg reads: technique files, stack files, pasted
``vllm serve`` / SGLang commands, metrics files and request traces.

The property: whatever the input, ``optkg`` (run in-process through ``kg.cli.main``) ends in
success (exit 0/1) or refuses it with exit 2 and, when it writes to stderr, exactly one line
``optkg: error: ...`` -- never a traceback, never ``internal error`` (exit 3).

Inputs are real files (the shipped technique entries, the samples in ../shared/data) mutated by
hypothesis: keys deleted, values replaced by values of other types, junk keys, truncation, random
bytes, YAML tags and aliases. ``make test`` runs a small derandomized sample of each target;
``make fuzz`` runs the ``slow`` tests: ``FULL`` (2,100) examples per target, 10,500 in all.
"""
from __future__ import annotations

import copy
import io
import json
import shlex
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO, SHARED
from kg.cli import main

SAMPLE = 25     # examples per target in `make test`
FULL = 2100     # examples per target in `make fuzz` (5 targets -> 10,500)

CATALOG = REPO / "catalog"
METRICS = SHARED / "data" / "metrics"
TRACES = SHARED / "data" / "traces"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def assert_clean(code: int, err: str, what: str) -> None:
    """Success, or exit 2 with one ``optkg: error:`` line; never a traceback."""
    assert "Traceback" not in err and "internal error" not in err, f"{what}\n{err}"
    assert code in (0, 1, 2), f"exit {code} for {what}\n{err}"
    if code == 2 and err.strip():
        lines = err.rstrip("\n").split("\n")
        if lines[0].startswith("usage:"):  # argparse prints its usage line before the error
            lines = [ln for ln in lines if not ln.startswith(("usage:", " "))]
        assert len(lines) == 1 and lines[0].startswith("optkg: error: "), f"{what}\n{err}"


def fuzz(strategy, body, n: int) -> int:
    """Run ``body`` on ``n`` examples of ``strategy``; return how many ran."""
    count = [0]

    @settings(max_examples=n, deadline=None, database=None, derandomize=n <= SAMPLE,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def inner(x):
        count[0] += 1
        body(x)

    inner()
    return count[0]


# ---------------------------------------------------------------------------------------------
# generic mutations

SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=24))
JUNK = st.recursive(SCALARS, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                    max_leaves=8)


def _slots(x, out):
    """Every (container, key) pair inside ``x``."""
    if isinstance(x, dict):
        for k in list(x):
            out.append((x, k))
            _slots(x[k], out)
    elif isinstance(x, list):
        for i in range(len(x)):
            out.append((x, i))
            _slots(x[i], out)
    return out


@st.composite
def mutated(draw, docs):
    """A deep copy of one of ``docs`` with 0-4 random deletions, replacements and additions."""
    doc = copy.deepcopy(draw(st.sampled_from(docs)))
    for _ in range(draw(st.integers(0, 4))):
        slots = _slots(doc, [])
        if not slots:
            break
        cont, key = draw(st.sampled_from(slots))
        op = draw(st.sampled_from(["delete", "replace", "replace", "add"]))
        if op == "delete":
            del cont[key]
        elif op == "replace":
            cont[key] = draw(JUNK)
        elif isinstance(cont, dict):
            cont[draw(st.text(min_size=1, max_size=12))] = draw(JUNK)
        else:
            cont.append(draw(JUNK))
    return doc


YAML_TRICKS = [
    "!!python/object/apply:os.system ['echo pwned']\n",
    "a: &a [1, 2]\nb: [*a, *a, *a]\n",
    "key: !!binary aGVsbG8=\n",
    "\tid: tab-indented\n",
    "id: [unclosed\n",
    "%YAML 1.1\n---\nid: x\n---\nid: y\n",
    "? [complex, key]\n: value\n",
    "id: x\nid: y\n",
    "",
    "- just\n- a\n- list\n",
]


@st.composite
def yaml_bytes(draw, docs):
    """YAML text of a mutated document, sometimes truncated, spliced with junk or YAML tricks, or not UTF-8."""
    doc = draw(mutated(docs))
    try:
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError:
        text = repr(doc)
    how = draw(st.sampled_from(["plain"] * 5 + ["truncate", "splice", "trick", "bytes"]))
    if how == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    elif how == "splice":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.text(max_size=40)) + text[at:]
    elif how == "trick":
        text = draw(st.sampled_from(YAML_TRICKS)) + (text if draw(st.booleans()) else "")
    data = text.encode("utf-8", "surrogatepass") if how != "bytes" else text.encode() + draw(st.binary(min_size=1, max_size=20))
    return data


# ---------------------------------------------------------------------------------------------
# 1. technique files -> `optkg validate` on a one-entry catalog

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
REAL_TECHNIQUES = [yaml.load(p.read_text(encoding="utf-8"), Loader=_LOADER)
                   for p in sorted((CATALOG / "techniques").glob("*.yaml"))]


@pytest.fixture(scope="module")
def tiny_catalog(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzzcat")
    cat = root / "catalog"
    (cat / "techniques").mkdir(parents=True)
    for name in ("axes.yaml", "properties.yaml"):
        (cat / name).write_bytes((CATALOG / name).read_bytes())
    (root / "rules").mkdir()
    return root


def _technique_target(root: Path):
    f = root / "catalog" / "techniques" / "fuzz-entry.yaml"

    def body(data: bytes) -> None:
        f.write_bytes(data)
        for fmt in ("text", "json"):
            code, out, err = run("validate", "--catalog", str(root / "catalog"), "--rules", str(root / "rules"),
                                 "--format", fmt)
            assert_clean(code, err, f"technique file {data[:300]!r}")
            if fmt == "json" and code in (0, 1, 2) and out:
                # the report, or (exit 2 on an input error) the JSON error object of kg.cli
                kind = json.loads(out)["kind"]
                assert kind == "validate" or (kind == "error" and code == 2), (code, out[:300])
    return body


def test_fuzz_technique_files(tiny_catalog):
    assert fuzz(yaml_bytes(REAL_TECHNIQUES), _technique_target(tiny_catalog), SAMPLE) >= SAMPLE


@pytest.mark.slow
def test_fuzz_technique_files_full(tiny_catalog):
    assert fuzz(yaml_bytes(REAL_TECHNIQUES), _technique_target(tiny_catalog), FULL) >= FULL


# ---------------------------------------------------------------------------------------------
# 2. stack files -> `optkg check FILE`

MODELS = sorted(p.stem.replace("__", "/") for p in (CATALOG / "models").glob("*.json"))
TECH_IDS = sorted(t["id"] for t in REAL_TECHNIQUES)
PARAMS = sorted({p["name"] for t in REAL_TECHNIQUES for p in t.get("parameters") or []})
SETTINGS = ["max_model_len", "gpu_memory_utilization", "block_size", "kv_cache_dtype", "tp_size", "dcp_size", "pp_size",
            "kv_budget_gib", "quantization", "enable_prefix_caching", "max_num_seqs", "speculative_method"]
GPUS = ["H100-SXM", "H200", "B200", "A100-80GB", "L40S", "MI300X", "h200", "TPUv9"]
VALUES = st.one_of(st.integers(-3, 70000), st.floats(allow_nan=True), st.booleans(), st.none(),
                   st.sampled_from(["auto", "fp8", "8", "0.9", "", "x", "fp8_e4m3", "int8"]), st.text(max_size=12))


@st.composite
def stack_docs(draw):
    d: dict = {}
    if draw(st.booleans()):
        d["name"] = draw(st.text(max_size=20))
    d["model"] = draw(st.sampled_from(MODELS) | st.sampled_from(["unknown/model", "", "./nope.json"]) | VALUES)
    if draw(st.integers(0, 9)) == 0:
        d["config"] = draw(st.sampled_from(["missing.json", "/dev/null", "."]) | VALUES)
    if draw(st.booleans()):
        d["engine"] = draw(st.sampled_from(["vllm", "sglang", "trtllm", {"name": "vllm", "version": "0.11.0"},
                                            {"name": "vllm", "version": "not-a-version"}]) | JUNK)
    if draw(st.booleans()):
        d["hardware"] = draw(st.fixed_dictionaries({"gpu": st.sampled_from(GPUS) | VALUES,
                                                     "count": st.integers(-2, 64) | VALUES}) | JUNK)
    techs = []
    for _ in range(draw(st.integers(0, 6))):
        tid = draw(st.sampled_from(TECH_IDS) | st.text(max_size=10))
        if draw(st.booleans()):
            techs.append({tid: draw(st.dictionaries(st.sampled_from(PARAMS) | st.text(max_size=6), VALUES, max_size=3)
                                    | JUNK)})
        else:
            techs.append(tid)
    d["techniques"] = techs if draw(st.integers(0, 5)) else draw(JUNK)
    d["settings"] = draw(st.dictionaries(st.sampled_from(SETTINGS) | st.text(max_size=8), VALUES, max_size=4)
                         | st.just({}) | JUNK)
    if draw(st.integers(0, 9)) == 0:
        d[draw(st.text(max_size=8))] = draw(JUNK)
    return d


@pytest.fixture(scope="module")
def stack_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzzstack")


def _stack_target(folder: Path):
    f = folder / "stack.yaml"

    def body(data: bytes) -> None:
        f.write_bytes(data)
        code, out, err = run("check", str(f), "--format", "json", "--fail-on", "never")
        assert_clean(code, err, f"stack file {data[:400]!r}")
        if code == 0:
            assert json.loads(out)["kind"] == "check"
    return body


def stack_bytes():
    return st.one_of(yaml_bytes([{"model": "Qwen/Qwen3-235B-A22B", "engine": "vllm",
                                  "hardware": {"gpu": "H200", "count": 8},
                                  "techniques": [{"tensor-parallelism": {"tp_size": 8}}, "prefix-caching"],
                                  "settings": {"max_model_len": 32768}}]),
                     stack_docs().map(lambda d: yaml.safe_dump(d, allow_unicode=True).encode("utf-8", "surrogatepass")))


def test_fuzz_stack_files(stack_dir):
    assert fuzz(stack_bytes(), _stack_target(stack_dir), SAMPLE) >= SAMPLE


@pytest.mark.slow
def test_fuzz_stack_files_full(stack_dir):
    assert fuzz(stack_bytes(), _stack_target(stack_dir), FULL) >= FULL


# ---------------------------------------------------------------------------------------------
# 3. pasted engine commands -> `optkg check --vllm/--sglang`

TABLES = {e: yaml.load((CATALOG / "engines" / f"{e}.yaml").read_text(encoding="utf-8"), Loader=_LOADER)
          for e in ("vllm", "sglang")}
FLAG_VALUES = st.one_of(st.integers(-5, 100000).map(str), st.sampled_from(
    ["auto", "fp8", "true", "false", "0.95", "1.5", "-1", "nan", "inf", "", "{}", "[]", '{"method": "eagle", "num_speculative_tokens": 3}',
     '{"method": 5}', '{"draft_tensor_parallel_size": 0}', "{bad json", "'", '"', "\\"]), st.text(max_size=12))


@st.composite
def commands(draw):
    engine = draw(st.sampled_from(["vllm", "sglang"]))
    t = TABLES[engine]
    words = []
    if draw(st.integers(0, 4)) == 0:
        words.append(draw(st.sampled_from(["VLLM_USE_V1=1", "VLLM_ATTENTION_BACKEND=FLASHINFER", "X=", "A=b=c"])))
    prog = draw(st.sampled_from(t["programs"] + [["python"], ["vllm"], []]))
    words += prog
    model = draw(st.sampled_from(MODELS) | st.text(max_size=10))
    if engine == "vllm" and draw(st.booleans()):
        words.append(model)
    names = [n for f in t["flags"] for n in f["names"]]
    for _ in range(draw(st.integers(0, 8))):
        name = draw(st.sampled_from(names) | st.sampled_from(["--unknown-flag", "-x", "--"]))
        form = draw(st.sampled_from(["space", "equals", "bare"]))
        if form == "space":
            words += [name, draw(FLAG_VALUES)]
        elif form == "equals":
            words.append(f"{name}={draw(FLAG_VALUES)}")
        else:
            words.append(name)
    if engine == "sglang" and draw(st.booleans()):
        words += ["--model-path", model]
    text = shlex.join(words) if draw(st.integers(0, 4)) else " ".join(words)  # raw join: unbalanced quotes
    if draw(st.integers(0, 9)) == 0:
        text = text.replace(" ", " \\\n  ", 2)
    return engine, text


def _command_body(x) -> None:
    engine, text = x
    code, out, err = run("check", f"--{engine}", text, "--format", "json", "--fail-on", "never")
    assert_clean(code, err, f"--{engine} {text!r}")


def test_fuzz_engine_commands():
    assert fuzz(commands(), _command_body, SAMPLE) >= SAMPLE


@pytest.mark.slow
def test_fuzz_engine_commands_full():
    assert fuzz(commands(), _command_body, FULL) >= FULL


# ---------------------------------------------------------------------------------------------
# 4./5. metrics files -> `optkg diagnose`, traces -> `optkg fit`

def _text_samples(folder: Path, pattern: str, max_lines: int) -> list[tuple[str, list[str]]]:
    out = []
    for p in sorted(folder.glob(pattern)):
        if p.name.endswith(".md"):
            continue
        lines = p.read_text(encoding="utf-8", errors="replace").splitlines()[:max_lines]
        out.append((p.suffix, lines))
    return out


METRIC_SAMPLES = _text_samples(METRICS, "*.*", 400)
TRACE_SAMPLES = _text_samples(TRACES, "*.*", 40)
NUMBERS = st.sampled_from(["NaN", "+Inf", "-Inf", "-1", "0", "1e309", "99999999999999999999", "abc", "", "0x10", "1,5",
                           "[N/A]", "N/A", '"', "{", "}"])


@st.composite
def mutated_lines(draw, samples):
    """One sample file's lines with lines dropped/duplicated/edited, a value swapped, junk inserted or bytes broken."""
    suffix, lines = draw(st.sampled_from(samples))
    lines = list(lines)
    for _ in range(draw(st.integers(0, 5))):
        op = draw(st.sampled_from(["drop", "dup", "number", "junk", "truncate", "swap"]))
        if not lines:
            lines.append(draw(st.text(max_size=30)))
            continue
        i = draw(st.integers(0, len(lines) - 1))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "number":
            toks = lines[i].replace(",", " , ").split(" ")
            j = draw(st.integers(0, len(toks) - 1))
            toks[j] = draw(NUMBERS)
            lines[i] = " ".join(toks).replace(" , ", ",")
        elif op == "junk":
            lines.insert(i, draw(st.text(max_size=60)))
        elif op == "truncate":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        else:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 14)) == 0:
        data += draw(st.binary(min_size=1, max_size=8))
    return suffix, data


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzzdata")


def _metrics_target(folder: Path):
    def body(x) -> None:
        suffix, data = x
        f = folder / f"scrape{suffix}"
        f.write_bytes(data)
        code, out, err = run("diagnose", str(f), "--format", "json", "--fail-on", "never")
        assert_clean(code, err, f"metrics {suffix} {data[:400]!r}")
    return body


def _traces_target(folder: Path):
    def body(x) -> None:
        suffix, data = x
        f = folder / f"trace{suffix}"
        f.write_bytes(data)
        code, out, err = run("fit", str(f), "--format", "json")
        assert_clean(code, err, f"trace {suffix} {data[:400]!r}")
    return body


def test_fuzz_metrics_files(data_dir):
    assert METRIC_SAMPLES, f"no metrics samples in {METRICS}"
    assert fuzz(mutated_lines(METRIC_SAMPLES), _metrics_target(data_dir), SAMPLE) >= SAMPLE


@pytest.mark.slow
def test_fuzz_metrics_files_full(data_dir):
    assert fuzz(mutated_lines(METRIC_SAMPLES), _metrics_target(data_dir), FULL) >= FULL


def test_fuzz_traces(data_dir):
    assert TRACE_SAMPLES, f"no trace samples in {TRACES}"
    assert fuzz(mutated_lines(TRACE_SAMPLES), _traces_target(data_dir), SAMPLE) >= SAMPLE


@pytest.mark.slow
def test_fuzz_traces_full(data_dir):
    assert fuzz(mutated_lines(TRACE_SAMPLES), _traces_target(data_dir), FULL) >= FULL


# ---------------------------------------------------------------------------------------------
# inputs the full fuzz run found; each was an internal error (exit 3) before its fix

def test_found_nvidia_smi_csv_with_bare_carriage_return(data_dir):
    # csv.Error "new-line character seen in unquoted field" escaped kg.inputs.metrics as an internal error
    f = data_dir / "cr.csv"
    f.write_bytes(b"index, memory.used [MiB]\n\r0\n0, 5 MiB\n")
    code, out, err = run("diagnose", str(f))
    assert code == 2
    assert err == (f"optkg: error: {f}:2: not valid CSV (new-line character seen in unquoted field - "
                   "do you need to open the file in universal-newline mode?)\n")


def test_found_endless_config_file():
    # reading /dev/zero (size 0 in stat, never ends) hung `optkg kv --config /dev/zero`
    code, out, err = run("kv", "--config", "/dev/zero")
    assert code == 2 and err.startswith("optkg: error: /dev/zero: file is over the limit of ")


def test_found_newline_in_a_stack_key(stack_dir):
    # a YAML key holding a newline was printed raw inside "unknown field '...'": a two-line error
    # (the single-quoted scalar '<newline><newline>  ' folds to one newline)
    f = stack_dir / "newline-key.yaml"
    f.write_text("model: Qwen/Qwen3-235B-A22B\n? '\n\n  '\n: null\n")
    code, out, err = run("check", str(f))
    assert code == 2
    assert err.startswith(f"optkg: error: {f}:2: unknown field '\\n' (fields: ") and err.count("\n") == 1


def test_found_newline_in_a_pasted_model_name():
    # a quoted newline as --model-path was printed raw inside "unknown model '...'"
    code, out, err = run("check", "--sglang", "python -m sglang.launch_server --model-path '\n'")
    assert code == 2
    assert err.startswith("optkg: error: unknown model '\\n': ") and err.count("\n") == 1


def test_error_messages_escape_line_breaks_but_keep_detail_lines():
    from kg.core.errors import OptkgError
    e = OptkgError("unknown field 'a\nb\r\x00'", ["first problem", "second\nproblem"])
    # one line (issue 26 #29); the detail lines travel beside it (the --format json error lists them)
    assert str(e) == "unknown field 'a\\nb\\r\\x00'"
    assert e.details == ["first problem", "second\\nproblem"]
    assert str(OptkgError("tab\tstays")) == "tab\tstays"
