"""A stack file read through the content-keyed cache (kg.core.yamlio._fast_doc, ``load_yaml(cache=True)``) gives
the data, types and lines a fresh parse gives: a float keeps its text (``0.10`` is not ``0.1``), ``1`` is not
``true``, keys of any scalar type stay in order; an edited file is parsed again; an entry that is not this
code's own is only a miss."""
from __future__ import annotations

from kg.core import cache, yamlio

TEXT = """name: s
engine: {name: vllm, version: 0.10}
settings:
  gpu_memory_utilization: 0.90
  max_model_len: 32768
  enable_x: true
  ratio: .inf
techniques:
  - tensor-parallelism: {tp_size: 8}
  - prefix-caching
odd_keys: {1: one, false: no, null: none, 2.50: f}
"""


def _types(x):
    if isinstance(x, dict):
        return [(_types(k), _types(v)) for k, v in x.items()]
    if isinstance(x, list):
        return [_types(v) for v in x]
    return (type(x).__name__, getattr(x, "text", None), x)


def _entry(text: str):
    import hashlib
    return cache.cache_file(f"yaml-{hashlib.sha256(text.encode()).hexdigest()[:32]}.json")


def test_cached_read_gives_the_fresh_parse(tmp_path):
    f = tmp_path / "stack.yaml"
    f.write_text(TEXT)
    fresh = yamlio.load_yaml(f)
    first = yamlio.load_yaml(f, cache=True)  # parses and writes the entry
    assert _entry(TEXT).is_file()
    second = yamlio.load_yaml(f, cache=True)  # from the entry
    for doc in (first, second):
        assert doc.data == fresh.data and _types(doc.data) == _types(fresh.data)
        assert doc.data["engine"]["version"].text == "0.10"
        assert doc.where(("settings", "max_model_len")) == (5, 3)
        assert doc.lines == fresh.lines  # the full map, built from the text on demand
        assert doc.has_lines() is True


def test_an_edited_file_is_parsed_again(tmp_path):
    f = tmp_path / "stack.yaml"
    f.write_text(TEXT)
    assert yamlio.load_yaml(f, cache=True).data["settings"]["max_model_len"] == 32768
    f.write_text(TEXT.replace("32768", "4096"))
    assert yamlio.load_yaml(f, cache=True).data["settings"]["max_model_len"] == 4096


def test_an_entry_of_another_shape_is_a_miss(tmp_path):
    import hashlib
    text = TEXT.replace("name: s", "name: other")
    key = hashlib.sha256(text.encode()).hexdigest()
    assert cache.write_data(_entry(text), "yaml-doc", key, {"not": "a doc"})  # valid MAC, wrong shape
    assert yamlio.parse_yaml(text, "x.yaml", cache=True).data["name"] == "other"


def test_one_document_stream_reads_as_the_exact_path(tmp_path):
    docs = yamlio.parse_yaml_all(TEXT, "s.yaml", cache=True)
    exact = yamlio.parse_yaml_all(TEXT, "s.yaml")
    assert len(docs) == len(exact) == 1 and _types(docs[0].data) == _types(exact[0].data)
    assert docs[0].lines == exact[0].lines
    assert yamlio.parse_yaml_all("", "e.yaml", cache=True) == []
    assert [d.data for d in yamlio.parse_yaml_all("a: 1\n---\nb: 2\n", "m.yaml", cache=True)] == [{"a": 1}, {"b": 2}]
