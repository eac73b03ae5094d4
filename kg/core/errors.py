"""Errors a user can cause, and problems found in catalog files.

``OptkgError`` is raised for bad input (a file, a flag, a value); the CLI prints its one-line
message and exits 2. ``Problem`` (kg.core.problem, also importable from here) is one issue found while
validating a file; validation collects all problems in one pass.
"""
from __future__ import annotations


# line breaks and other control characters a user's value may carry (a YAML key "a\nb", a quoted
# newline in a pasted command); escaped so that an error message stays on one line
_ESCAPES = {i: f"\\x{i:02x}" for i in [*range(0, 9), *range(11, 32), 0x7F, 0x85]}
_ESCAPES.update({0x0A: "\\n", 0x0D: "\\r", 0x2028: "\\u2028", 0x2029: "\\u2029"})


class OptkgError(Exception):
    """Bad input from the user. ``str(e)`` is a one-line message naming the file/flag and what was expected.

    Line breaks inside ``message`` (e.g. from a value the user typed) are escaped, so the message is
    always one line, and ``str(e)`` is that line only (issue 26 #29: an error is one line). ``details``:
    optional further lines (e.g. every problem of a rules folder) for machine-readable output (the
    ``--format json`` error object lists them); the message itself says how to see them.
    """

    def __init__(self, message: object = "", details: list[str] | tuple[str, ...] = ()):
        super().__init__(str(message).translate(_ESCAPES))
        self.details = [str(d).translate(_ESCAPES) for d in details]

    def at_json_key_line(self, name: str, text: str) -> OptkgError:
        """This error ("<name>: '<key>' ...") with the line of ``"<key>":`` in the JSON ``text`` after the file
        name (issue 26: a number that cannot be is an error naming file, line and field); itself if no key."""
        import re
        msg = str(self)
        m = re.match(re.escape(name) + r": '([^']+)'", msg)
        hit = re.search(r'"%s"\s*:' % re.escape(m.group(1)), text) if m else None
        if hit is None:
            return self
        return OptkgError(f"{name}:{text.count(chr(10), 0, hit.start()) + 1}:{msg[len(name) + 1:]}")


def __getattr__(name: str):
    """``Problem`` lives in kg.core.problem (a dataclass): ``import kg`` and a command that never validates a file
    do not import ``dataclasses`` through this module (kg.core.deferred)."""
    if name == "Problem":
        from kg.core.problem import Problem
        return Problem
    if name == "__path__":  # the import system asks on every `from kg.core.errors import ...`: no message to build
        raise AttributeError(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_close_matches(word: str, possibilities: list[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """``difflib.get_close_matches`` for a "did you mean" hint, loaded only when a name is not known (difflib, with
    heapq: ~4 M instructions that a ``check`` of a correct stack does not need)."""
    from difflib import get_close_matches as close
    return close(word, possibilities, n, cutoff)
