"""What optkg can prove about files it wrote: a per-user secret key and records kept outside every output folder.

A digest stored next to a file proves nothing: anyone who can write the folder can compute SHA-256 of a
user's ``thesis.tex`` and list it in a planted ``manifest.json`` (issue 26 #1, #2), or rewrite a cache
entry's body and its checksum together (#6). Proof needs something the folder's writer cannot make:

- **The key**: 32 random bytes in ``<state>/key`` (created once, mode 0600), where ``<state>`` is
  ``$OPTKG_STATE_DIR``, else ``$XDG_STATE_HOME/optkg``, else ``~/.local/state/optkg``. The state folder is
  used only when it is a real folder (not a symbolic link) owned by this user that group and others
  cannot write, and the key only when it is a regular file of this user that nobody else can read;
  otherwise there is no key and nothing is proven (optkg then deletes nothing and caches nothing).
- ``mac(purpose, *parts)``: HMAC-SHA256 under the key over the length-prefixed parts; ``verify``
  compares in constant time. Whoever does not hold the key cannot make a MAC that verifies.
- **Records of written files** (``load_record`` / ``save_record``): for one output folder (by its real
  path) and one generator, the names and SHA-256 digests of the files optkg wrote there, stored as
  ``<state>/written/<digest of folder + generator>.json`` with a MAC over the folder, the generator and
  the files. A record holds for that folder only: a folder that is moved, copied or replaced by someone
  else's has no record. ``kg.core.outdir`` reads it to decide what it may replace or delete.

Nothing here raises on a missing or unusable state folder: the functions return None / an empty
record, which callers read as "no proof".
"""
from __future__ import annotations

import functools
import json
import os
import stat
from pathlib import Path

from kg.core.digest import compare_digest, hmac_sha256_hex, sha256_hex

KEY_BYTES = 32
MAX_RECORD_BYTES = 4 * 1024 * 1024
PRUNE_ABOVE = 512  # records kept before those of folders that no longer exist are dropped


