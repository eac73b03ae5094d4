"""A small, safe message formatter for rule messages and fixes (replaces ``str.format_map``).

``str.format_map`` on live values lets a rules file walk attributes (``{tp_size.__class__.__mro__}``),
index objects (``{x[0]}``) and build gigabyte strings (``{tp_size:>3000000000}``). ``render`` supports
only what the shipped rules use:

- ``{name}``: the value of ``name`` (a fact or a computed number); ``{{`` and ``}}`` are literal braces;
- ``{name:spec}`` with a *number format* spec: optional align (``<>^=``), sign (``+- ``), width up to
  ``MAX_WIDTH``, grouping (``,`` or ``_``), precision up to ``MAX_PRECISION``, and a type among
  ``d f F e E g G % n x X b s`` (e.g. ``{compute_util:.0%}``, ``{max_model_len:,}``, ``{power_w:.0f}``).

Anything else stays in the text as written: an unknown name, an attribute or index (``{a.b}``,
``{a[0]}``), a conversion (``{a!r}``), or a spec outside that grammar. Values are rendered only when
they are plain data (str, int, float, bool, None, or lists/tuples/sets of those); integers longer
than ``MAX_DIGITS`` digits are shown as ``<integer of N digits>``. The output is at most
``MAX_OUTPUT`` characters. ``check_template`` returns the problems a rules loader reports.
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping

MAX_WIDTH = 99
MAX_PRECISION = 20
MAX_DIGITS = 100
MAX_OUTPUT = 10_000
MAX_TEMPLATE = 4_000

_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}\Z")
_SPEC = re.compile(r"(?:[<>^=])?[+\- ]?(\d{1,2})?[,_]?(?:\.(\d{1,2}))?[dfFeEgG%nxXbs]?\Z")
_PLAIN = (str, int, float, bool, type(None))


def _value_text(v: Any, spec: str) -> str | None:
    if isinstance(v, (list, tuple, set, frozenset)):
        if len(v) > 1000 or not all(isinstance(x, _PLAIN) for x in v):
            return None
        items = sorted(v, key=repr) if isinstance(v, (set, frozenset)) else list(v)
        inner = ", ".join(_value_text(x, "") or "?" for x in items)
        text = {list: f"[{inner}]", tuple: f"({inner})"}.get(type(v), "{" + inner + "}")
        return format(text, spec) if spec else text
    if not isinstance(v, _PLAIN):
        return None
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > MAX_DIGITS * 3.33:
        return f"<integer of about {int(v.bit_length() * 0.30103) + 1} digits>"
    if isinstance(v, float) and not math.isfinite(v) and spec:
        return str(v)
    try:
        return format(v, spec) if spec else str(v)
    except (ValueError, TypeError, OverflowError):
        return None


def render(template: str, values: Mapping[str, Any]) -> str:
    """``template`` with each ``{name}`` / ``{name:spec}`` replaced (see module doc). Never raises."""
    if not isinstance(template, str):
        return ""

    def sub(m: re.Match[str]) -> str:
        whole = m.group(0)
        if whole == "{{":
            return "{"
        if whole == "}}":
            return "}"
        inner = m.group(1)
        name, _, spec = inner.partition(":")
        if not _NAME.match(name) or name not in values or (spec and not _SPEC.match(spec)):
            return whole
        text = _value_text(values[name], spec)
        return whole if text is None else text

    out = _FIELD.sub(sub, template[:MAX_TEMPLATE])
    return out if len(out) <= MAX_OUTPUT else out[:MAX_OUTPUT] + "..."


def check_template(template: str) -> list[str]:
    """Problems with ``template`` as a message: fields the formatter would leave as written
    (attributes, indexes, conversions, specs outside the number-format grammar) and overlong text."""
    if not isinstance(template, str):
        return ["a message must be text"]
    out = []
    if len(template) > MAX_TEMPLATE:
        out.append(f"message is {len(template)} characters; the limit is {MAX_TEMPLATE}")
    for m in _FIELD.finditer(template[:MAX_TEMPLATE]):
        if m.group(1) is None:
            continue
        name, _, spec = m.group(1).partition(":")
        if not _NAME.match(name):
            out.append(f"'{{{m.group(1)[:60]}}}' is not a field name (only {{name}} or {{name:format}}; "
                       "no attributes, indexes or conversions)")
        elif spec and not _SPEC.match(spec):
            out.append(f"'{{{m.group(1)[:60]}}}': format '{spec[:40]}' is not a number format "
                       f"(e.g. ',', '.0%', '.2f'; width at most {MAX_WIDTH})")
    return out
