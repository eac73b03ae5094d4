"""The Speed section of ``check``'s text report, from the report dict's ``speed`` entry (kg.speed.serving)."""
from __future__ import annotations

from typing import Any



def _ms(v: float) -> str:
    return f"{v:,.0f} ms" if v >= 100 else f"{v:,.1f} ms"


def speed_lines(sp: dict[str, Any], wrap) -> list[str]:
    """Lines of the Speed section (``wrap(text, indent)`` folds long lines to the report's width)."""
    w = sp.get("workload") or {}
    load = f"ISL {w.get('isl', 0):,}, OSL {w.get('osl', 0):,}, concurrency {w.get('concurrency', 0):,}"
    out = [""]
    if sp.get("status") != "ok":
        head = ("none: the engine refuses requests this long" if sp.get("refuses_requests") else
                "none: the stack does not start" if sp.get("status") == "infeasible" else "not evaluable")
        out.append(f"Speed ({load}): {head}")
        out += [wrap(r, "  ") for r in sp.get("reasons") or []]
        return out
    e = sp["estimator"]
    out.append(f"Speed ({load})")
    out.append(wrap(f"estimator: {e['package']} {e['release']}, {e['backend']} database release "
                    f"{e['database_release']} on {e['system']}", "  "))
    cap = sp.get("cap") or {}
    parts = [f"KV cache {cap['kv_requests_per_scheduler']:,}"
             + (f" ({cap['kv_tokens_per_scheduler']:,} tokens)" if "kv_tokens_per_scheduler" in cap else "")
             ] if "kv_requests_per_scheduler" in cap else []
    parts += [f"{k} {v:,}" for k, v in cap.items() if k not in ("limit", "tokens_per_request",
                                                                 "kv_requests_per_scheduler", "kv_tokens_per_scheduler")]
    rows = [("TTFT", _ms(sp["ttft_ms"]) + (f" (engine {_ms(sp['engine_ttft_ms'])} + queue {_ms(sp['queue_wait_ms'])})"
                                           if sp.get("queued") else "")),
            ("ITL (TPOT)", _ms(sp["itl_ms"])),
            ("output tokens/s per GPU", f"{sp['tokens_per_s_per_gpu']:,.0f}"),
            ("output tokens/s per request", f"{sp['tokens_per_s_per_request']:,.1f}"),
            ("output tokens/s, all GPUs", f"{sp['output_tokens_per_s']:,.0f} on {sp['gpus']} GPU(s)"),
            ("running / queued requests", f"{sp['running']:,} / {sp['queued']:,}")]
    if parts:
        rows.append(("running requests per scheduler, at most", "; ".join(parts)))
    out += [f"  {label:<42} {val}" for label, val in rows]
    out += [wrap(f"note: {n}", "  ") for n in sp.get("notes") or []]
    return out
