"""Trace readers (kg.inputs.traces): Mooncake JSONL and Azure CSV, streaming, with line-numbered errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from kg.core.errors import OptkgError
from kg.analyses.fitmeasure import PartialTraceError, TraceMeasurer, measure_trace
from kg.inputs.traces import detect_format, iter_trace, parse_timestamp_ms, read_azure, read_mooncake

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SMALL = REPO / "rules" / "fixtures" / "traces" / "small_prefix.jsonl"
SMALL_CSV = REPO / "rules" / "fixtures" / "traces" / "small_azure.csv"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_mooncake_reader_yields_requests_with_line_numbers():
    reqs = list(read_mooncake(SMALL))
    assert [r.line for r in reqs] == [1, 2, 3, 4]
    assert [r.input_length for r in reqs] == [1536, 1100, 600, 1800]
    assert [r.output_length for r in reqs] == [100, 50, 20, 200]
    assert [r.timestamp_ms for r in reqs] == [0.0, 1000.0, 2500.0, 4000.0]
    assert reqs[3].hash_ids == (1, 2, 3, 6)


def test_azure_reader_and_timestamps():
    reqs = list(read_azure(SMALL_CSV))
    assert [r.line for r in reqs] == [2, 3, 4]
    assert [(r.input_length, r.output_length) for r in reqs] == [(374, 44), (396, 109), (1200, 20)]
    assert all(r.hash_ids is None for r in reqs)
    # 18:15:50.9951690 - 18:15:46.6805900 = 4.3145790 s = 4314.579 ms (7 fractional digits kept)
    assert reqs[1].timestamp_ms - reqs[0].timestamp_ms == pytest.approx(4314.579, abs=1e-3)


def test_timestamp_forms():
    base = parse_timestamp_ms("2024-05-10 00:00:00")
    assert parse_timestamp_ms("2024-05-10 00:00:00.009930+00:00") - base == pytest.approx(9.93, abs=1e-3)
    # 01:00 at +01:00 is 00:00 UTC
    assert parse_timestamp_ms("2024-05-10T01:00:00+01:00") == base
    assert parse_timestamp_ms("2024-05-10 00:00:01Z") - base == 1000.0
    for bad in ("yesterday", "2024-13-01 00:00:00", "2024-05-10 25:00:00"):
        with pytest.raises(ValueError):
            parse_timestamp_ms(bad)


def test_detect_format():
    assert detect_format(SMALL) == "mooncake"
    assert detect_format(SMALL_CSV) == "azure"
    assert detect_format(SHARED / "data/traces/azure_llm_inference_2023_code.csv") == "azure"


@pytest.mark.parametrize("name,text,line,words", [
    ("notjson.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\nhello\n', 2,
     "not a JSON object"),
    ("array.jsonl", '[1, 2]\n', 1, "expected a JSON object"),
    ("neg_in.jsonl", '{"timestamp": 0, "input_length": -5, "output_length": 1, "hash_ids": []}\n', 1,
     "'input_length' must be a non-negative integer, found -5"),
    ("neg_out.jsonl", '\n{"timestamp": 0, "input_length": 10, "output_length": -1, "hash_ids": [1]}\n', 2,
     "'output_length' must be a non-negative integer, found -1"),
    ("neg_ts.jsonl", '{"timestamp": -1, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n', 1, "'timestamp'"),
    ("missing.jsonl", '{"timestamp": 0, "output_length": 1}\n', 1, "missing field(s) 'input_length', 'hash_ids'"),
    ("boolean.jsonl", '{"timestamp": 0, "input_length": true, "output_length": 1, "hash_ids": [1]}\n', 1, "found True"),
    ("badid.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": ["a"]}\n', 1, "hash_ids[0]"),
    ("mismatch.jsonl", '{"timestamp": 0, "input_length": 1025, "output_length": 1, "hash_ids": [1, 2]}\n', 1,
     "needs ceil(1025/512) = 3 blocks"),
    ("empty.jsonl", "", 1, "empty trace file"),
    ("blank.jsonl", "\n\n", 1, "empty trace file"),
    ("neg.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,1\n2023-11-16 18:15:47.0,-3,1\n", 3,
     "ContextTokens must be a non-negative integer, found -3"),
    ("cols.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10\n", 2, "expected 3 comma-separated fields"),
    ("ts.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nnoon,10,1\n", 2, "TIMESTAMP 'noon' is not a date-time"),
    ("nan.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,ten,1\n", 2, "ContextTokens"),
    ("header.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n", 2, "no requests after the CSV header"),
    ("empty.csv", "", 1, "empty trace file"),
])
def test_bad_input_names_file_and_line(tmp_path, name, text, line, words):
    p = _write(tmp_path, name, text)
    fmt = "azure" if name.endswith(".csv") else "mooncake"
    with pytest.raises(OptkgError) as e:
        list(iter_trace(p, fmt))
    msg = str(e.value)
    assert msg.startswith(f"{p}:{line}:"), msg
    assert words in msg
    assert "\n" not in msg


def test_csv_header_without_the_columns(tmp_path):
    p = _write(tmp_path, "h.csv", "time,prompt,completion\n1,2,3\n")
    with pytest.raises(OptkgError, match=r"h.csv:1: .*cannot tell the trace format"):
        list(iter_trace(p))
    with pytest.raises(OptkgError, match=r"h.csv:1: the CSV header lacks column\(s\) TIMESTAMP, ContextTokens, GeneratedTokens"):
        list(iter_trace(p, "azure"))


def test_non_utf8_line(tmp_path):
    p = tmp_path / "bin.jsonl"
    p.write_bytes(b'{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n\xff\xfe\n')
    with pytest.raises(OptkgError, match=r"bin.jsonl:2: not UTF-8"):
        list(iter_trace(p))


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(OptkgError, match="no such trace file"):
        list(iter_trace(tmp_path / "nope.jsonl", "mooncake"))
    with pytest.raises(OptkgError, match="is a folder"):
        list(iter_trace(tmp_path, "mooncake"))


def test_bad_line_keeps_the_measurement_of_earlier_lines(tmp_path):
    good = SMALL.read_text()
    p = _write(tmp_path, "t.jsonl", good + '{"timestamp": 5000, "input_length": -1, "output_length": 1, "hash_ids": []}\n')
    with pytest.raises(PartialTraceError) as e:
        measure_trace(p)
    assert str(e.value).startswith(f"{p}:5: ")
    part = e.value.partial.summary
    # the four good requests are all there: 6 of 12 blocks hit (see rules/fixtures/traces/README.md)
    assert part["requests"] == 4 and part["last_line"] == 4
    assert part["prefix_reuse"]["blocks_hit"] == 6 and part["prefix_reuse"]["blocks_total"] == 12


def _big_trace(path: Path, lines: int) -> None:
    # 64 conversation prefixes of 4 blocks each ([0, p, p+1000, p+2000]), repeated: distinct blocks
    # and distinct lengths stay fixed however many lines there are.
    with path.open("w") as fh:
        for i in range(lines):
            p = 1 + i % 64
            fh.write(f'{{"timestamp": {i}, "input_length": 2048, "output_length": {i % 7}, '
                     f'"hash_ids": [0, {p}, {p + 1000}, {p + 2000}]}}\n')


def _state_sizes(acc: TraceMeasurer) -> tuple[int, ...]:
    return (len(acc._tick), len(acc._count), len(acc._last_ms), len(acc._tree), len(acc.hist_in), len(acc.hist_out),
            len(acc.hist_req), len(acc.pre_blocks), len(acc.pre_tokens), len(acc.dist_hist), len(acc.interval_hist))


def test_state_does_not_grow_with_lines(tmp_path):
    # Memory is O(distinct blocks + distinct values), not O(lines): the measurer's containers have the
    # same sizes after 4,000 and after 40,000 lines of the same 64 conversations. (tracemalloc would
    # say the same but makes this test 40x slower.)
    sizes = []
    for n in (4_000, 40_000):
        p = tmp_path / f"t{n}.jsonl"
        _big_trace(p, n)
        acc = TraceMeasurer()
        for r in iter_trace(p):
            acc.add(r)
        sizes.append(_state_sizes(acc))
        # 1 shared block + 64 conversations x 3 own blocks = 193 distinct blocks
        assert acc.result().summary["reuse"]["distinct_blocks"] == 193
        assert acc.result().summary["requests"] == n
    assert sizes[0] == sizes[1]


def test_reader_streams(tmp_path):
    # the reader yields the first request before it has read the (broken) last line
    p = _write(tmp_path, "s.jsonl", SMALL.read_text() + "garbage\n")
    it = iter_trace(p)
    assert next(it).line == 1
    with pytest.raises(OptkgError, match=r"s.jsonl:5: "):
        list(it)
