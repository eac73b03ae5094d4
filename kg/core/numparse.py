"""Bounded, strict number parsing for user input (flags, YAML/JSON values, metric labels).

Python's own conversions have sharp edges a user can reach: ``int('9' * 5000)`` raises ValueError
(the 4,300-digit limit), ``str.isdigit`` accepts ``'²'`` which ``int`` then refuses, ``int('٨')``
silently reads an Arabic-Indic 8, ``json.loads`` accepts ``NaN``/``Infinity`` and 100,000-deep
arrays (RecursionError), ``float('1e400')`` is ``inf``, and ``1e308 * 1024**3`` is ``inf`` too.
Everything here raises ``OptkgError`` with a one-line message instead:

- ``parse_int(text, what, lo, hi)``: ASCII digits only (optional sign), at most ``MAX_DIGITS`` digits,
  within [lo, hi].
- ``as_int(value, what, lo, hi)``: a loaded value (int, integral float, or digit string) as an int.
- ``as_float(value, what, lo, hi)``: a finite number within [lo, hi].
- ``loads_json(text, what)``: ``json.loads`` that refuses NaN/Infinity, non-finite floats, integers
  over ``MAX_DIGITS`` digits, nesting deeper than ``MAX_JSON_DEPTH`` and a key repeated in one object
  (Python's json keeps the last one silently: ``"num_hidden_layers": 2, "num_hidden_layers": 99999``).
- ``show(v)``: a number for a message, without converting a huge integer to text.

``MAX_COUNT`` is the default ceiling for counts and sizes without a tighter bound of their own
(bounded-work rule: any loop a user value sizes stays finite and short).
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

from kg.core.errors import OptkgError
from kg.core.lazyre import lazy_re

MAX_DIGITS = 30  # any count or size optkg models fits in 30 digits; longer is refused unparsed
MAX_JSON_DEPTH = 64
MAX_COUNT = 10**15
_INT = lazy_re(r"[+-]?[0-9]{1,%d}" % MAX_DIGITS)
_DIGITS = lazy_re(r"[+-]?[0-9]+")


def show(v: Any) -> str:
    """``v`` for an error message: a huge integer as 'a N-digit number', other values as repr (cut)."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 100:
        return f"a {int(v.bit_length() * 0.30103) + 1}-digit number"
    try:
        r = repr(v)
    except Exception:  # noqa: BLE001
        r = f"<{type(v).__name__}>"
    return r if len(r) <= 80 else r[:77] + "..."


def bound_text(x: float) -> str:
    """A bound for an error message: integers below 10^9 in full (1048576, not 1.04858e+06), else %g (1e+15)."""
    return str(x) if isinstance(x, int) and abs(x) < 10**9 else f"{x:g}"


def _bounds(n: float, what: str, lo: float | None, hi: float | None, shown: str) -> None:
    if lo is not None and n < lo:
        raise OptkgError(f"{what}: expected a value >= {bound_text(lo)}, found {shown}")
    if hi is not None and n > hi:
        raise OptkgError(f"{what}: expected a value <= {bound_text(hi)}, found {shown}")


def parse_int(text: str, what: str, lo: int | None = None, hi: int | None = None) -> int:
    """An integer from text a user typed (see module doc). Raises OptkgError."""
    s = str(text).strip()
    if not _INT.fullmatch(s):
        if _DIGITS.fullmatch(s):
            raise OptkgError(f"{what}: expected a value <= {bound_text(hi if hi is not None else MAX_COUNT)}, "
                             f"found a {len(s.lstrip('+-'))}-digit number")
        raise OptkgError(f"{what}: expected an integer, found {show(s)}")
    n = int(s)
    _bounds(n, what, lo, hi, str(n))
    return n


