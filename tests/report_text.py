"""Undo kg.output.report.fit_width for substring assertions: a line wrapped at 100 columns continues under its
own indent plus four spaces; ``unwrap`` joins such continuations back onto their line."""
from __future__ import annotations


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
