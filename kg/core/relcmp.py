"""Comparing engine releases as PEP 440 (``packaging``) compares them, without importing ``packaging`` for plain ones.

Importing ``packaging.version`` and ``packaging.specifiers`` compiles two large regular expressions (~60 M
instructions, a sixth of ``optkg kv``: issue 31). Almost every release optkg reads is plain: ASCII digits joined
by dots (``0.14.0``), and every range in the release tables and rules is a few comparisons with plain releases
(``>=0.4.0,<0.34.0``). For those, PEP 440 ordering is the order of the numbers with trailing zeros dropped
(``0.14 == 0.14.0``), so ``Release`` and ``in_range`` compute it directly. Anything else (pre-, post- and
dev-releases such as ``0.4.0.post1``, epochs, local labels, a leading ``v``, ``~=``, ``==X.*``) goes to
``packaging`` itself, so the answers are packaging's in every case (tests/test_relcmp.py holds the two equal).
"""
from __future__ import annotations

from functools import lru_cache

_OPS = (">=", "<=", "!=", "==", ">", "<")  # two-character operators first; ``~=`` and ``===`` go to packaging


def release_numbers(text: object) -> tuple[int, ...] | None:
    """``(0, 14)`` for ``"0.14.0"``: the numbers of a plain release (ASCII digits joined by dots) with trailing
    zeros dropped, as PEP 440 compares them; None for any other text (packaging decides those)."""
    if not isinstance(text, str) or not text:
        return None
    return _numbers(text) if len(text) < 64 else _numbers.__wrapped__(text)


@lru_cache(maxsize=4096)
def _numbers(text: str) -> tuple[int, ...] | None:
    parts = text.split(".")
    if not all(p and p.isascii() and p.isdigit() for p in parts):
        return None
    nums = [int(p) for p in parts]
    while len(nums) > 1 and nums[-1] == 0:
        nums.pop()
    return tuple(nums)


class Release:
    """A release that compares, hashes and prints as ``packaging.version.Version(text)`` does.

    A text that is not a valid version raises packaging's ``InvalidVersion`` (a ``ValueError``)."""

    __slots__ = ("_text", "_key", "_order", "_version")

    def __init__(self, text: object) -> None:
        self._text = str(text)
        self._key = release_numbers(self._text)
        # (numbers, post number or -1): the order of a plain release or a plain one with ``.postN`` (the vLLM
        # registry's 0.4.0.post1), as packaging orders them (no pre-, dev-release, epoch or local label)
        self._order = (self._key, -1) if self._key is not None else _post_order(self._text)
        self._version = None if self._order is not None else _version(self._text)

    def version(self):
        """The ``packaging.version.Version`` (built on first use for a plain release)."""
        if self._version is None:
            self._version = _version(self._text)
        return self._version

    def _pair(self, other: object):
        if not isinstance(other, Release):
            return None
        if self._order is not None and other._order is not None:
            return self._order, other._order
        return self.version(), other.version()

    def __eq__(self, other: object) -> bool:
        p = self._pair(other)
        return NotImplemented if p is None else p[0] == p[1]

    def __lt__(self, other: object) -> bool:
        p = self._pair(other)
        return NotImplemented if p is None else p[0] < p[1]

    def __le__(self, other: object) -> bool:
        p = self._pair(other)
        return NotImplemented if p is None else p[0] <= p[1]

    def __gt__(self, other: object) -> bool:
        p = self._pair(other)
        return NotImplemented if p is None else p[0] > p[1]

    def __ge__(self, other: object) -> bool:
        p = self._pair(other)
        return NotImplemented if p is None else p[0] >= p[1]

    def __hash__(self) -> int:
        # equal releases have equal numbers once trailing zeros are dropped (packaging: epoch, pre, post, dev and
        # local must match too; they only make unequal releases share a hash)
        if self._order is not None:
            return hash(self._order[0])
        nums = list(self.version().release)
        while len(nums) > 1 and nums[-1] == 0:
            nums.pop()
        return hash(tuple(nums))

    def __str__(self) -> str:
        if self._order is not None:  # packaging's normal form keeps the trailing zeros, drops leading ones
            head, _, post = self._text.partition(".post")
            return ".".join(str(int(p)) for p in head.split(".")) + (f".post{int(post)}" if post else "")
        return str(self.version())

    def __repr__(self) -> str:
        return f"<Release('{self}')>"


