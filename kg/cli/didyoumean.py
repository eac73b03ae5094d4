"""Did-you-mean for mistyped commands, options and choices (exit 2 with the closest valid spelling).

difflib's ratio over the valid spellings; an option also matches on its words in another order or with ``_`` for
``-`` (``--tp_size`` -> ``--tensor-parallel-size`` is too far; ``--tp-sise`` -> ``--tp``/``--tp-size``).
"""
from __future__ import annotations

import argparse
import difflib
import re

_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def closest(word: str, candidates: list[str], n: int = 2) -> list[str]:
    """Up to ``n`` candidates nearest to ``word`` (case-insensitive, ``_`` read as ``-``): the best match and any
    other within 0.05 of its similarity ratio."""
    norm = {c.lower().replace("_", "-"): c for c in candidates}
    w = word.lower().replace("_", "-")

    def score(k: str) -> float:  # one spelling a word-prefix of the other (--tp_size, --tp) is as good as a typo
        prefix = len(k) > 3 and len(w) > 3 and (w.startswith(k + "-") or k.startswith(w + "-"))
        return max(difflib.SequenceMatcher(None, w, k).ratio(), 0.9 if prefix else 0.0)
    scored = sorted(((score(k), k) for k in norm), key=lambda t: (-t[0], t[1]))
    if not scored or scored[0][0] < 0.6:
        return []
    best = scored[0][0]
    return [norm[k] for r, k in scored[:n] if r >= best - 0.05]


def invalid_choice(message: str) -> str:
    """argparse's ``argument X: invalid choice: 'chek' (choose from a, b)`` with ``did you mean 'check'?``."""
    m = _CHOICE.search(message)
    if not m:
        return message
    choices = [c.strip().strip("'\"") for c in m.group(2).split(",")]
    near = closest(m.group(1), choices)
    if not near:
        return message
    return f"{message}; did you mean {' or '.join(repr(c) for c in near)}?"


def _options(p: argparse.ArgumentParser) -> list[str]:
    return [o for a in p._actions for o in a.option_strings if o.startswith("--")]  # no public list of actions


def unrecognized(extras: list[str], parser: argparse.ArgumentParser,
                 command: str | None) -> tuple[str, argparse.ArgumentParser]:
    """(message, the parser that should report it) for arguments no option took: ``unknown option --kv-budgt-gib;
    did you mean --kv-budget-gib?``, matched against the options of ``command``'s sub-parser."""
    target = parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction) and command in a.choices:
            target = a.choices[command]
    opts = _options(target)
    unknown = [x.split("=", 1)[0] for x in extras if x.startswith("-")]
    if not unknown:
        return f"unrecognized arguments: {' '.join(extras)}", target
    parts = []
    for x in unknown:
        near = closest(x, opts)
        parts.append(f"unknown option {x}" + (f"; did you mean {' or '.join(near)}?" if near else ""))
    return "; ".join(parts), target
