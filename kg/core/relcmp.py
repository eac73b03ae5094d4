"""Comparing an engine release with a boundary release (PEP 440 versions, ``packaging``)."""
from __future__ import annotations


def older_than(version: str | None, release: str) -> bool:
    """Whether ``version`` is older than ``release``. None or an unreadable version stands for the latest
    release optkg knows, so it is never older (a stack without a release gets the current behaviour)."""
    if not version:
        return False
    from packaging.version import InvalidVersion, Version
    try:
        return Version(str(version)) < Version(release)
    except InvalidVersion:
        return False