def as_int(value: Any, what: str, lo: int | None = None, hi: int | None = None) -> int:
    """A loaded value as an integer: int, integral finite float, or an ASCII digit string. Raises OptkgError."""
    if isinstance(value, bool):
        raise OptkgError(f"{what}: expected an integer, found {value!r}")
    if isinstance(value, str):
        return parse_int(value, what, lo, hi)
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise OptkgError(f"{what}: expected an integer, found {value!r}")
        if abs(value) > 10**MAX_DIGITS:
            raise OptkgError(f"{what}: expected a value <= {bound_text(hi if hi is not None else MAX_COUNT)}, found {value!r}")
        value = int(value)
    if not isinstance(value, int):
        raise OptkgError(f"{what}: expected an integer, found {show(value)}")
    _bounds(value, what, lo, hi, show(value))
    return value


def as_float(value: Any, what: str, lo: float | None = None, hi: float | None = None) -> float:
    """A loaded value as a finite float within [lo, hi]. Raises OptkgError."""
    if isinstance(value, bool):
        raise OptkgError(f"{what}: expected a number, found {value!r}")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise OptkgError(f"{what}: expected a number, found {show(value)}") from None
    if isinstance(value, int):
        if value.bit_length() > 1000:
            raise OptkgError(f"{what}: expected a finite number, found {show(value)}")
        value = float(value)
    if not isinstance(value, float):
        raise OptkgError(f"{what}: expected a number, found {show(value)}")
    if not math.isfinite(value):
        raise OptkgError(f"{what}: expected a finite number, found {value!r}")
    _bounds(value, what, lo, hi, repr(value))
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def bounded_int(s: str) -> int:
    if len(s.lstrip("-")) > MAX_DIGITS * 10:
        raise ValueError(f"an integer of {len(s.lstrip('-'))} digits")
    return int(s)


def _finite_float(s: str) -> float:
    v = float(s)
    if not math.isfinite(v):
        raise ValueError(f"{s[:40]} is out of range for a number")
    return v


def depth_ok(text: str, limit: int) -> bool:
    """False when brackets nest deeper than ``limit`` (strings skipped; a linear scan, skipped when the
    text has too few brackets to nest that deep)."""
    if text.count("[") + text.count("{") <= limit:
        return True
    depth = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: a dict, or _DuplicateKey when a key repeats (``json`` keeps the last silently)."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return d


def _second_key_line(text: str, key: str) -> int:
    """1-based line of the second ``"key":`` in ``text`` (1 when not found: an escaped spelling)."""
    rx = re.compile(r'"%s"\s*:' % re.escape(key))
    hits = [m.start() for m in rx.finditer(text)]
    return text.count("\n", 0, hits[1]) + 1 if len(hits) > 1 else 1


def loads_json(text: str, what: str, inline: bool = False, nonfinite: bool = False) -> Any:
    """Parse JSON strictly (see module doc). Raises OptkgError '<what>: ...'; JSON syntax errors
    become ``<what>:<line>:<col>: invalid JSON (...)`` for a file, or with ``inline`` (a flag's value)
    ``<what>: invalid JSON (<msg> at column <col>)``. ``nonfinite``: the constants ``Infinity`` / ``NaN``
    are read as floats, as Python's json (and so transformers) reads a Hugging Face config.json
    (NemotronH's ``time_step_limit: [0.0, Infinity]``); the fields optkg reads refuse them one by one."""
    if not depth_ok(text, MAX_JSON_DEPTH):
        raise OptkgError(f"{what}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=float if nonfinite else _refuse_constant, parse_int=bounded_int,
                          parse_float=_finite_float, object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        line = _second_key_line(text, e.key)
        raise OptkgError(f"{what}:{line}: key {e.key!r} appears twice in one object (JSON readers keep one of "
                         "them silently; keep the one you mean)") from None
    except json.JSONDecodeError as e:
        if inline:
            raise OptkgError(f"{what}: invalid JSON ({e.msg} at column {e.colno})") from None
        raise OptkgError(f"{what}:{e.lineno}:{e.colno}: invalid JSON ({e.msg})") from None
    except ValueError as e:
        raise OptkgError(f"{what}: invalid JSON value ({e})") from None
    except RecursionError:
        raise OptkgError(f"{what}: JSON nested too deeply") from None
