"""What optkg may replace or delete in an output folder: only what it can prove it wrote there (kg.core.outdir).

A digest in the folder's own marker is no proof (anyone can compute a user's file's SHA-256 and plant a
manifest); optkg's proof is a record kept outside the folder under a per-user secret key
(kg.core.provenance). These tests plant markers, move folders and drop the record, and check that no
user file is lost, while what optkg itself wrote and no longer generates is still cleaned up.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from conftest import REPO, run_cli

EXAMPLE = str(REPO / "examples" / "qwen3-235b-tp8.yaml")
from export_helpers import TINY  # noqa: E402


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _plant(marker: Path, *names: str) -> None:
    """List ``names`` (files beside ``marker``) in the marker with their true digests, as an attacker can."""
    d = json.loads(marker.read_text())
    for n in names:
        d["files"][n] = {"sha256": _sha(marker.parent / n), "source_sha256": None}
    marker.write_text(json.dumps(d))


@pytest.fixture(scope="module")
def tiny():
    assert (TINY / "axes.yaml").is_file()
    return ["--catalog", str(TINY)]


def test_export_all_keeps_a_user_file_a_planted_manifest_lists(tmp_path, tiny):
    """hostile_inputs_turn3.md #1: ``export --all -o d`` deleted ``d/thesis.tex`` once a planted ``manifest.json``
    listed it with its sha256; now the file stays and the run says it left it."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "thesis.tex").write_text("precious\n")
    (d / "manifest.json").write_text(json.dumps({"generator": "optkg export --all", "files": {}}))
    _plant(d / "manifest.json", "thesis.tex")
    code, out, err = run_cli("export", "--all", *tiny, "-o", str(d))
    assert code == 0, err
    assert (d / "thesis.tex").read_text() == "precious\n"
    assert "removed" not in err
    assert f"left {d / 'thesis.tex'}: no longer generated, and optkg has no record of writing it here" in err


def test_export_site_keeps_user_files_a_planted_marker_lists(tmp_path, tiny):
    """hostile_inputs_turn3.md #2: ``export site -o d`` deleted two user files a planted ``.optkg-generated.json``
    listed with their sha256 (exit 0)."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "thesis.tex").write_text("precious\n")
    (d / "notes.txt").write_text("notes\n")
    (d / ".optkg-generated.json").write_text(json.dumps({"generator": "optkg export site", "files": {}}))
    _plant(d / ".optkg-generated.json", "thesis.tex", "notes.txt")
    code, out, err = run_cli("export", "site", *tiny, "-o", str(d))
    assert code == 0, err
    assert (d / "thesis.tex").read_text() == "precious\n" and (d / "notes.txt").read_text() == "notes\n"


def test_a_planted_marker_does_not_let_optkg_replace_a_user_file_with_a_generated_name(tmp_path, tiny):
    """The replace side of #2: a user's own ``index.html`` listed by a planted marker is not overwritten."""
    d = tmp_path / "www"
    d.mkdir()
    (d / "index.html").write_text("<p>my site</p>\n")
    (d / ".optkg-generated.json").write_text(json.dumps({"generator": "optkg export site", "files": {
        "index.html": {"sha256": _sha(d / "index.html")}}}))
    code, out, err = run_cli("export", "site", *tiny, "-o", str(d))
    assert code == 2, err
    assert "index.html was not written by `optkg export site`" in err and "nothing was written" in err
    assert (d / "index.html").read_text() == "<p>my site</p>\n"


def test_export_site_twice_replaces_its_own_files_without_force(tmp_path, tiny):
    d = tmp_path / "d"
    assert run_cli("export", "site", *tiny, "-o", str(d))[0] == 0
    page = d / "index.html"
    page.write_text(page.read_text() + "<!-- mine -->\n")  # edited since: no longer provably optkg's
    code, _, err = run_cli("export", "site", *tiny, "-o", str(d))
    assert code == 2 and "index.html was not written by" in err
    page.write_text(page.read_text().replace("<!-- mine -->\n", ""))
    assert run_cli("export", "site", *tiny, "-o", str(d))[0] == 0


def _folder(path: Path, **kw):
    from kg.core.outdir import OwnedFolder
    return OwnedFolder(path, generator="optkg test", **kw)


def test_a_file_optkg_wrote_and_no_longer_generates_is_removed(tmp_path):
    f = _folder(tmp_path)
    f.check(["a.txt", "b.txt"])
    f.write("a.txt", "A\n")
    f.write("b.txt", "B\n")
    f.finish()
    g = _folder(tmp_path)
    g.check(["a.txt"])
    g.write("a.txt", "A2\n")
    logged: list[str] = []
    assert g.remove_stale(["a.txt"], logged.append) == [tmp_path / "b.txt"]
    assert not (tmp_path / "b.txt").exists() and logged == [f"removed {tmp_path / 'b.txt'} (no longer generated)"]