def folder_is_private(folder: Path | str) -> bool:
    """True when ``folder`` is a directory owned by this user and not writable by group or others."""
    try:
        st = os.stat(folder)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return False
    return not (st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def state_dir(create: bool = True) -> Path | None:
    """The private state folder (see module doc), created 0700 when missing; None when it cannot be used."""
    env = os.environ.get("OPTKG_STATE_DIR")
    if env:
        base = Path(env)
    else:
        xdg = os.environ.get("XDG_STATE_HOME")
        try:
            base = (Path(xdg) if xdg else Path.home() / ".local" / "state") / "optkg"
        except RuntimeError:  # no home folder
            return None
    try:
        if create and not base.exists() and not base.is_symlink():
            base.mkdir(mode=0o700, parents=True, exist_ok=True)
        if base.is_symlink() or not folder_is_private(base):
            return None
    except OSError:
        return None
    return base


def _read_private(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of ``path`` when it is a regular file of this user that no one else can read or write (no links)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes or st.st_mode & 0o077:
            return None
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            return None
        with open(fd, "rb") as fh:
            fd = -1
            return fh.read(max_bytes + 1)
    except OSError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def _write_private(path: Path, data: bytes, replace: bool = True) -> bool:
    """Write ``data`` to ``path`` (mode 0600) atomically; with ``replace=False`` never over an existing file."""
    import tempfile  # only writers pay for it (a read-only run never imports it)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
        with open(fd, "wb") as fh:
            fh.write(data)
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails when another process made the key first: theirs wins
            os.unlink(tmp)
        tmp = None
        return True
    except OSError:
        return False
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)


@functools.lru_cache(maxsize=4)
def _key_in(folder: str) -> bytes | None:
    path = Path(folder) / "key"
    raw = _read_private(path, 1024)
    if raw is None and not path.exists() and not path.is_symlink():
        import secrets
        _write_private(path, secrets.token_hex(KEY_BYTES).encode(), replace=False)
        raw = _read_private(path, 1024)
    if raw is None:
        return None
    try:
        key = bytes.fromhex(raw.decode("ascii").strip())
    except ValueError:
        return None
    return key if len(key) == KEY_BYTES else None


def key() -> bytes | None:
    """This user's secret key (see module doc), or None when the state folder or the key cannot be used."""
    d = state_dir()
    return _key_in(str(d)) if d is not None else None


def _message(purpose: str, parts: tuple[bytes | str, ...]) -> bytes:
    return b"".join(_message_parts(purpose, parts))


def _message_parts(purpose: str, parts: tuple[bytes | str, ...]) -> list[bytes]:
    """``_message`` as the pieces whose concatenation it is (a MAC hashes them in turn: no copy of a payload)."""
    out = [purpose.encode()]
    for p in parts:
        b = p.encode("utf-8", "surrogatepass") if isinstance(p, str) else p
        out += [b"\0", f"{len(b)}:".encode(), b]
    return out


def mac(purpose: str, *parts: bytes | str) -> str | None:
    """HMAC-SHA256 (hex) of ``parts`` for ``purpose`` under this user's key; None without a key."""
    k = key()
    if k is None:
        return None
    return hmac_sha256_hex(k, _message_parts(purpose, parts))


def verify(tag: object, purpose: str, *parts: bytes | str) -> bool:
    """True when ``tag`` is the MAC of ``parts`` for ``purpose`` under this user's key."""
    want = mac(purpose, *parts)
    return want is not None and isinstance(tag, str) and compare_digest(tag, want)


# ---------------------------------------------------------------------------------------------
# records of the files optkg wrote into a folder

def _real(folder: Path | str) -> str:
    return os.path.realpath(folder)


def _record_path(state: Path, folder: str, generator: str) -> Path:
    h = sha256_hex([_message("record-name", (folder, generator))])[:40]
    return state / "written" / f"{h}.json"


def _files_text(files: dict[str, str]) -> str:
    return json.dumps(dict(sorted(files.items())), separators=(",", ":"), ensure_ascii=True)


def load_record(folder: Path | str, generator: str) -> dict[str, str]:
    """{file name: sha256} of what ``generator`` wrote into ``folder``, from a record whose MAC verifies; else {}."""
    state = state_dir(create=False)
    if state is None:
        return {}
    real = _real(folder)
    raw = _read_private(_record_path(state, real, generator), MAX_RECORD_BYTES)
    if raw is None:
        return {}
    try:
        d = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(d, dict) or d.get("folder") != real or d.get("generator") != generator:
        return {}
    files = d.get("files")
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return {}
    if not verify(d.get("mac"), "written-files", real, generator, _files_text(files)):
        return {}
    return dict(files)


def save_record(folder: Path | str, generator: str, files: dict[str, str]) -> bool:
    """Record that ``generator`` wrote ``files`` ({name: sha256}) into ``folder`` (replacing the earlier record)."""
    state = state_dir()
    if state is None:
        return False
    real = _real(folder)
    tag = mac("written-files", real, generator, _files_text(files))
    if tag is None:
        return False
    d = state / "written"
    try:
        d.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return False
    if d.is_symlink() or not folder_is_private(d):
        return False
    body = json.dumps({"folder": real, "generator": generator, "files": dict(sorted(files.items())), "mac": tag},
                      indent=1, sort_keys=True).encode()
    ok = _write_private(_record_path(state, real, generator), body)
    _prune(d)
    return ok


def _prune(d: Path) -> None:
    """Drop the records of folders that no longer exist once there are more than ``PRUNE_ABOVE``."""
    try:
        names = [p for p in d.iterdir() if p.suffix == ".json"]
        if len(names) <= PRUNE_ABOVE:
            return
        for p in names:
            raw = _read_private(p, MAX_RECORD_BYTES)
            try:
                folder = json.loads(raw).get("folder") if raw else None
            except (ValueError, AttributeError, RecursionError):
                folder = None
            if not isinstance(folder, str) or not os.path.isdir(folder):
                p.unlink()
    except OSError:
        return


__all__ = ["folder_is_private", "key", "load_record", "mac", "save_record", "state_dir", "verify"]
