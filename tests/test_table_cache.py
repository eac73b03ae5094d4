"""The content-keyed cache of the shipped tables every ``check`` reads (kg.core.cache.built_from) and the
folder stamp that decides when a per-process copy is stale (kg.core.paths.yaml_files_stamp)."""
from __future__ import annotations

import json
import os

import pytest

from kg.core import cache, paths
from kg.core.errors import OptkgError


def test_built_from_serves_the_entry_and_rebuilds_after_an_edit(tmp_path, cache_dir):
    src = tmp_path / "t.yaml"
    src.write_text("a: 1\n")
    calls = []

    def build():
        calls.append(1)
        return {"a": int(src.read_text().split(":")[1])}

    assert cache.built_from("demo", [src], build) == {"a": 1}
    assert cache.built_from("demo", [src], build) == {"a": 1}
    assert len(calls) == 1  # the second call read the entry
    entries = list(cache_dir.glob("demo-*.json"))
    assert len(entries) == 1
    src.write_text("a: 2\n")  # same size: a content key, not a size/mtime key, sees the change
    assert cache.built_from("demo", [src], build) == {"a": 2}
    assert len(calls) == 2


def test_a_planted_entry_is_a_miss(tmp_path, cache_dir):
    src = tmp_path / "t.yaml"
    src.write_text("a: 1\n")
    key = cache.source_digest([src])
    entry = cache_dir / f"demo-{key[:32]}.json"
    # right name, right key, but the payload was edited after the checksum: rebuilt from the source
    header = {"optkg_cache": cache.FORMAT, "optkg": cache._version(), "kind": "demo", "key": key, "sha256": "0" * 64}
    entry.write_text(json.dumps(header) + "\n" + json.dumps({"a": 666}))
    assert cache.built_from("demo", [src], lambda: {"a": 1}) == {"a": 1}


def test_an_entry_reads_back_the_same_json_values(cache_dir):
    # the payload is marshal data of the JSON value (format 4): types, floats and strings exactly as written, and
    # two equal lists stay two lists (nothing the caller mutates is shared)
    data = {"b": True, "n": None, "i": 2**70, "f": 0.1 + 0.2, "s": "µ\ud800x", "l": [[1], [1]], "e": {}}
    assert cache.write_data(cache_dir / "v.json", "demo", "k", data)
    got = cache.read_data(cache_dir / "v.json", "demo", "k")
    assert got == data and type(got["b"]) is bool and got["f"] == 0.30000000000000004
    assert got["l"][0] is not got["l"][1]
    assert cache.write_data(cache_dir / "t.json", "demo", "k", {"t": (1, 2)}) is False  # not a JSON value: not kept
    header, payload = (cache_dir / "v.json").read_bytes().split(b"\n", 1)
    assert json.loads(header)["py"] == cache._PY and payload[:1] != b"{"


def test_build_errors_are_not_cached(tmp_path, cache_dir):
    src = tmp_path / "t.yaml"
    src.write_text("x\n")

    def bad():
        raise OptkgError(f"{src}:1: broken")

    for _ in range(2):
        with pytest.raises(OptkgError, match="broken"):
            cache.built_from("demo", [src], bad)
    assert not list(cache_dir.glob("demo-*.json"))


def test_folder_stamp_changes_on_rewrite_add_and_remove(tmp_path):
    d = tmp_path / "engines"
    d.mkdir()
    (d / "a.yaml").write_text("engine: a\n")
    (d / "notes.txt").write_text("not a table\n")
    files, s1 = paths.yaml_files_stamp(d)
    assert [os.path.basename(f) for f in files] == ["a.yaml"]
    assert paths.yaml_files_stamp(d)[1] == s1
    (d / "a.yaml").write_text("engine: a, longer\n")
    files, s2 = paths.yaml_files_stamp(d)
    assert s2 != s1
    (d / "b.yaml").write_text("engine: b\n")
    files, s3 = paths.yaml_files_stamp(d)
    assert [os.path.basename(f) for f in files] == ["a.yaml", "b.yaml"] and s3 != s2
    (d / "a.yaml").unlink()
    files, _ = paths.yaml_files_stamp(d)
    assert [os.path.basename(f) for f in files] == ["b.yaml"]
    assert paths.yaml_files_stamp(tmp_path / "missing") == ([], ())