def test_without_optkgs_record_nothing_is_removed_even_with_force(tmp_path, monkeypatch):
    """The marker alone (a folder copied from elsewhere, or the record gone) proves nothing: the stale file is listed."""
    f = _folder(tmp_path)
    f.write("b.txt", "B\n")
    f.finish()
    monkeypatch.setenv("OPTKG_STATE_DIR", str(tmp_path.parent / "another-users-state"))
    g = _folder(tmp_path, force=True)
    logged: list[str] = []
    assert g.remove_stale([], logged.append) == []
    assert (tmp_path / "b.txt").read_text() == "B\n"
    assert logged == [f"left {tmp_path / 'b.txt'}: no longer generated, and optkg has no record of writing it here "
                      "(remove it yourself if it is stale)"]


def test_the_record_holds_for_its_own_folder_only(tmp_path):
    """A copy of a folder optkg wrote (same marker, same files) is not optkg's: its record is keyed by the real path."""
    src, copy = tmp_path / "src", tmp_path / "copy"
    src.mkdir()
    f = _folder(src)
    f.write("b.txt", "B\n")
    f.finish()
    shutil.copytree(src, copy)
    assert _folder(copy).remove_stale([]) == [] and (copy / "b.txt").is_file()
    with pytest.raises(Exception, match="b.txt was not written by `optkg test`"):
        _folder(copy).check(["b.txt"])


def test_a_forged_record_is_not_trusted(tmp_path):
    """The record's MAC needs this user's key: a record edited to list another file verifies no more."""
    from kg.core import provenance
    (tmp_path / "thesis.tex").write_text("precious\n")
    f = _folder(tmp_path)
    f.write("b.txt", "B\n")
    f.finish()
    rec = next((Path(provenance.state_dir()) / "written").glob("*.json"))
    recs = [p for p in (Path(provenance.state_dir()) / "written").glob("*.json")
            if json.loads(p.read_text())["folder"] == str(tmp_path.resolve())]
    rec = recs[0]
    d = json.loads(rec.read_text())
    d["files"]["thesis.tex"] = _sha(tmp_path / "thesis.tex")
    rec.write_text(json.dumps(d))
    assert _folder(tmp_path).remove_stale(["b.txt"]) == [] and (tmp_path / "thesis.tex").is_file()


def test_new_refuses_an_output_folder_that_is_a_symbolic_link(tmp_path):
    """hostile_inputs_turn3.md #5: ``new fresh-tech-x -o LINK`` wrote through a link into the folder it points to."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "L").symlink_to(victim)
    code, out, err = run_cli("new", "fresh-tech-x", "-o", str(tmp_path / "L"))
    assert code == 2, out + err
    assert err.startswith(f"optkg: error: -o {tmp_path / 'L'}: is a symbolic link to {victim}; refusing to write")
    assert list(victim.iterdir()) == []


def _prime(cache: Path) -> dict:
    code, out, err = run_cli("check", EXAMPLE, "--format", "json")
    assert code in (0, 1), err
    assert list(cache.glob("catalog-*.json")), sorted(p.name for p in cache.iterdir())
    return json.loads(out)


def test_a_cache_entry_rewritten_with_its_checksum_is_not_trusted(tmp_path, monkeypatch):
    """hostile_inputs_turn3.md #6: a catalog cache entry whose body was edited and whose header got the body's new
    sha256 was trusted (``unknown technique 'tensor-parallelism'``). The header's MAC needs this user's key."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("OPTKG_CACHE_DIR", str(cache))
    ref = _prime(cache)
    for f in cache.glob("catalog-*.json"):
        head, payload = f.read_bytes().split(b"\n", 1)
        edited = payload.replace(b"tensor-parallelism", b"tensor-parallelisZ")  # same length: a well-formed payload
        assert edited != payload
        payload = edited
        h = json.loads(head)
        digest = hashlib.sha256(payload).hexdigest()
        h["sha256"] = digest
        h["mac"] = digest
        f.write_bytes(json.dumps(h).encode() + b"\n" + payload)
    code, out, err = run_cli("check", EXAMPLE, "--format", "json")
    assert code in (0, 1), err
    got = json.loads(out)
    assert got["findings"] == ref["findings"] and got["stack"] == ref["stack"]


def test_the_cache_is_off_without_a_usable_key(tmp_path, monkeypatch):
    """A state folder others can write gives no key: nothing is cached (and nothing cached is read)."""
    cache, state = tmp_path / "cache", tmp_path / "state"
    state.mkdir(mode=0o777)
    state.chmod(0o777)
    monkeypatch.setenv("OPTKG_CACHE_DIR", str(cache))
    monkeypatch.setenv("OPTKG_STATE_DIR", str(state))
    from kg.core import cache as c
    assert c.write_data(cache / "x.json", "k", "key", {"a": 1}) is False
    assert not (cache / "x.json").exists()
