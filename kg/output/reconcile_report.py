"""Text rendering of ``optkg reconcile`` (input: the JSON dict of kg.cli.reconcile)."""
from __future__ import annotations

from typing import Any
from kg.core.textsafe import join_lines

GIB = 1024**3


def _v(x: float | None, unit: str) -> str:
    if x is None:
        return "-"
    if unit == "bytes":
        return f"{x / GIB:,.2f} GiB"
    if unit == "x":
        return f"{x:.2f}x"
    return f"{x:,.0f}"


def _pct(p: float | None) -> str:
    return "" if p is None else f" ({p:+.2f} %)"


def render_text(d: dict[str, Any]) -> str:
    from tabulate import tabulate
    out = []
    for r in d["logs"]:
        gen = "" if r["generation"] == r["engine"] else f" {r['generation']}"  # SGLang logs have no generation
        out.append(f"optkg reconcile: {r['log']}  ({r['engine']}{gen}"
                   f"{', ' + r['model'] if r.get('model') else ''})")
        rows = [[x["quantity"], _v(x["logged"], x["unit"]), _v(x["reproduced"], x["unit"]) + _pct(x["reproduced_diff_pct"]),
                 _v(x["estimated"], x["unit"]) + _pct(x["estimated_diff_pct"])] for x in r["rows"]]
        out.extend(tabulate(rows, headers=["quantity", "logged", "reproduced from the log", "optkg estimate"],
                            tablefmt="simple", disable_numparse=True).split("\n"))  # lines, each kept by join_lines
        for x in r["rows"]:
            if x.get("explanation"):
                out.append(f"  {x['quantity']}: {x['explanation']}")
        for n in r.get("notes") or []:
            out.append(f"note: {n}")
        out.append("")
    if d.get("comparison"):
        out.append("Why the engines differ")
        out.extend(f"  {c}" for c in d["comparison"])
    return join_lines(out).rstrip("\n") + "\n"
