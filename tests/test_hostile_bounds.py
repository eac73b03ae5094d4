"""Work is bounded before it is done, and every bound is a one-line error that names the limit (and the flag
that raises it): 5,000-digit numbers, nesting 100,000 deep, 20 MB metrics files, 950,000-item YAML lists,
10,000-combination sweeps, a file given as a folder. Never an internal error, never a run that waits.

The reproducers of ../shared/reference/hostile_inputs_turn3.md carry their number in the docstring. The
inputs are built at the size of the report where the refusal happens before the work (a few MB); the
work itself is never timed here (no timed tests): each test checks that the refusal came, and says which.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

from conftest import REPO, run_cli
from test_hostile_numbers import BIG, EXAMPLE, Q, one_line_error

TRAIN = "torchrun --nproc-per-node=8 -m torchtitan.train --job.config_file {}"


def _train(path: Path) -> list[str]:
    return ["check", "--train", TRAIN.format(path), "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100-SXM"]


def test_a_5000_digit_integer_in_a_torchtitan_toml_is_an_error(tmp_path):
    """hostile_inputs_turn3.md #9: ``tensor_parallel_degree = 9...9`` (5,000 digits) ended in ``ValueError: Exceeds
    the limit (4300 digits)``."""
    p = tmp_path / "tt.toml"
    p.write_text(f"[parallelism]\ntensor_parallel_degree = {BIG}\n")
    one_line_error(*run_cli(*_train(p))[::2], f"{p}:2: an integer of thousands of digits")
    p.write_text(f"[parallelism]\ntensor_parallel_degree = {'9' * 40}\n")  # under Python's limit, over any count
    one_line_error(*run_cli(*_train(p))[::2], f"{p}:2: parallelism.tensor_parallel_degree: an integer of more than 30")


def test_a_toml_nested_100000_deep_is_an_error(tmp_path):
    """hostile_inputs_turn3.md #10: ``a = [[[[...`` 100,000 deep ended in ``RecursionError``."""
    p = tmp_path / "tt.toml"
    p.write_text("[parallelism]\na = " + "[" * 100_000 + "\n")
    one_line_error(*run_cli(*_train(p))[::2], f"{p}:2: arrays or tables nested deeper than 64 levels")


def test_a_5000_digit_engine_version_is_an_error():
    """hostile_inputs_turn3.md #11: ``--engine-version 9...9`` ended in ``ValueError`` (4,300 digits)."""
    code, out, err = run_cli("check", "--vllm", f"vllm serve {Q} -tp 8", "--engine-version", BIG)
    one_line_error(code, err, "--engine-version: expected an engine version number such as 0.11.0",
                   "(5000 characters)")


def test_a_baseline_nested_100000_deep_is_an_error_in_check_validate_and_place(tmp_path):
    """hostile_inputs_turn3.md #12: ``--baseline`` of ``[`` x 100,000 ended in ``RecursionError`` (check, validate,
    place)."""
    b = tmp_path / "b.json"
    b.write_text("[" * 100_000 + "\n")
    for argv in (["check", EXAMPLE], ["validate"], ["place", str(REPO / "catalog/techniques/zero-2.yaml")]):
        code, out, err = run_cli(*argv, "--baseline", str(b))
        one_line_error(code, err, f"{b}: JSON nested deeper than 64 levels")


def test_a_sweep_estimated_over_its_time_bound_is_refused_before_it_runs():
    """hostile_inputs_turn3.md #13: ``sweep --tp 1..100 --dcp 1..100`` (10,000 combinations) took 47 s; the limit of
    100,000 allowed ~8 minutes. The first 3 combinations are timed and the rest refused (a combination costs
    a few CPU ms. 90,000 here: with the incremental sweep a combination costs ~1.9 ms on 2 workers, so 10,000 were
    estimated at ~9.5 s, just under the bound; 90,000 are ~84 s, far over it on any machine."""
    axis = ",".join(str(i) for i in range(1, 301))
    code, out, err = run_cli("sweep", "--vllm", f"vllm serve {Q}", "--gpu", "H200", "--count", "65536",
                             "--tp", axis, "--dcp", axis)
    line = one_line_error(code, err, "90,000 combinations would take about", "timed on the first 3",
                          "over the bound of 10 s", "--max-seconds")
    assert out == "", line


def test_sweep_max_seconds_raises_the_bound():
    from kg.analyses.sweep import _refuse_long
    _refuse_long(10_000, 0.004, 60)  # 40 s under a 60 s bound: runs
    import pytest
    from kg.core.errors import OptkgError
    with pytest.raises(OptkgError, match=r"10,000 combinations would take about 40 s \(4.0 ms each"):
        _refuse_long(10_000, 0.004, 10)


def _big_prom(path: Path, mib: float) -> None:
    from conftest import SHARED
    src = (SHARED / "data/metrics/vllm_metrics_datadog_fixture_opt125m.prom").read_text().rstrip("\n") + "\n"
    reps = int(mib * 2**20 / len(src)) + 1
    path.write_text(src * reps)


