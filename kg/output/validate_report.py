"""The text report of ``optkg validate`` (and of ``optkg place`` when the entry has problems)."""
from __future__ import annotations
from kg.core.textsafe import join_lines


def render_text(problems, n_files: int, suppressed: int = 0) -> str:
    """Text report of validation problems (``Problem`` objects or their dicts): one block per problem,
    then a summary line (``n_files``: techniques loaded; ``suppressed``: hidden by filters/baseline)."""
    out = []
    for p in problems:
        sev = p["severity"] if isinstance(p, dict) else p.severity
        d = p if isinstance(p, dict) else p.to_dict()
        loc = f"{d['file']}:{d['line']}:{d['column']}"
        out.append(f"{loc}: {sev}: {d['path'] + ': ' if d['path'] else ''}{d['message']} [{d['code']}]")
        if d["found"] is not None and d["code"] not in ("yaml",):
            out.append(f"    found: {d['found']!r}")
        if d["expected"]:
            out.append(f"    expected: {d['expected']}")
        if d["valid_values"]:
            out.append("    valid values:")
            for vv in d["valid_values"]:
                out.append(f"      - {vv['value']}: {vv['description']}" if vv["description"] else f"      - {vv['value']}")
        if d["hint"]:
            out.append(f"    hint: {d['hint']}")
    files = len({(p["file"] if isinstance(p, dict) else p.file) for p in problems})
    tail = f" ({suppressed} suppressed by --ignore/--select/--baseline)" if suppressed else ""
    if problems:
        errors = sum(1 for p in problems if (p["severity"] if isinstance(p, dict) else p.severity) == "error")
        out.append(f"{len(problems)} problem(s) in {files} file(s): {errors} error(s), {len(problems) - errors} warning(s){tail}")
    else:
        out.append(f"catalog OK: {n_files} techniques, no problems{tail}")
    return join_lines(out) + "\n"
