"""The on-disk cache stays bounded (kg.core.cache.prune): entries are never rewritten in place, so without a bound
the folder only grows. Past ``$OPTKG_CACHE_MAX_BYTES`` the least recently used entries go until 80 % of it is held;
stale temp files go after an hour; nothing that is not an entry file is touched."""
from __future__ import annotations

import os
import time


from kg.core import cache


def _entry(d, name: str, size: int, age_s: float, now: float):
    p = d / name
    p.write_bytes(b"x" * size)
    os.utime(p, (now - age_s, now - age_s))
    return p


def test_prune_removes_least_recently_used_entries_down_to_80_percent(cache_dir):
    now = time.time()
    # 10 entries of 1,000 bytes, e0 the oldest; limit 8,000 bytes: 10,000 > 8,000, so down to <= 6,400: the 4
    # oldest go (10,000 -> 6,000)
    for i in range(10):
        _entry(cache_dir, f"kind-e{i}.json", 1000, age_s=1000 - i, now=now)
    link = cache_dir / "kind-link.json"
    link.symlink_to(cache_dir / "kind-e0.json")
    other = _entry(cache_dir, "notes.txt", 50_000, age_s=10_000, now=now)
    assert cache.prune(cache_dir, 8000, now) == 4
    left = sorted(p.name for p in cache_dir.glob("kind-e*.json"))
    assert left == [f"kind-e{i}.json" for i in range(4, 10)]
    assert other.exists() and link.is_symlink()  # neither an entry file nor followed


def test_prune_keeps_a_folder_within_the_limit_and_drops_old_temp_files(cache_dir):
    now = time.time()
    for i in range(4):
        _entry(cache_dir, f"kind-e{i}.json", 1000, age_s=5000, now=now)
    old_tmp = _entry(cache_dir, "abc.tmp", 10, age_s=3601, now=now)
    new_tmp = _entry(cache_dir, "def.tmp", 10, age_s=60, now=now)  # a write in progress elsewhere
    assert cache.prune(cache_dir, 4000, now) == 1
    assert len(list(cache_dir.glob("kind-e*.json"))) == 4 and not old_tmp.exists() and new_tmp.exists()


def test_a_write_prunes_once_per_interval_with_the_limit_from_the_environment(cache_dir, monkeypatch):
    now = time.time()
    for i in range(5):
        _entry(cache_dir, f"old-e{i}.json", 1000, age_s=10_000, now=now)
    monkeypatch.setenv("OPTKG_CACHE_MAX_BYTES", "4000")
    assert cache.write_data(cache_dir / "new-e.json", "new", "k", {"a": 1})
    # 5,000 + the new entry (s bytes, header and payload) > 4,000: the oldest go until <= 3,200; the new entry is
    # the most recent, kept: with s <= 200, 2 old entries go (3,000 + s left), else 3
    s = (cache_dir / "new-e.json").stat().st_size
    names = sorted(p.name for p in cache_dir.glob("*.json"))
    assert names == ["new-e.json"] + [f"old-e{i}.json" for i in range(2 if s <= 200 else 3, 5)]
    assert cache.read_data(cache_dir / "new-e.json", "new", "k") == {"a": 1}
    assert (cache_dir / cache.STAMP).exists()
    for i in range(5):  # within PRUNE_EVERY_S of the stamp: the next write does not scan
        _entry(cache_dir, f"more-e{i}.json", 1000, age_s=20_000, now=now)
    assert cache.write_data(cache_dir / "new2-e.json", "new", "k2", {"a": 2})
    assert len(list(cache_dir.glob("more-e*.json"))) == 5


def test_the_limit_defaults_to_one_gib_and_ignores_a_malformed_setting(monkeypatch):
    monkeypatch.delenv("OPTKG_CACHE_MAX_BYTES", raising=False)
    assert cache.max_cache_bytes() == 1024 ** 3
    for bad in ("", "-5", "1e9", "lots", "0"):
        monkeypatch.setenv("OPTKG_CACHE_MAX_BYTES", bad)
        assert cache.max_cache_bytes() == 1024 ** 3
    monkeypatch.setenv("OPTKG_CACHE_MAX_BYTES", "2048")
    assert cache.max_cache_bytes() == 2048