def test_diagnose_refuses_metrics_over_its_size_cap_before_reading(tmp_path):
    """hostile_inputs_turn3.md #14: a 20 MB Prometheus file took 14 s and 598 MB (no size cap on metrics files).
    The cap (8 MiB for all inputs together) is in the message with the flag that raises it."""
    p = tmp_path / "big.prom"
    _big_prom(p, 20)
    code, out, err = run_cli("diagnose", str(p))
    line = one_line_error(code, err, f"{p}: the metrics inputs hold 20.", "over the limit of 8 MiB per run",
                          "pass --max-input-mib 21")
    assert out == "", line


def test_diagnose_refuses_a_35_mb_nvidia_smi_csv_and_a_folder_over_the_cap(tmp_path):
    """hostile_inputs_turn3.md #15: a 35 MB nvidia-smi CSV (200k rows) took 11 s and 518 MB. A folder of files
    counts all its files against the one cap."""
    from conftest import SHARED
    smi = (SHARED / "data/metrics/nvidia_smi_query-gpu_load__nvidia-h100-80gb-hbm3__590.48.01.csv").read_text()
    head, _, body = smi.partition("\n")
    p = tmp_path / "smi.csv"
    p.write_text(head + "\n" + body * (35 * 2**20 // len(body) + 1))
    one_line_error(*run_cli("diagnose", str(p))[::2], "over the limit of 8 MiB per run", "--max-input-mib 36")
    d = tmp_path / "many"
    d.mkdir()
    for i in range(3):
        _big_prom(d / f"{i}.prom", 3)
    one_line_error(*run_cli("diagnose", str(d))[::2], "over the limit of 8 MiB per run")


def test_diagnose_max_input_mib_lets_a_bigger_input_through(tmp_path):
    p = tmp_path / "big.prom"
    _big_prom(p, 9)
    one_line_error(*run_cli("diagnose", str(p))[::2], "--max-input-mib 10")
    code, out, err = run_cli("diagnose", str(p), "--max-input-mib", "10")
    assert code in (0, 1), err


def test_a_stack_file_with_950000_list_items_is_refused_before_composing(tmp_path):
    """hostile_inputs_turn3.md #16: a 1.9 MB stack file with ``description: [1,1,...]`` was refused only after
    10 s and 419 MB (the 200,000-node limit was checked after composing). The parser's events are counted first,
    so no node is built."""
    p = tmp_path / "huge.yaml"
    p.write_text(Path(EXAMPLE).read_text() + "description: [" + ",".join(["1"] * 950_000) + "]\n")
    with _peak_memory_growth() as peak:
        code, out, err = run_cli("check", str(p))
    one_line_error(code, err, f"{p}:", "document has more than 200,000 nodes")
    # composing took ~400 MB (yaml.compose alone grows the resident set by ~270 MiB); the refusal now peaks at
    # ~60 MiB (the fast path's line map of the first 200,000 items before it gives up)
    assert peak[0] < 100 * 2**20, f"peak {peak[0] / 2**20:.0f} MiB more memory"


@contextmanager
def _peak_memory_growth():
    """Yields a one-item list that holds, after the block, how much the block's peak memory exceeded the memory
    at its start. On Linux the resident set's high-water mark (``VmHWM``), reset on entry through
    ``/proc/self/clear_refs``: free to measure. Elsewhere tracemalloc's peak of Python allocations, which
    makes the block ~8x slower (11.7 CPU-s instead of 1.5 for the 950,000-item file)."""
    peak = [0]
    status = Path("/proc/self/status")
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS (Linux >= 4.0)
    except OSError:
        import tracemalloc
        tracemalloc.start()
        try:
            yield peak
            peak[0] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        return

    def kib(field: str) -> int:
        return int(re.search(rf"^{field}:\s+(\d+) kB", status.read_text(), re.M).group(1)) * 1024

    start = kib("VmRSS")
    yield peak
    peak[0] = kib("VmHWM") - start


def test_evidence_refuses_a_file_as_its_rules_folder_before_fetching_anything():
    """hostile_inputs_turn3.md #17: ``evidence --rules /etc/passwd`` took the file as the rules folder and went on
    to ``pip download vllm`` (offline: waited with no output)."""
    code, out, err = run_cli("evidence", "--rules", "/etc/passwd")
    one_line_error(code, err, "--rules /etc/passwd: not a folder")


def test_invalid_rules_are_one_line_with_the_count(tmp_path):
    """hostile_inputs_turn3.md #29: an invalid ``--rules`` folder printed 2-9 lines (a header and one line per
    problem). Now one line: the first problem, how many more, and the command that lists them; ``--format json``
    still lists every problem in ``details``."""
    import json
    import shutil
    rules = tmp_path / "rules"
    shutil.copytree(REPO / "rules", rules)
    (rules / "bad1.yaml").write_text("ruleset: chekc\nrules: []\n")
    (rules / "bad2.yaml").write_text("ruleset: chekd\nrules: []\n")
    code, out, err = run_cli("check", EXAMPLE, "--rules", str(rules))
    one_line_error(code, err, "invalid rules: ", "unknown ruleset 'chekc'",
                   f"and 1 more (`optkg validate --rules {rules}` lists every one)")
    code, out, err = run_cli("check", EXAMPLE, "--rules", str(rules), "--format", "json")
    d = json.loads(out)
    assert len(d["details"]) == 2 and d["message"] == err.split("optkg: error: ", 1)[1].rstrip("\n")
