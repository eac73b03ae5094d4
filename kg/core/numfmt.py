"""One number formatter for every text output, with a named style per output.

``fmt_num(value, style)`` turns a number (or None, a bool, a list of numbers) into display text.
Integers always get thousands separators (``12,345``). A float whose value is whole prints as an
integer inside the style's ``whole`` range; other floats print with ``sig`` significant digits
(``%g``), or with ``large_decimals`` fixed decimals from ``large`` on, or — with ``fixed`` — with
that many decimals and trailing zeros dropped. ``inf``/``nan`` print as ``inf``/``nan``.

The styles differ on purpose; each keeps the output its readers and golden files know:

- ``REPORT`` (``optkg check`` text and its CI formats, numbers of findings): booleans as ``true`` /
  ``false`` (the words rule conditions use), ``%.4g`` with separators below 10,000, whole numbers
  with separators above (byte counts and token counts stay exact), lists as ``{a, b}`` (sets of
  divisors such as valid ``tp_size`` values).
- ``DIAGNOSE`` (``optkg diagnose`` tables): ``-`` for a reading that is missing, ``yes``/``no``;
  fractions below 1 keep ``%.4g`` even when 0 (a utilisation of ``0`` reads as a measured zero).
- ``FIT`` (``optkg fit`` reports): ``-`` / ``yes`` / ``no``; one decimal from 100 on (rates and
  durations such as ``1,234.5`` s), ``%.4g`` without separators below; whole floats above 1e15 are
  not spelled out digit by digit.
- ``SWEEP`` (``optkg sweep`` tables): two decimals with trailing zeros dropped (``0.5``, ``12.25``)
  so the columns of a sweep compare at a glance; booleans as Python prints them.
- ``DIAGRAM`` (stack-diagram edge labels): ``%.4g`` without separators (short labels inside the
  drawing), lists and tuples as ``{a, b}``.

``fmt_pct(fraction, decimals)`` writes a fraction as a percentage (``1.13496`` -> ``113%``), rounding once,
exactly as a rule message's ``{x:.0%}`` does: a number shown in two places must reach both unrounded
(rounding it to 3 decimals first turned 1.13496 into 1.135 and printed 114% beside 113%).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class NumStyle:
    """How ``fmt_num`` writes values (see the module docstring for the styles in use).

    none: text for None. bools: (true text, false text), or None to print ``str(v)``.
    whole: integral floats with ``whole[0] <= |v| < whole[1]`` print as integers with separators.
    sig: significant digits (``%g``) for other floats; group: thousands separators in that form.
    large / large_decimals: from ``|v| >= large`` on, ``large_decimals`` fixed decimals (with separators).
    fixed: when set, other floats print with this many decimals (separators), trailing zeros and dot dropped.
    seqs: sequence types printed as ``{a, b}`` (each item in the same style); others use ``str(v)``.
    """

    none: str = "None"
    bools: tuple[str, str] | None = ("true", "false")
    whole: tuple[float, float] = (0.0, math.inf)
    sig: int = 4
    group: bool = True
    large: float | None = None
    large_decimals: int = 0
    fixed: int | None = None
    seqs: tuple[type, ...] = ()

    def but(self, **changes: Any) -> "NumStyle":
        """A copy with some options changed (``FIT.but(sig=3)``)."""
        return replace(self, **changes)


REPORT = NumStyle(large=1e4, large_decimals=0, seqs=(list,))
DIAGNOSE = NumStyle(none="-", bools=("yes", "no"), whole=(1.0, math.inf))
FIT = NumStyle(none="-", bools=("yes", "no"), whole=(0.0, 1e15), group=False, large=100.0, large_decimals=1)
SWEEP = NumStyle(none="-", bools=None, fixed=2)
DIAGRAM = NumStyle(group=False, seqs=(list, tuple))


def fmt_num(v: Any, style: NumStyle = REPORT) -> str:
    """``v`` as display text in ``style``. Non-numbers other than None, bools and ``style.seqs``
    sequences print as ``str(v)``. Never raises for inf or nan."""
    if v is None:
        return style.none
    if isinstance(v, bool):
        return str(v) if style.bools is None else style.bools[0 if v else 1]
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v.is_integer() and style.whole[0] <= abs(v) < style.whole[1]:
            return f"{int(v):,}"
        if style.fixed is not None:
            return f"{v:,.{style.fixed}f}".rstrip("0").rstrip(".")
        if style.large is not None and abs(v) >= style.large:
            return f"{v:,.{style.large_decimals}f}"
        return f"{v:,.{style.sig}g}" if style.group else f"{v:.{style.sig}g}"
    if style.seqs and isinstance(v, style.seqs):
        return "{" + ", ".join(fmt_num(x, style) for x in v) + "}"
    return str(v)


def fmt_pct(fraction: float | None, decimals: int = 0, none: str = "-") -> str:
    """``fraction`` (1.0 = 100 %) as ``113%`` (``decimals`` digits after the point), rounded once with
    Python's ``%`` format, the rounding of a rule template's ``{x:.0%}``; ``none`` for None, ``inf``/``nan`` as such."""
    if fraction is None:
        return none
    if isinstance(fraction, float) and not math.isfinite(fraction):
        return str(fraction)
    return f"{fraction:.{int(decimals)}%}"


def fmt_error_gib(error_bytes: float) -> str:
    """An estimate's error bar in GiB (2**30 bytes) as every report prints it: ``'+-1.80 GiB'`` (two decimals).
    The serving budget's (kg.derive.budget.ServingBudget.error_text) goes through here in check, sweep, fit,
    reconcile and the HTML report, so one stack shows one text."""
    return f"+-{float(error_bytes) / 2**30:.2f} GiB"