def _post_order(text: str) -> tuple[tuple[int, ...], int] | None:
    """``((0, 4), 1)`` for ``"0.4.0.post1"`` (a plain release, ``.post`` and ASCII digits); None otherwise."""
    head, sep, post = text.partition(".post")
    if not sep or not (post.isascii() and post.isdigit()) or len(text) >= 64:
        return None
    nums = release_numbers(head)
    return None if nums is None else (nums, int(post))


def _version(text: str):
    from packaging.version import Version
    return Version(text)


@lru_cache(maxsize=1024)
def _clauses(spec: str) -> tuple[tuple[str, tuple[tuple[int, ...], int]], ...] | None:
    """``((">=", ((0, 4), -1)), ("<", ((0, 34), -1)))`` for ``">=0.4.0,<0.34.0"``: each bound's order (numbers, post
    number or -1; ``>=0.4.0.post1`` is ``((0, 4), 1)``); None when a clause is not such a comparison (packaging
    decides it). For a plain release every such clause is the plain order: it is neither a pre- nor a
    post-release, so packaging's exclusions for those (``>1.0`` leaves out ``1.0.post1``) never apply."""
    out = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        op = next((o for o in _OPS if part.startswith(o)), None)
        if op is None or part.startswith("==="):
            return None
        bound = part[len(op):].strip()
        nums = release_numbers(bound)
        order = (nums, -1) if nums is not None else _post_order(bound)
        if order is None:
            return None
        out.append((op, order))
    return tuple(out)


@lru_cache(maxsize=1024)
def operators(spec: str) -> frozenset[str]:
    """The comparison operators of range ``spec`` (``{">=", "<"}`` for ``">=0.4.0,<0.34.0"``), as packaging's
    ``{s.operator for s in SpecifierSet(spec)}``; raises packaging's ``InvalidSpecifier`` (a ``ValueError``)."""
    clauses = _clauses(spec)
    if clauses is not None:
        return frozenset(op for op, _ in clauses)
    from packaging.specifiers import SpecifierSet
    return frozenset(s.operator for s in SpecifierSet(spec))


def in_range(version: object, spec: str) -> bool:
    """``Version(version) in SpecifierSet(spec)``: whether release ``version`` is in the range ``spec``.

    Raises packaging's ``InvalidVersion`` / ``InvalidSpecifier`` (both ``ValueError``) as packaging would."""
    v = version._key if isinstance(version, Release) else release_numbers(version)
    if v is not None:  # plain release and range: the answer is the numbers' (kept: a sweep asks the same per stack)
        hit = _PLAIN_IN.get((v, spec))
        if hit is not None:
            return hit
        if _clauses(spec) is not None:
            out = _in_range(version, v, spec)
            if len(_PLAIN_IN) > 20_000:
                _PLAIN_IN.clear()
            _PLAIN_IN[(v, spec)] = out
            return out
    return _in_range(version, v, spec)


_PLAIN_IN: dict[tuple[tuple[int, ...], str], bool] = {}


def _in_range(version: object, v: tuple[int, ...] | None, spec: str) -> bool:
    clauses = _clauses(spec) if v is not None else None
    if clauses is None:
        from packaging.specifiers import SpecifierSet
        return (version.version() if isinstance(version, Release) else _version(str(version))) in SpecifierSet(spec)
    o = (v, -1)
    for op, b in clauses:
        if not ((op == ">=" and o >= b) or (op == "<=" and o <= b) or (op == ">" and o > b)
                or (op == "<" and o < b) or (op == "==" and o == b) or (op == "!=" and o != b)):
            return False
    return True


def older_than(version: str | None, release: str) -> bool:
    """Whether ``version`` is older than ``release``. None or an unreadable version stands for the latest
    release optkg knows, so it is never older (a stack without a release gets the current behaviour)."""
    if not version:
        return False
    try:
        return Release(version) < Release(release)
    except ValueError:  # packaging's InvalidVersion
        return False
