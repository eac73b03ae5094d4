"""catalog/support/*.yaml are read on every `optkg check`: their parsed content is cached (kg.core.cache, keyed on
every file's name in the folder and its content) and still checked on a cache hit; an edited file is parsed again."""
import os
import shutil

from conftest import REPO
from kg.knowledge import support


def test_support_files_cached_by_content_and_reparsed_when_edited(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTKG_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "support"
    shutil.copytree(REPO / "catalog" / "support", folder)
    support._load_all.cache_clear()
    first = support.support_files(folder)
    entries = list((tmp_path / "cache").glob("support-*.json"))
    assert len(entries) == 1
    support._load_all.cache_clear()
    again = support.support_files(folder)  # from the cache entry
    assert [(f.engine, f.facts, f.releases) for f in again] == [(f.engine, f.facts, f.releases) for f in first]
    f = sorted(folder.glob("*.yaml"))[0]
    f.write_text(f.read_text().replace("releases:", "releases:\n  9.9.9: {source: \"x.py:1\"}", 1))
    os.utime(f, ns=(1, 1))
    support._load_all.cache_clear()
    edited = support.support_files(folder)
    assert "9.9.9" in [name for _, name, _ in edited[0].releases]
    assert len(list((tmp_path / "cache").glob("support-*.json"))) == 2
    support._load_all.cache_clear()
