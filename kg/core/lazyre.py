"""Regular expressions compiled on first use.

A module-level ``re.compile`` runs at import, in every process that imports the module: a warm ``optkg check``
compiled ~20 patterns of kg's own that it never uses (tag and version readers, estimator error parsers, number
readers for flags it was not given; ~2 % of its run: ``re``'s compiler is Python). ``lazy_re(pattern, flags)``
stands for ``re.compile(pattern, flags)`` and compiles it the first time one of its attributes is read
(``match``, ``fullmatch``, ``search``, ``sub``, ``findall`` ...); from then on those are the compiled pattern's
own bound methods. Only for patterns used through their methods (``re.sub(P, ...)`` needs the compiled one).
"""
from __future__ import annotations

import re
from typing import Any

_METHODS = ("match", "fullmatch", "search", "sub", "subn", "split", "findall", "finditer", "pattern", "flags",
            "groups", "groupindex")


class LazyPattern:
    """``re.compile(pattern, flags)``, compiled on first use (module doc)."""

    def __init__(self, pattern: str, flags: int = 0):
        self._args = (pattern, flags)

    def __getattr__(self, name: str) -> Any:  # only for names not set yet: the first use
        if name.startswith("__"):
            raise AttributeError(name)
        compiled = re.compile(*self._args)
        for m in _METHODS:
            self.__dict__[m] = getattr(compiled, m)
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy_re({self._args[0]!r}, {self._args[1]!r})"


def lazy_re(pattern: str, flags: int = 0) -> LazyPattern:
    return LazyPattern(pattern, flags)
