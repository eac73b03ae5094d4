"""A small on-disk cache of validated plain data (catalog, rulesets), keyed by the caller's content digest.

Folder: ``$OPTKG_CACHE_DIR``, default ``~/.cache/optkg``. Nothing in an entry can run code when it is
read: an entry holds plain JSON data only (dicts, lists, strings, numbers, booleans, None; the caller rebuilds
its objects from it), never a pickle.

Entry format (``<name>.json``): one JSON header line, then the payload::

    {"optkg_cache": 4, "optkg": "<version>", "kind": "<kind>", "key": "<digest of the sources>",
     "mac": "<HMAC-SHA256 of kind, key and payload under this user's key>"}
    <payload: that JSON data in the interpreter's marshal format>

The payload is marshal's encoding of the data (format 3 held its JSON text): the same values, decoded ~1.9x
faster (a warm ``optkg check`` decodes ~2.6 MB of entries: ~15 -> ~8 ms). Only data that is exactly a JSON
value is written (``write_data``), and a payload is decoded only after its MAC verifies, so what ``marshal``
reads was written by this user's optkg; marshal makes values, it runs nothing. Its encoding belongs to the
interpreter's version, which the header names (``py``): another Python's entries are misses.

``read_data`` returns the payload only when the header names this format, this optkg version, the
expected kind and key, and the MAC verifies under this user's secret key (kg.core.provenance, kept in
the private state folder, never in the cache folder). A checksum would not do: whoever rewrites an
entry's body can recompute its SHA-256 too (issue 26 #6); without the key no edited entry verifies.
Anything else (a truncated, edited, foreign or corrupt entry, a symbolic link, a folder, a file over
``MAX_ENTRY_BYTES``) is a miss, the entry is removed, and the caller rebuilds it from the sources. The
cache is used only in a folder that this user owns and that no one else can write (not group- or
world-writable), and only when the key can be used; otherwise it is off. Writes are atomic (temp file
+ rename); a folder that cannot be written only costs speed. ``write_data`` stores only data that reads
back equal (JSON keeps no tuples, non-string keys or dates: such data is simply not cached).

The folder is bounded: entries are never rewritten in place (a changed source makes a new key, a new optkg
release a new header), so without a bound it only grows (a development machine reached 10,284 entries, 3.5 GB).
After a write, at most once per ``PRUNE_EVERY_S`` (a stamp file's time), ``prune`` removes the least recently
used entries (by the later of access and modification time; Linux ``relatime`` updates access times at most
daily) until the folder holds 80 % of ``$OPTKG_CACHE_MAX_BYTES`` (default ``MAX_CACHE_BYTES``, 1 GiB), and
temp files a crashed write left behind an hour ago. A removed entry is a miss, rebuilt from its sources.
"""
from __future__ import annotations

import json
import marshal
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

from kg.core.digest import sha256_hex
from kg.core.provenance import folder_is_private, key as _user_key, mac, verify

FORMAT = 4
MARSHAL_VERSION = 4  # shares equal strings (immutable) only: the data written is a fresh tree from json.loads
MAX_ENTRY_BYTES = 64 * 1024 * 1024
MAX_CACHE_BYTES = 1024 ** 3  # the folder's bound ($OPTKG_CACHE_MAX_BYTES): pruned to 80 % of it (module doc)
PRUNE_EVERY_S = 600
STAMP = ".pruned"


_PY = f"{sys.implementation.cache_tag}-marshal{MARSHAL_VERSION}"  # whose marshal encoding the payload is in


def _version() -> str:
    return str(getattr(sys.modules.get("kg"), "__version__", "0"))


def cache_dir() -> Path:
    return Path(os.environ.get("OPTKG_CACHE_DIR") or (Path.home() / ".cache" / "optkg"))


def cache_file(name: str) -> Path:
    """The cache path for entry ``name`` (e.g. ``catalog-<digest>.json``)."""
    return cache_dir() / name


