"""Where the catalog and rules live: a checkout, or the copy bundled into the wheel.

Also: the catalog a command works on by default (``default_catalog_root``), the rules beside a
catalog (``rules_dir_for``) and paths as reports show them (``display_path``).

Order: ``$OPTKG_HOME`` (a folder holding catalog/ and rules/), then the checkout the package sits
in, then ``kg/_data`` (the wheel build copies catalog/ and rules/ there).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Callable

_PKG = Path(__file__).resolve().parent.parent  # kg/ (this file is kg/core/paths.py)


def data_root() -> Path:
    env = os.environ.get("OPTKG_HOME")
    if env:
        return Path(env)
    return _installed_root()


@functools.lru_cache(maxsize=1)
def _installed_root() -> Path:
    """The checkout the package sits in when it holds catalog/ and rules/, else the bundled kg/_data
    (decided once per process: every engine-table lookup asks, hundreds of times per ``sweep``)."""
    checkout = _PKG.parent
    if (checkout / "catalog" / "axes.yaml").is_file() and (checkout / "rules").is_dir():
        return checkout
    return _PKG / "_data"


def catalog_dir() -> Path:
    return catalog_path()


def catalog_path(*parts: str) -> Path:
    """``catalog_dir() / part / ...``, one Path object per data root and parts (the engine and release tables are
    looked up several times per stack of a sweep)."""
    return _catalog_path(os.environ.get("OPTKG_HOME"), parts)


@functools.lru_cache(maxsize=64)
def _catalog_path(env: str | None, parts: tuple[str, ...]) -> Path:
    return Path(os.path.join(os.fspath(data_root() / "catalog"), *parts)) if parts else data_root() / "catalog"


def rules_dir() -> Path:
    return data_root() / "rules"


def default_catalog_root() -> Path:
    """The catalog a command works on when none is named: ``$OPTKG_HOME/catalog`` if set, else
    ``./catalog`` when the working directory holds one (a repository keeping its own catalog),
    else the shipped catalog."""
    if not os.environ.get("OPTKG_HOME") and (Path("catalog") / "axes.yaml").is_file():
        return Path("catalog")
    return catalog_dir()


def rules_dir_for(catalog_root: Path) -> Path | None:
    """The rules folder beside a catalog folder (``<catalog>/../rules``), or None (then: the shipped rules)."""
    d = Path(catalog_root).resolve().parent / "rules"
    return d if d.is_dir() else None


def display_path(path: str) -> str:
    """Path relative to the working directory when it lies inside it (CI annotations need repo-relative paths)."""
    p = Path(path)
    if p.is_absolute():
        try:
            rel = os.path.relpath(p, Path.cwd())
        except ValueError:  # another drive (Windows): keep the path as given
            return path
        if not rel.startswith(".."):
            return rel
    return path


def repo_path(path: str) -> str:
    """A shipped catalog or rule file as reports show it: relative to the data root (``rules/check.yaml``,
    ``catalog/techniques/zero-2.yaml``) when it lies inside it, else as ``display_path`` shows it."""
    if not path:
        return path
    p = Path(path)
    if p.is_absolute():
        try:
            return p.resolve().relative_to(data_root().resolve()).as_posix()
        except (ValueError, OSError):  # outside the data root (a user's own rules/catalog): shown as display_path
            pass
    return display_path(path)


_LISTED: dict[str, tuple[int, list[str]]] = {}


def yaml_files_stamp(folder: Path | str) -> tuple[list[str], tuple]:
    """(the paths of the ``*.yaml`` files directly in ``folder``, sorted; a stamp of their names, sizes and mtimes).

    The stamp changes when a file is added, removed or rewritten, so a per-process copy of data parsed
    from them can be kept while it is equal. The listing is redone only when the folder's own mtime
    changes (a file added, removed or renamed); otherwise the stamp costs one ``os.stat`` per file:
    ``check`` and ``sweep`` ask for the engine and release tables hundreds of times per run.
    """
    d = os.fspath(folder)
    frozen = _FROZEN.get() if _FROZEN is not None else None
    if frozen is not None and d in frozen:
        return list(frozen[d][0]), frozen[d][1]
    try:
        dm = os.stat(d).st_mtime_ns
        hit = _LISTED.get(d)
        if hit is None or hit[0] != dm:
            names = sorted(e.path for e in os.scandir(d) if e.name.endswith(".yaml") and e.is_file())
            _LISTED[d] = hit = (dm, names)
        stamp = []
        for f in hit[1]:
            st = os.stat(f)
            stamp.append((f, st.st_size, st.st_mtime_ns))
    except OSError:  # the folder or a file went away meanwhile: list it again next time
        _LISTED.pop(d, None)
        return [], ()
    if frozen is not None:
        frozen[d] = (list(hit[1]), tuple(stamp))
    return list(hit[1]), tuple(stamp)


_FROZEN: Any = None  # a ContextVar, made by the first ``frozen_stamps``


def frozen_memo() -> dict[Any, Any] | None:
    """The memo of the current ``frozen_stamps`` (None outside one): a table built from data files can be kept
    there under a key of its own (a tuple: folder paths are strings), as the files were first read."""
    return _FROZEN.get() if _FROZEN is not None else None


def in_frozen(key: tuple, make: Callable[[], Any]) -> Any:
    """``make()``, kept under ``key`` in the current ``frozen_stamps`` memo (made once per sweep; outside one,
    every call makes it)."""
    frozen = frozen_memo()
    if frozen is None:
        return make()
    hit = frozen.get(key)
    if hit is None:
        hit = frozen[key] = make()
    return hit


def frozen_stamps(memo: dict[str, Any] | None):
    """Context manager: inside it ``yaml_files_stamp`` lists and stats each folder once and then answers from
    ``memo`` (None: as usual). A sweep (kg.engine.incremental.use) reads the data files as they were when it
    first read them, instead of ~40 ``os.stat`` calls per combination."""
    global _FROZEN
    if _FROZEN is None:
        import contextvars
        _FROZEN = contextvars.ContextVar("optkg_frozen_stamps", default=None)
    return VarSet(_FROZEN, memo)


class VarSet:
    """Context manager: the context variable ``var`` holds ``value`` inside the block (yielded), as before after it.
    A class, not a generator function: a sweep enters one per combination."""

    __slots__ = ("var", "value", "token")

    def __init__(self, var: Any, value: Any):
        self.var, self.value = var, value

    def __enter__(self) -> Any:
        self.token = self.var.set(self.value)
        return self.value

    def __exit__(self, *exc: Any) -> None:
        self.var.reset(self.token)
