"""A small on-disk cache of validated objects (catalog, rulesets), keyed by the caller's content digest.

Folder: ``$OPTKG_CACHE_DIR``, default ``~/.cache/optkg``. Entries are pickles written atomically;
a missing, corrupt or foreign entry is a miss (and a corrupt one is removed), and a cache folder
that cannot be written only costs speed. The cache holds only what optkg itself wrote there.
"""
from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path
from typing import Any


def cache_dir() -> Path:
    return Path(os.environ.get("OPTKG_CACHE_DIR") or (Path.home() / ".cache" / "optkg"))


def cache_file(name: str) -> Path:
    """The cache path for entry ``name`` (e.g. ``catalog-<digest>.pickle``)."""
    return cache_dir() / name


def read(path: Path, cls: type) -> Any | None:
    """The cached object at ``path`` if it is an instance of ``cls``, else None."""
    if not path.is_file():
        return None
    try:
        with path.open("rb") as fh:
            obj = pickle.load(fh)
    except Exception:  # corrupt or written by another version: drop it
        path.unlink(missing_ok=True)
        return None
    return obj if isinstance(obj, cls) else None


def write(path: Path, obj: Any) -> bool:
    """Store ``obj`` at ``path`` atomically; False (and nothing left behind) when it cannot."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        return True
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
        return False
