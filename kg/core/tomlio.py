"""Safe TOML loading (``tomllib``) with the bounds every optkg input has (issue 26 #9, #10).

``tomllib`` raises ``ValueError`` for an integer over Python's 4,300-digit limit and ``RecursionError`` for
arrays nested 100,000 deep; neither is a ``TOMLDecodeError``. ``loads_toml`` refuses nesting deeper than
``MAX_DEPTH`` before parsing (a linear scan), and turns every failure into a one-line ``OptkgError`` naming the
file and line. Integers longer than ``numparse.MAX_DIGITS`` digits are refused too, naming their key: no
count or size optkg models is that long.
"""
from __future__ import annotations

import re
from typing import Any

from kg.core.errors import OptkgError
from kg.core.numparse import MAX_DIGITS, MAX_JSON_DEPTH, depth_ok

MAX_DEPTH = MAX_JSON_DEPTH
_DEEP = re.compile(r"[\[{]{8}")  # where deep nesting starts, for the message
_LONG_DIGITS = re.compile(r"[0-9_]{%d,}" % (MAX_DIGITS + 1))


def _line_of(text: str, rx: re.Pattern[str]) -> int:
    m = rx.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else 1


def _long_int(value: Any, path: str) -> str | None:
    """The dotted key of the first integer over ``MAX_DIGITS`` digits in ``value``, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return path if value.bit_length() > MAX_DIGITS * 3.33 else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        hit = _long_int(v, f"{path}.{k}" if path and isinstance(k, str) else f"{path}[{k}]" if path else str(k))
        if hit:
            return hit
    return None


def loads_toml(text: str, name: str) -> dict[str, Any]:
    """Parse TOML ``text`` (from file ``name``). Raises OptkgError ``name:line: ...``."""
    import tomllib
    if not depth_ok(text, MAX_DEPTH):
        line = _line_of(text, _DEEP)
        raise OptkgError(f"{name}:{line}: arrays or tables nested deeper than {MAX_DEPTH} levels; "
                         f"optkg reads at most {MAX_DEPTH}")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise OptkgError(f"{name}: not valid TOML ({e})") from None
    except ValueError:  # int(): more than 4,300 digits
        raise OptkgError(f"{name}:{_line_of(text, _LONG_DIGITS)}: an integer of thousands of digits; no count or size "
                         "optkg models is that long") from None
    except RecursionError:
        raise OptkgError(f"{name}: arrays or tables nested too deeply") from None
    key = _long_int(data, "")
    if key:
        raise OptkgError(f"{name}:{_line_of(text, _LONG_DIGITS)}: {key}: an integer of more than {MAX_DIGITS} digits; "
                         "no count or size optkg models is that long")
    return data


__all__ = ["MAX_DEPTH", "loads_toml"]
