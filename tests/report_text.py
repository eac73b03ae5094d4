"""Undo kg.output.report.fit_width for substring assertions: a line wrapped at 100 columns continues under its
own indent plus four spaces; ``unwrap`` joins such continuations back onto their line."""
from __future__ import annotations

import pytest


def unwrap(text: str, width: int = 100) -> str:
    out: list[str] = []
    lead = 0
    for line in text.split("\n"):
        ind = len(line) - len(line.lstrip(" "))
        if out and line.strip() and ind == lead + 4 and len(out[-1]) + len(line.split()[0]) + 1 > width - 4:
            out[-1] += " " + line.strip()
            continue
        out.append(line)
        lead = ind
    return "\n".join(out)


@pytest.fixture
def cli():
    """The in-process CLI with the text report's 100-column wrapping undone (substring assertions); a test module
    that asserts on report text imports it in place of conftest's ``cli``."""
    from conftest import run_cli

    def run(*argv):
        code, out, err = run_cli(*argv)
        return code, unwrap(out), err
    return run

