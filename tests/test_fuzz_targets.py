"""Fuzz targets for the inputs tests/test_fuzz.py does not cover (issue 17): config.json for
``optkg kv``, flag lists for ``optkg sweep``, and hostile technique names for ``optkg export``.

Each target checks the verdicts of ../shared/reference/hostile_inputs.md: no traceback (exit 0/1, or
exit 2 with one ``optkg: error:`` line), no hang (bounded: each example's CPU time), no security
issue (no raw terminal escape on stdout/stderr, no raw ``<script``/``onerror`` in markdown, SVG text
or Mermaid labels), no data loss (the export folder holds only optkg's files). ``make test`` runs a
small derandomized sample; ``make fuzz`` the full size (with tests/test_fuzz.py: over 10,000 inputs).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import strategies as st

from conftest import REPO
from test_fuzz import JUNK, SAMPLE, assert_clean, fuzz, mutated, run

FULL_KV = 1500
FULL_SWEEP = 500
FULL_EXPORT = 150
CPU_LIMIT = 10.0
QWEN32 = json.loads((REPO / "catalog" / "models" / "Qwen__Qwen3-32B.json").read_text())
DEEPSEEK = json.loads((REPO / "catalog" / "models" / "deepseek-ai__DeepSeek-V3.json").read_text()) \
    if (REPO / "catalog" / "models" / "deepseek-ai__DeepSeek-V3.json").is_file() else QWEN32
HOSTILE_TEXT = st.sampled_from(["\x1b]0;HACK\x07", "\x1b[2J", "<script>alert(1)</script>", "<img src=x onerror=alert(2)>",
                                "[x](javascript:alert(3))", "\n::error::INJECTED", "\u202e", "| a | b |", "{tp_size.__class__}",
                                "9" * 5000, "%0A", "]]>", '"];x[label="y'])
BIG_NUMBERS = st.sampled_from([0, -1, 1, 2**40, 10**12 + 1, 10**30, 10**400, 1e308, float("nan"), float("inf"), 1.5, "8",
                               "abc", None, True, [], {}, [[1]]])


def clean_or_refused(code: int, err: str, what: str) -> None:
    """Like test_fuzz.assert_clean, but a refused catalog may list its problems after the first line."""
    assert "Traceback" not in err and "internal error" not in err, f"{what}\n{err}"
    assert code in (0, 1, 2), f"exit {code} for {what}\n{err}"
    if code == 2:
        assert err.startswith("optkg: error: "), f"{what}\n{err}"


def no_raw_escapes(out: str, err: str, what: str) -> None:
    for s in (out, err):
        assert "\x1b" not in s and "\x07" not in s and "\u202e" not in s, f"raw control character reached the terminal: {what}"


def cpu_bounded(fn):
    t = time.process_time()
    r = fn()
    assert time.process_time() - t < CPU_LIMIT, "over the CPU limit"
    return r


# ---------------------------------------------------------------------------------------------
# config.json -> optkg kv

KV_KEYS = ["num_attention_heads", "num_hidden_layers", "num_key_value_heads", "head_dim", "hidden_size",
           "max_position_embeddings", "num_experts", "decoder_sparse_step", "mlp_only_layers", "sliding_window",
           "max_window_layers", "use_sliding_window", "kv_lora_rank", "qk_rope_head_dim", "torch_dtype",
           "rope_scaling", "quantization_config", "vocab_size", "intermediate_size", "layer_types"]


@st.composite
def configs(draw) -> bytes:
    base = dict(draw(st.sampled_from([QWEN32, DEEPSEEK])))
    for _ in range(draw(st.integers(0, 4))):
        base[draw(st.sampled_from(KV_KEYS))] = draw(BIG_NUMBERS | JUNK)
    how = draw(st.sampled_from(["json"] * 6 + ["nan", "deep", "digits", "truncate"]))
    try:
        text = json.dumps(base)
    except (ValueError, TypeError):
        text = "{}"
    if how == "nan":
        text = text.replace("}", ', "max_position_embeddings": NaN}', 1)
    elif how == "deep":
        text = '{"a": ' + "[" * 3000 + "]" * 3000 + "}"
    elif how == "digits":
        text = text.replace("}", ', "num_hidden_layers": ' + "9" * 5000 + "}", 1)
    elif how == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    return text.encode()


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz17")


def _kv_target(folder: Path):
    f = folder / "config.json"

    def body(data: bytes) -> None:
        f.write_bytes(data)
        tp = "8" if data[:1] == b"{" and b"DeepSeek" in data else "1"
        code, out, err = cpu_bounded(lambda: run("kv", "--config", str(f), "--tp", tp, "--kv-budget-gib", "10"))
        assert_clean(code, err, f"config.json {data[:300]!r}")
        no_raw_escapes(out, err, "kv")
    return body


def test_fuzz_kv_configs(work):
    assert fuzz(configs(), _kv_target(work), SAMPLE) >= SAMPLE


@pytest.mark.slow
def test_fuzz_kv_configs_full(work):
    assert fuzz(configs(), _kv_target(work), FULL_KV) >= FULL_KV


# ---------------------------------------------------------------------------------------------
# flag lists -> optkg sweep

LIST_ITEMS = st.sampled_from(["1", "2", "4", "8", "0", "-1", "²", "٨", "65537", "9" * 5000, "", " ", "1..8", "x", "3"])
DTYPES = st.sampled_from(["auto", "fp8", "fp9", "", "auto,,fp8", "bf16"])


@st.composite
def sweeps(draw) -> list[str]:
    argv = ["sweep", "--vllm", draw(st.sampled_from([
        "vllm serve Qwen/Qwen3-235B-A22B", "vllm serve Qwen/Qwen3-235B-A22B -ep --num-redundant-experts 999999999997",
        "vllm serve Qwen/Qwen3-32B --block-size 100000000001 -dcp 2", "vllm serve"])), "--gpu",
            draw(st.sampled_from(["H200", "B200", "", "\x1b[31m"])), "--count", draw(st.sampled_from(["8", "0", "1"]))]
    for flag in ("--tp", "--dcp", "--pp"):
        if draw(st.booleans()):
            argv += [flag, ",".join(draw(st.lists(LIST_ITEMS, min_size=1, max_size=4)))]
    if draw(st.booleans()):
        argv += ["--kv-cache-dtype", draw(DTYPES)]
    if draw(st.booleans()):
        argv += ["--kv-budget-gib", draw(st.sampled_from(["1e308", "nan", "-1", "10", "inf"]))]
    return argv


def _sweep_body(argv: list[str]) -> None:
    code, out, err = cpu_bounded(lambda: run(*argv, "--format", "json"))
    assert_clean(code, err, " ".join(a[:60] for a in argv))
    no_raw_escapes(out, err, "sweep")


def test_fuzz_sweep_flags():
    assert fuzz(sweeps(), _sweep_body, SAMPLE) >= SAMPLE


@pytest.mark.slow
def test_fuzz_sweep_flags_full():
    assert fuzz(sweeps(), _sweep_body, FULL_SWEEP) >= FULL_SWEEP


# ---------------------------------------------------------------------------------------------
# hostile technique names -> optkg export (markdown matrix row, SVG, Mermaid, DOT) and check text

TECH = yaml.safe_load((REPO / "catalog" / "techniques" / "prefix-caching.yaml").read_text())


@st.composite
def hostile_techniques(draw) -> dict:
    t = dict(TECH)
    t.update(id="evil-tech", aliases=[], tags=["kv-cache"])
    t["name"] = "Evil " + "".join(draw(st.lists(HOSTILE_TEXT, min_size=1, max_size=3)))[:400]
    t["summary"] = draw(HOSTILE_TEXT)
    if draw(st.booleans()):
        t = draw(mutated([t]))
        t["id"] = "evil-tech"
    return t


@pytest.fixture(scope="module")
def evil_home(tmp_path_factory):
    import shutil
    h = tmp_path_factory.mktemp("evilhome")
    shutil.copytree(REPO / "catalog", h / "catalog")
    shutil.copytree(REPO / "rules", h / "rules")
    (h / "out").mkdir()
    return h


def _export_target(h: Path):
    f = h / "catalog" / "techniques" / "evil-tech.yaml"

    def body(t: dict) -> None:
        try:
            f.write_text(yaml.safe_dump(t, sort_keys=False, allow_unicode=True))
        except (yaml.YAMLError, UnicodeEncodeError):
            return
        common = ["--catalog", str(h / "catalog"), "--rules", str(h / "rules")]
        for fmt, suffix in (("mermaid", "mmd"), ("svg", "svg")):
            out_file = h / "out" / f"g.{suffix}"
            code, out, err = cpu_bounded(lambda: run("export", "graph", *common, "--focus", "prefix-caching", "--format", fmt,
                                                     "-o", str(out_file), "--force"))
            clean_or_refused(code, err, f"export {fmt} of {t.get('name')!r}")
            no_raw_escapes(out, err, "export")
            if code == 0 and out_file.is_file():
                text = out_file.read_text(encoding="utf-8", errors="replace")
                assert "<script" not in text and "<img" not in text, f"raw HTML in the {fmt} export"
        code, out, err = cpu_bounded(lambda: run("check", str(REPO / "examples" / "qwen3-235b-tp8.yaml"), *common,
                                                 "--format", "markdown"))
        clean_or_refused(code, err, "check --format markdown")
        assert "<script" not in out and "<img" not in out, "raw HTML in check --format markdown"
        assert {p.name for p in (h / "out").iterdir()} <= {"g.mmd", "g.svg"}, "stray files in the output folder"
    return body


def test_fuzz_export_names(evil_home):
    assert fuzz(hostile_techniques(), _export_target(evil_home), 2) >= 2


@pytest.mark.slow
def test_fuzz_export_names_full(evil_home):
    assert fuzz(hostile_techniques(), _export_target(evil_home), FULL_EXPORT) >= FULL_EXPORT
