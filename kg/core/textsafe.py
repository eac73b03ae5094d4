"""Text sanitising for every sink a user's value can reach (issue 17).

A stack name, a technique name, a rule message or a flag value is user data. Printed raw it can
drive a terminal (ANSI/OSC escapes: clear the screen, set the window title, hide text), forge a
GitHub Actions workflow command (a newline followed by ``::error::``), or inject HTML into a
rendered markdown page (``<script>``, ``<img onerror=...>``, ``javascript:`` links). Each sink gets
its own function; use the one for the place the text is written:

- ``terminal(s)``: C0/C1 control characters (ESC, BEL, CSI ...), DEL, the bidirectional-override
  characters and the invisible ones (zero-width space/joiners, word joiner, BOM, soft hyphen) are shown as
  ``\\x1b`` / ``\\u202e`` / ``\\u200b``; newlines and tabs are kept (a whole report).
- ``one_line(s)``: like ``terminal`` and also escapes line and paragraph breaks, for a value that
  must stay on its line (a report title, a table cell, an annotation title).
- ``join_lines(lines)``: the lines of a text report, each through ``one_line``, joined with newlines.
- ``markdown(s)``: one line, HTML special characters escaped (``&lt;script&gt;`` renders as text),
  markdown table pipes and backslashes escaped, and ``javascript:``/``data:``/``vbscript:`` link
  schemes defused.
- ``html_text(s)``: HTML-escaped text (quotes too), controls escaped.
- ``github_data(s)`` / ``github_property(s)``: the escaping GitHub documents for workflow commands
  (``%``, CR, LF; and ``:``/``,`` in properties).

All functions accept any object (``str(obj)`` first) and never raise.
"""
from __future__ import annotations

import textwrap

from typing import Any

from kg.core.lazyre import lazy_re

# C0 controls except TAB and LF, DEL, C1 controls, and the bidi overrides/isolates (Trojan Source)
_CONTROL = {i: f"\\x{i:02x}" for i in [*range(0, 9), *range(11, 32), 0x7F, *range(0x80, 0xA0)]}
_CONTROL.update({c: f"\\u{c:04x}" for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]})
# invisible characters: a GPU name 'H100\u200b' must not print exactly like 'H100' next to "unknown GPU"
_CONTROL.update({c: f"\\u{c:04x}" for c in (0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD)})
_LINES = dict(_CONTROL)
_LINES.update({0x0A: "\\n", 0x0D: "\\r", 0x2028: "\\u2028", 0x2029: "\\u2029", 0x85: "\\x85", 0x0B: "\\x0b",
               0x0C: "\\x0c"})
_TERMINAL = dict(_CONTROL)
_TERMINAL[0x0D] = "\\r"  # a bare CR rewrites the line already printed

_DANGEROUS_SCHEME = lazy_re(r"(?i)\b(javascript|vbscript|data)\s*:")


def _s(obj: Any) -> str:
    try:
        return obj if isinstance(obj, str) else str(obj)
    except Exception:  # noqa: BLE001 - a __str__ that fails or an int over 4,300 digits
        return f"<{type(obj).__name__}>"


def terminal(obj: Any) -> str:
    """``obj`` as text that cannot control a terminal: controls escaped, newlines and tabs kept."""
    return _s(obj).translate(_TERMINAL)


def one_line(obj: Any) -> str:
    """``obj`` as one line of inert text: every control character and line break escaped."""
    return _s(obj).translate(_LINES)


def join_lines(lines: Any) -> str:
    """``lines`` (each meant as one line of a text report) joined with newlines, each escaped by ``one_line``:
    a line break inside a name a line shows (a file name, a technique or stack name) cannot start a line of
    its own (a GitHub Actions ``::error::`` workflow command, a fake summary line)."""
    return "\n".join(one_line(x) for x in lines)


def markdown(obj: Any) -> str:
    """``obj`` for a markdown line or table cell: one line, HTML escaped, pipes escaped, link schemes defused."""
    # '<' starts every HTML tag and autolink: escaping it is enough to keep raw HTML out ('>' and '&'
    # stay as written, so conditions such as `tp_size > 8` read as before)
    s = one_line(obj).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
    return _DANGEROUS_SCHEME.sub(lambda m: m.group(1) + "&#58;", s)


def html_text(obj: Any) -> str:
    """``obj`` as HTML text or attribute content (``& < > " '`` escaped, controls escaped)."""
    import html  # here: html.entities is a large table, and every command imports this module
    return html.escape(terminal(obj), quote=True)


def github_data(obj: Any) -> str:
    """The message part of a GitHub Actions workflow command (``::error::<data>``)."""
    return _s(obj).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(obj: Any) -> str:
    """A property value of a GitHub Actions workflow command (``title=<value>``)."""
    return github_data(obj).replace(":", "%3A").replace(",", "%2C")


_WORKFLOW = lazy_re(r"(^|\n)([ \t]*)::")


class TerminalWriter:
    """A text stream wrapper whose ``write`` passes text through ``terminal``, and keeps any line from starting
    with ``::`` (after blanks) unless ``workflow_commands`` is set.

    Installed around ``sys.stdout``/``sys.stderr`` by the CLI, so no command can print a raw escape
    sequence taken from its input, whatever it formats. GitHub Actions runs every output line that starts
    with ``::`` as a workflow command (``::error::``, ``::add-mask::``, ``::stop-commands::``); only
    ``--format github`` writes those, so in every other output such a line gets a backslash in front
    (``\\::error::...``) -- the last guard behind escaping every name (``one_line``, ``join_lines``), for a
    name a renderer wrapped or placed at a line start. Everything else is delegated.
    """

    def __init__(self, stream: Any):
        self._stream = stream
        self._bol = True  # at the start of a line (nothing but blanks written on it yet)
        self.workflow_commands = False

    def write(self, s: str) -> int:
        t = terminal(s)
        if not self.workflow_commands and "::" in t:
            t = _WORKFLOW.sub(lambda m: m.group(0)[:-2] + "\\::" if m.start() or self._bol or m.group(1)
                              else m.group(0), t)
        if t:
            tail = t.rsplit("\n", 1)[-1]
            self._bol = (self._bol or "\n" in t) and not tail.strip(" \t")
        self._stream.write(t)
        return len(s)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


WIDTH = 100  # output for people fits 100 columns (tests/test_report_width.py runs the README's commands)


def fit_width(text: str, width: int = WIDTH, split_words: bool = True) -> str:
    """``text`` with every line over ``width`` columns wrapped, continuing under its own indent plus four spaces;
    a word longer than a line (a long URL) is split, as a terminal would, unless ``split_words`` is False (a path
    in a one-message error stays whole, so it can be copied)."""
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        lead = " " * (len(line) - len(line.lstrip(" ")))
        out.append(textwrap.fill(line.strip(), width=width, initial_indent=lead, subsequent_indent=lead + "    ",
                                 break_on_hyphens=False, break_long_words=split_words))
    return "\n".join(out)


def say(line: str) -> None:
    """Write one message for people (``optkg: error: ...``, ``optkg: note: ...``) to stderr. At a terminal it fits
    ``WIDTH`` columns, a longer one continuing on lines indented four spaces; a stderr that is a file or a pipe (a
    script, a CI step grepping ``optkg: error:``) keeps the message on its one line, as the user-error contract
    gives it (``--format json`` carries the same message)."""
    import sys
    err = sys.stderr
    tty = bool(getattr(err, "isatty", None)) and err.isatty()
    err.write((fit_width(line, split_words=False) if tty else line) + "\n")