def _drop(path: Path) -> None:
    try:
        if path.is_symlink() or path.is_file():
            path.unlink()
    except OSError:  # a stale entry that cannot be removed is only re-verified (and ignored) next time
        pass


def read_data(path: Path, kind: str, key: str) -> Any | None:
    """The payload of the entry at ``path`` if it is valid for ``kind`` and ``key`` (see module doc), else None."""
    if not folder_is_private(path.parent) or _user_key() is None:
        return None
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError:  # a symbolic link (ELOOP), a folder, unreadable
        _drop(path)
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
            raise ValueError("not a regular file of sane size")
        with open(fd, "rb") as fh:  # builtin open on the fd: no path lookup again (no symlink race)
            fd = -1
            raw = fh.read(MAX_ENTRY_BYTES + 1)
        head, sep, payload = raw.partition(b"\n")
        if not sep:
            raise ValueError("no header")
        h = json.loads(head)
        if not (isinstance(h, dict) and h.get("optkg_cache") == FORMAT and h.get("optkg") == _version()
                and h.get("py") == _PY and h.get("kind") == kind and h.get("key") == key
                and verify(h.get("mac"), "cache", kind, key, payload)):
            raise ValueError("header does not match")
        return marshal.loads(payload)
    except (OSError, ValueError, EOFError, TypeError, RecursionError):  # corrupt, edited, foreign or old: drop it, rebuild
        _drop(path)
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def write_data(path: Path, kind: str, key: str, data: Any) -> bool:
    """Store ``data`` (plain JSON data) at ``path`` atomically; False (and nothing left behind) when it cannot."""
    try:
        text = json.dumps(data, separators=(",", ":"), allow_nan=False)
        plain = json.loads(text)
        if plain != data:  # tuples, int keys, ...: would not read back as written
            return False
        payload = marshal.dumps(plain, MARSHAL_VERSION)  # the JSON value itself: no shared lists or dicts
    except (TypeError, ValueError, RecursionError):
        return False
    tag = mac("cache", kind, key, payload)
    if tag is None:  # no usable key: nothing could be verified when read back, so nothing is stored
        return False
    import tempfile  # only a write pays for it: a warm run reads entries and never imports it
    header = json.dumps({"optkg_cache": FORMAT, "optkg": _version(), "py": _PY, "kind": kind, "key": key,
                         "mac": tag}).encode()
    tmp = None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not folder_is_private(path.parent):
            return False
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with open(fd, "wb") as fh:
            fh.write(header + b"\n" + payload)
        if path.is_symlink():
            path.unlink()
        os.replace(tmp, path)
        _prune_if_due(path.parent)
        return True
    except OSError:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
        return False