def test_engine_release_and_option_tables_come_from_the_cache_on_a_warm_check(cache_dir):
    from kg.cli import main
    from kg.inputs import effective, stack
    from kg.inputs.launch import argv
    for memo in (stack._TABLES, effective._TABLES, argv._OPTIONS):  # per-process copies from earlier tests
        memo.clear()
    assert main(["check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8", "--gpu", "H100-SXM", "--count", "8",
                 "--fail-on", "never", "--format", "json"]) == 0
    kinds = sorted(p.name.rsplit("-", 1)[0] for p in cache_dir.glob("*.json"))
    for kind in ("engine-tables", "release-tables", "release-options-vllm"):
        assert kind in kinds, kinds


def test_a_file_digest_is_kept_by_stat_only_for_a_file_unchanged_for_seconds(tmp_path, cache_dir, monkeypatch):
    """kg.core.cache.file_digest: SHA-256 of the bytes (hashlib's), kept by path, size, mtime, ctime, inode and
    device, and saved as one cache entry for the next process; an edit changes the ctime, so a same-size edit with
    the old mtime put back is read again; a file changed within DIGEST_AGE_NS is never kept (a second change in the
    same clock tick would keep all six)."""
    import hashlib
    monkeypatch.setattr(cache, "_DIGESTS", None)
    monkeypatch.setattr(cache, "_NEW_DIGESTS", {})
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text("a: 1\n")
    new.write_text("b: 1\n")
    real_now = cache.time.time_ns
    monkeypatch.setattr(cache.time, "time_ns", lambda: os.stat(old).st_ctime_ns + 4_000_000_000)
    assert cache.file_digest(old) == hashlib.sha256(b"a: 1\n").hexdigest()
    monkeypatch.setattr(cache.time, "time_ns", real_now)
    assert cache.file_digest(new) == hashlib.sha256(b"b: 1\n").hexdigest()
    assert list(cache._NEW_DIGESTS.values()) == [hashlib.sha256(b"a: 1\n").hexdigest()]  # only the old file's
    cache.save_digests()
    monkeypatch.setattr(cache, "_DIGESTS", None)  # a new process: the kept digest comes from the entry
    monkeypatch.setattr(cache, "_NEW_DIGESTS", {})
    assert cache.file_digest(old) == hashlib.sha256(b"a: 1\n").hexdigest()
    assert cache._stat_key(old, os.stat(old)) in cache._DIGESTS
    mtime = os.stat(old).st_mtime_ns
    old.write_text("a: 2\n")  # same size, and the mtime put back: the ctime still moves
    os.utime(old, ns=(mtime, mtime))
    assert cache.file_digest(old) == hashlib.sha256(b"a: 2\n").hexdigest()
    assert len(cache.read_data(cache_dir / "source-digests.json", "source-digests", "1")) == 1


def test_saved_file_digests_merge_with_other_processes_and_keep_one_stat_per_path(cache_dir, monkeypatch):
    """Each process saves only what it added, merged into the entry as it is just before the write: one process's
    save does not drop another's; a path's newer stat replaces its older one."""
    a1, a2, b = "/x/a.yaml\0" + "5\0" * 4 + "1", "/x/a.yaml\0" + "6\0" * 4 + "1", "/x/b.yaml\0" + "5\0" * 4 + "1"
    monkeypatch.setattr(cache, "_DIGESTS", {})
    for new in ({a1: "d-a1"}, {b: "d-b"}, {a2: "d-a2"}):  # three processes, each with its own digests in memory
        monkeypatch.setattr(cache, "_NEW_DIGESTS", dict(new))
        cache.save_digests()
    assert cache.read_data(cache_dir / "source-digests.json", "source-digests", "1") == {b: "d-b", a2: "d-a2"}
