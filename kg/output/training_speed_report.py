"""The Speed section of a training report (``speed`` of kind ``training``, from kg.speed.training): step time,
tokens/s per GPU, MFU, where the time goes and what each link carries; or why it is not evaluable.
Lines fit 100 columns."""
from __future__ import annotations

import textwrap
from typing import Any, Mapping

TERMS = (("gemm", "GEMMs"), ("attention", "attention"), ("elementwise", "element-wise"),
         ("bubble", "pipeline bubble"), ("tp", "TP exposed"), ("cp", "CP exposed"), ("pp_p2p", "PP p2p"),
         ("fsdp", "FSDP/ZeRO-3 exposed"), ("dp", "DP exposed"), ("optimizer", "optimizer"))
DOC = "docs/training-speed-accuracy.md"


def _wrap(text: str, indent: str = "  ", sub: str = "    ") -> list[str]:
    return textwrap.wrap(text, width=100, initial_indent=indent, subsequent_indent=sub, break_on_hyphens=False)


def _secs(v: float) -> str:
    return f"{v * 1000:,.0f} ms" if v < 1 else f"{v:,.2f} s"


def _bytes(v: float) -> str:
    return f"{v / 1e9:,.2f} GB" if v >= 1e8 else f"{v / 1e6:,.1f} MB"


def training_speed_lines(speed: Mapping[str, Any] | None) -> list[str]:
    """Text lines of the Speed section (empty without a ``speed`` entry)."""
    if not speed:
        return []
    out = [f"Speed (estimate: kg.speed.training; constants fitted on published rows, errors in {DOC})"]
    if not speed.get("evaluable"):
        return out + _wrap(f"not evaluable: {speed.get('reason', '?')}")
    lay = speed["layout"]
    gpus = lay["tp"] * lay["pp"] * lay["cp"] * lay["dp"]
    out.append(f"  step time {_secs(speed['step_time_s'])}   {speed['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU   "
               f"{speed['tokens_per_s']:,.0f} tokens/s on {gpus:,} GPUs")
    out += _wrap(f"model {speed['model_tflops_per_gpu']:,.0f} TFLOP/s per GPU = MFU {speed['mfu']:.1%} of the "
                 f"{speed['mfu_peak']}; with recomputation (HFU) {speed['hfu']:.1%}")
    step = speed["step_time_s"]
    parts = [f"{name} {_secs(speed['terms'][k])} ({speed['terms'][k] / step:.0%})" for k, name in TERMS
             if speed["terms"].get(k, 0) > 0.0005 * step]
    out += _wrap("where the time goes: " + ", ".join(parts))
    for c in speed.get("communication") or []:
        gbs = c["link_bytes_per_s"] / 1e9
        how = (f"overlapped, {_secs(c['seconds'])} of {_secs(c['seconds_if_serial'])} shows" if c["overlapped"]
               else f"not overlapped, {_secs(c['seconds'])}") + f" per {c['per']}"
        out += _wrap(f"{c['kind']}: {_bytes(c['bytes'])} per GPU per {c['per']} over {c['link']} "
                     f"({gbs:,.0f} GB/s per GPU); {how}")
    k = speed["constants"]
    out += _wrap(f"constants ({k['efficiency_from']}): GEMMs at {k['gemm_efficiency']:.2f} of peak x width factor, "
                 f"attention {k['attention_efficiency']:.2f} of the BF16 peak, {k['kernels']} kernels "
                 f"x{k['kernel_factor']:.2f}" + (f", power limit x{k['power_factor']:.2f}" if k["power_factor"] < 1
                                                  else "") + f"; {k['source']}")
    out += _wrap(f"FLOPs: {speed['flops']['source']}")
    for n in speed.get("notes") or []:
        out += _wrap(f"note: {n}")
    return out