def max_cache_bytes() -> int:
    """``$OPTKG_CACHE_MAX_BYTES`` (a positive whole number of bytes), else ``MAX_CACHE_BYTES``."""
    raw = os.environ.get("OPTKG_CACHE_MAX_BYTES", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else MAX_CACHE_BYTES


def _prune_if_due(folder: Path) -> None:
    """``prune`` the folder when its stamp is older than ``PRUNE_EVERY_S`` (or missing), and renew the stamp."""
    import time
    stamp = folder / STAMP
    now = time.time()
    try:
        if now - os.lstat(stamp).st_mtime < PRUNE_EVERY_S:
            return
    except FileNotFoundError:  # no stamp yet: this folder was never pruned, prune it now
        pass
    except OSError:
        return
    try:
        if os.path.islink(stamp):
            return
        os.close(os.open(stamp, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600))  # the stamp exists
        os.utime(stamp, (now, now))
    except OSError:
        return
    prune(folder, max_cache_bytes(), now)


def prune(folder: Path, limit: int, now: float) -> int:
    """Remove the least recently used entries of ``folder`` until it holds at most 80 % of ``limit`` bytes (nothing
    when it holds ``limit`` or less), and ``.tmp`` files older than an hour; returns how many files were removed.
    Only regular files named ``*.json`` / ``*.tmp`` are touched (never a link, a folder or another file)."""
    entries, total, removed = [], 0, 0
    try:
        with os.scandir(folder) as it:
            for e in it:
                if not (e.name.endswith(".json") or e.name.endswith(".tmp")) or not e.is_file(follow_symlinks=False):
                    continue
                st = e.stat(follow_symlinks=False)
                if e.name.endswith(".tmp"):
                    if now - st.st_mtime > 3600:
                        removed += _unlink(e.path)
                    continue
                total += st.st_size
                entries.append((max(st.st_atime, st.st_mtime), e.name, st.st_size, e.path))
    except OSError:
        return removed
    if total <= limit:
        return removed
    entries.sort()
    for _, _, size, p in entries:
        if total <= limit * 0.8:
            break
        if _unlink(p):
            total -= size
            removed += 1
    return removed


def _unlink(p: str) -> int:
    try:
        os.unlink(p)
        return 1
    except OSError:  # gone already (another process pruned it), or not ours to remove: only space is lost
        return 0


def source_digest(files: list[Path]) -> str:
    """sha256 over the names and the content digests of ``files`` (in the order given): the key of data built from
    them. A file is named by its place in the folder that holds them all (``rooted``, ``common_folder``), so a copy
    of that folder elsewhere has the same key; its digest is SHA-256 of its bytes (``file_digest``)."""
    root = common_folder(files)
    parts = [b"rooted\0"]
    for f in files:
        parts += [(rooted(f, root) if root else str(f)).encode(), b"\0", file_digest(f).encode(), b"\0"]
    return sha256_hex(parts)


def common_folder(files: list[Path]) -> str:
    """The deepest folder holding every one of ``files`` (as they are written: absolute or relative), or "" when
    there is none (no files, or absolute and relative mixed)."""
    try:
        return os.path.commonpath([os.path.dirname(str(f)) for f in files]) if files else ""
    except ValueError:
        return ""


# A file's content digest kept by its stat (git's index does the same: "racy git"): a warm ``check`` keyed its
# entries on ~3.8 MB of sources read and hashed each run (the four engine-sites files for a 1 KB index alone).
# The key is the path, size, mtime, ctime, inode and device: writing a file changes its ctime, which no program
# can set back, so an edited file is read again. A digest is kept only for a file last changed over DIGEST_AGE_NS
# before it was read (a change within the same clock tick as the read could keep all six); the rest are hashed
# every time. The kept digests are one entry of this cache (MAC-checked like the others), saved once per process.
DIGEST_AGE_NS = 3_000_000_000
MAX_DIGESTS = 4096
_DIGESTS: dict[str, str] | None = None  # loaded from the entry on first use
_NEW_DIGESTS: dict[str, str] = {}


def _stat_key(f: object, st: os.stat_result) -> str:
    return f"{f}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\0{st.st_dev}"


def file_digest(f: Path | str) -> str:
    """SHA-256 (hex) of the bytes of file ``f``, from the kept digests when its stat is unchanged (see above).
    Raises OSError as reading the file would."""
    global _DIGESTS
    st = os.stat(f)
    if _DIGESTS is None:
        got = read_data(cache_file("source-digests.json"), "source-digests", "1")
        _DIGESTS = got if isinstance(got, dict) else {}
    k = _stat_key(f, st)
    hit = _DIGESTS.get(k)
    if isinstance(hit, str):
        return hit
    with open(f, "rb") as fh:
        st = os.fstat(fh.fileno())
        data = fh.read()
    out = sha256_hex([data])
    if stat.S_ISREG(st.st_mode) and st.st_size == len(data) and \
            time.time_ns() - max(st.st_ctime_ns, st.st_mtime_ns) > DIGEST_AGE_NS:
        _DIGESTS[_stat_key(f, st)] = _NEW_DIGESTS[_stat_key(f, st)] = out
    return out


def save_digests() -> None:
    """Store the file digests kept since the entry was read (nothing when none is new); ``kg.cli.main`` calls it
    once per process. The entry is read again and merged just before the write (other processes may have added
    theirs meanwhile), a path keeps only its newest stat, and past MAX_DIGESTS the entry starts from the new ones."""
    if not _NEW_DIGESTS or _DIGESTS is None:
        return
    path = cache_file("source-digests.json")
    now = read_data(path, "source-digests", "1")
    keep = now if isinstance(now, dict) and len(now) + len(_NEW_DIGESTS) <= MAX_DIGESTS else {}
    fresh = {k.split("\0", 1)[0] for k in _NEW_DIGESTS}
    keep = {k: v for k, v in keep.items() if k.split("\0", 1)[0] not in fresh}
    keep.update(_NEW_DIGESTS)
    write_data(path, "source-digests", "1", keep)
    _NEW_DIGESTS.clear()


# Entries built from the files of one folder (the catalog, a rules folder) name those files by their place in the
# folder, not by where the folder is: a copy of the folder elsewhere (a second checkout, a worktree, the catalog
# copies the tests make) reads the same entry. The data holds the folder's paths (each technique's and rule's file,
# a warning's file); they are written beside the folder they were built in (``"root"``) and moved to the reading
# folder on a hit (``moved``). An entry whose data names its folder anywhere else (a message quoting a path) is
# ``pinned``: another folder treats it as a miss, rebuilds, and gets exactly what a build there gives.
def rooted(f: Path | str, root: Path | str) -> str:
    """The name a cache key gives file ``f`` of folder ``root``: ``./`` and its path inside the folder (a ``str`` of a
    ``Path`` never starts with ``./``), or its full path when it lies outside."""
    s, r = str(f), str(root)
    return "./" + s[len(r) + 1:] if s.startswith(r + os.sep) else s


def moved(s: str, old: str, new: str) -> str:
    """Path ``s`` with the folder ``old`` it lies in replaced by ``new``; ``s`` itself when it does not lie in ``old``."""
    return new + s[len(old):] if old != new and s.startswith(old + os.sep) else s


def mentions(data: Any, text: str) -> bool:
    """True when any string of plain data ``data`` (a dict's keys too) contains ``text``."""
    if isinstance(data, str):
        return text in data
    if isinstance(data, dict):
        return any(mentions(k, text) or mentions(v, text) for k, v in data.items())
    if isinstance(data, (list, tuple)):
        return any(mentions(v, text) for v in data)
    return False


def built_from(kind: str, files: list[Path], build: Any) -> Any:
    """``build()`` (plain data parsed from ``files``), served from a content-keyed entry when one is valid.

    The entry is ``<kind>-<digest>.json`` keyed on every byte of ``files`` and their names in their folder
    (``source_digest``), so an edit to any of them rebuilds it, and a copy of the folder elsewhere reads it unless
    the data names the folder (then it is pinned to it, see ``rooted``); reading it goes through ``read_data`` (private folder, no links, checksum),
    so a planted or damaged entry is only a miss. ``build`` raises as it would without a cache (its
    errors are never cached). Used for the shipped engine and release tables that every ``check`` reads.
    """
    key = source_digest(files)
    path = cache_file(f"{kind}-{key[:32]}.json")
    root = common_folder(files)
    got = read_data(path, kind, key)
    # the entry is {"root": the files' folder, "pinned": whether the data names it, "data": ...}: data that names
    # its folder serves only that folder (a copy elsewhere rebuilds and gets its own paths), the rest any copy
    if isinstance(got, dict) and sorted(got) == ["data", "pinned", "root"] and \
            (got["pinned"] is False or got["root"] == root):
        return got["data"]
    data = build()
    write_data(path, kind, key, {"root": root, "pinned": not root or mentions(data, root), "data": data})
    return data
