"""SGLang's default ``mem_fraction_static``: computed from the GPU's memory, not a constant.

When ``--mem-fraction-static`` is not given, SGLang reserves memory for activations and CUDA graphs and
gives the rest to the static pool (weights + KV):

    mem_fraction_static = round((gpu_mem - reserved_mem) / gpu_mem, 3)      (MiB; gpu_mem = nvidia-smi memory.total)

    reserved_mem = 512 + 1.5 x max(chunked_prefill_size, 2048) + tp x pp / 8 x 1024 + graph reserve,
                   at least 10 GiB on GPUs above 60 GiB, plus 2 GiB for DeepEP all-to-all buffers
    graph reserve = decode max_bs x 2
                    (+ max_bs x attn_dp x 3, and + max_bs x attn_dp x 1.5 when max_bs > 300, under DP attention)
                    + 8 MiB per prefill capture size (breakable prefill CUDA graphs, the CUDA default), or
                      1.5 GiB instead on MLA models

With chunked prefill off (``--chunked-prefill-size -1``, or any value <= 0) the activation term counts
``max(max_prefill_tokens, 2048)`` tokens instead (``--max-prefill-tokens``, default 16,384: 0.5.23
``srt/arg_groups/fields/schedule.py:71-81``), and the prefill graphs capture no size (their max_bs is the -1
chunk): 0.5.23 ``memory_hook.py:231-236, 304-307``; the same branch in 0.5.3 ``srt/server_args.py:641-644``, 0.5.5
:789-792, 0.5.9 :1024-1027.

``chunked_prefill_size`` and the decode ``max_bs`` default by GPU memory: < 20 GiB 2,048 / 8; < 35 GiB 4,096 /
48 (160 at TP >= 4) from 0.5.20 (2,048 / 24 (80) before); < 60 GiB 4,096 / 32 (160); < 160 GiB 8,192 / 256 (512);
else 16,384 / 512. The prefill capture sizes run 4..32 by 4, 48..256 by 16, 288..512 by 32, 576..1024 by 64,
1280..4096 by 256, 4608.. by 512 up to the prefill max_bs (the chunked prefill size, at most 8,192 on MLA).

Source: SGLang 0.5.23 ``srt/arg_groups/memory_hook.py:88-170`` (buckets), ``:231-265`` (prefill max_bs),
``:281-327`` (the fraction), ``:358-399`` (graph reserve), ``:402-414`` (DeepEP), ``arg_groups/cuda_graph_hook.py:480-497``
(capture sizes), ``model_executor/cuda_graph_config.py:119-123`` (breakable prefill graphs on CUDA); the same
terms in 0.5.18 ``srt/server_args.py:4830-4889, 4969-4980, 5082-5118``.

Earlier releases (``_before_0_5_18``), read in their wheels' ``srt/server_args.py``:
- 0.5.3 - 0.5.9 (``_handle_gpu_memory_settings``: 0.5.3 :542-672, 0.5.5 :665-825, 0.5.8.post1 :879-1030, 0.5.9
  :911-1060): the same buckets and ``512 + 1.5 x max(chunked_prefill_size, 2048) + tp x pp / 8 x 1024 + max_bs x 2``
  (+ the DP-attention terms), at least 10 GiB above 60 GiB, without the prefill-graph and DeepEP terms (breakable
  prefill graphs came later; piecewise graphs, ``len(tokens) x 8``, are off by default, 0.5.9 :604); 16 / 80 below
  35 GiB before 0.5.5.
- 0.5.1 - 0.5.2 (0.5.1 :354-393, 0.5.2 :474): a fixed reserve per GPU, ``(2.8 + tp x pp / 10)`` GiB below 35 GiB,
  ``(9.5 + tp x pp / 2)`` GiB below 90 GiB, ``(12 + tp x pp / 2)`` GiB below 160 GiB, else 32 GiB; + 4 GiB under DP
  attention.
- A speculative algorithm adds a draft reserve there: 0.5.3 - 0.5.9, after the 10 GiB floor, 6 GiB for STANDALONE and
  2 GiB for any other but NGRAM (0.5.3 :662-669, 0.5.5 :810-817, 0.5.9 :1051-1057); 0.5.1 - 0.5.2 2 GiB for any
  (0.5.1 :387-389). 0.5.17 and 0.5.23 have no such term.
Releases 0.5.10 - 0.5.17 (not read) and before 0.5.1 are not modelled: ``default_mem_fraction`` returns None.
"""
from __future__ import annotations

from dataclasses import dataclass

from kg.core.relcmp import older_than

MIB = 2**20
SINCE = "0.5.18"
EARLY = ("0.5.1", "0.5.10")  # [from, before): the releases _before_0_5_18 models
MAX_PREFILL_TOKENS = 16384  # --max-prefill-tokens default (0.5.23 srt/arg_groups/fields/schedule.py:71-81)


def activation_term(cps: int, max_prefill_tokens: int | None = None) -> tuple[str, float]:
    """The activation reserve (name, MiB): 1.5 MiB per token of ``max(chunked_prefill_size, 2048)`` with chunked
    prefill on, of ``max(max_prefill_tokens, 2048)`` with it off (``cps <= 0``; module doc)."""
    if cps > 0:
        return "activations 1.5 x tokens", max(cps, 2048) * 1.5
    return ("activations 1.5 x max_prefill_tokens (chunked prefill off)",
            max(int(max_prefill_tokens or MAX_PREFILL_TOKENS), 2048) * 1.5)


@dataclass
class MemFraction:
    """The computed default and how: ``fraction`` (3 decimals, as SGLang rounds), ``reserved_mib`` and its
    ``terms`` (name -> MiB), ``chunked_prefill_size`` and decode ``max_bs`` the GPU bucket gave."""

    fraction: float
    reserved_mib: float
    terms: dict[str, float]
    chunked_prefill_size: int
    max_bs: int

    vision: str = ""  # the vision-tower reduction applied to the fraction (kg.engines.sglang.vlm), if any

    def basis(self) -> str:
        parts = " + ".join(f"{k} {v:,.0f}" for k, v in self.terms.items() if v)
        if self.vision:
            return (f"SGLang default: (GPU - reserved {self.reserved_mib:,.0f} MiB) / GPU {self.vision} = "
                    f"{self.fraction:.4g}; reserved = {parts} MiB")
        return (f"SGLang default: (GPU - reserved {self.reserved_mib:,.0f} MiB) / GPU = {self.fraction:g}; "
                f"reserved = {parts} MiB")


def gpu_defaults(gpu_mem_mib: float, tp_size: int, engine_version: str | None = None) -> tuple[int, int]:
    """(chunked_prefill_size, decode max_bs) SGLang picks for a GPU of ``gpu_mem_mib`` MiB (module doc)."""
    small_tp = tp_size < 4
    if gpu_mem_mib < 20 * 1024:
        return 2048, 8
    if gpu_mem_mib < 35 * 1024:
        if older_than(engine_version, "0.5.20"):
            return 2048, 24 if small_tp else 80
        return 4096, 48 if small_tp else 160
    if gpu_mem_mib < 60 * 1024:
        return 4096, 32 if small_tp else 160
    if gpu_mem_mib < 160 * 1024:
        return 8192, 256 if small_tp else 512
    return 16384, 512


def prefill_capture_sizes(max_bs: int) -> list[int]:
    """Token counts SGLang captures breakable prefill graphs for (cuda_graph_hook.py:480-497 at 0.5.23)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_bs + 1, 512)))
    return [s for s in sizes if s <= max_bs]


def default_mem_fraction(gpu_mem_bytes: float, tp_size: int = 1, pp_size: int = 1, *, is_mla: bool = False,
                         attn_dp_size: int = 1, chunked_prefill_size: int | None = None,
                         max_running_requests: int | None = None, cuda_graph_disabled: bool = False,
                         deepep: bool = False, engine_version: str | None = None,
                         max_prefill_tokens: int | None = None,
                         vision: tuple[float, str] | None = None,
                         speculative: str | None = None) -> MemFraction | None:
    """SGLang's default ``mem_fraction_static`` for one GPU of ``gpu_mem_bytes`` (module doc); None for
    releases before 0.5.18, which this does not model. ``attn_dp_size`` > 1 is DP attention. ``vision``: the
    (factor, how) of kg.engines.sglang.vlm.vlm_factor for a vision-language model, applied to the rounded
    fraction as SGLang does."""
    mf = _default_mem_fraction(gpu_mem_bytes, tp_size, pp_size, is_mla, attn_dp_size, chunked_prefill_size,
                               max_running_requests, cuda_graph_disabled, deepep, engine_version, max_prefill_tokens,
                               speculative)
    if mf is not None and vision is not None:
        mf.fraction, mf.vision = mf.fraction * vision[0], vision[1]
    return mf


def _default_mem_fraction(gpu_mem_bytes: float, tp_size: int, pp_size: int, is_mla: bool, attn_dp_size: int,
                          chunked_prefill_size: int | None, max_running_requests: int | None,
                          cuda_graph_disabled: bool, deepep: bool, engine_version: str | None,
                          max_prefill_tokens: int | None, speculative: str | None) -> MemFraction | None:
    if older_than(engine_version, SINCE):
        if older_than(engine_version, EARLY[0]) or not older_than(engine_version, EARLY[1]):
            return None
        return _before_0_5_18(gpu_mem_bytes / MIB, tp_size, pp_size, attn_dp_size, chunked_prefill_size,
                              cuda_graph_disabled, str(engine_version), max_prefill_tokens, speculative)
    gpu_mib = gpu_mem_bytes / MIB
    cps_default, max_bs = gpu_defaults(gpu_mib, tp_size, engine_version)
    cps = int(chunked_prefill_size) if chunked_prefill_size is not None else cps_default
    if max_running_requests is not None and max_bs > int(max_running_requests):
        max_bs = int(max_running_requests)  # memory_hook.py:172-178
    act_name, act = activation_term(cps, max_prefill_tokens)
    terms: dict[str, float] = {"base": 512.0, act_name: act, "tp x pp / 8 x 1024": tp_size * pp_size / 8 * 1024}
    graph = 0.0
    if not cuda_graph_disabled:
        graph += max_bs * 2
        if attn_dp_size > 1:
            graph += max_bs * attn_dp_size * 3 + (max_bs * attn_dp_size * 1.5 if max_bs > 300 else 0)
        if is_mla:
            graph += 1.5 * 1024
        else:
            graph += len(prefill_capture_sizes(cps)) * 8
    terms["CUDA graphs"] = graph
    reserved = sum(terms.values())
    if gpu_mib > 60 * 1024 and reserved < 10 * 1024:
        terms["floor to 10 GiB"] = 10 * 1024 - reserved
        reserved = 10 * 1024
    if deepep and not cuda_graph_disabled:
        terms["DeepEP buffers"] = 2 * 1024
        reserved += 2 * 1024
    return MemFraction(round((gpu_mib - reserved) / gpu_mib, 3), reserved, terms, cps, max_bs)


def _before_0_5_18(gpu_mib: float, tp_size: int, pp_size: int, attn_dp_size: int, chunked_prefill_size: int | None,
                   cuda_graph_disabled: bool, engine_version: str,
                   max_prefill_tokens: int | None = None, speculative: str | None = None) -> MemFraction:
    """SGLang 0.5.1 - 0.5.9's default (module doc: a fixed reserve per GPU before 0.5.3, the token / graph formula
    from 0.5.3); the CUDA-graph term counts even with graphs disabled, as those releases add it unconditionally."""
    cps_default, max_bs = gpu_defaults(gpu_mib, tp_size, engine_version)
    if 20 * 1024 <= gpu_mib < 35 * 1024 and tp_size < 4 and older_than(engine_version, "0.5.5"):
        max_bs = 16
    cps = int(chunked_prefill_size) if chunked_prefill_size is not None else cps_default
    par = tp_size * pp_size
    if older_than(engine_version, "0.5.3"):
        gib = 2.8 + par / 10 if gpu_mib < 35 * 1024 else 9.5 + par / 2 if gpu_mib < 90 * 1024 else \
            12 + par / 2 if gpu_mib < 160 * 1024 else 32
        terms = {f"fixed reserve for a GPU of {gpu_mib / 1024:,.0f} GiB": gib * 1024,
                 "speculative draft": 2 * 1024 if speculative else 0.0,
                 "DP attention": 4 * 1024 if attn_dp_size > 1 else 0.0}
        reserved = sum(terms.values())
        return MemFraction(round((gpu_mib - reserved) / gpu_mib, 3), reserved, terms, cps, max_bs)
    act_name, act = activation_term(cps, max_prefill_tokens)
    terms = {"base": 512.0, act_name: act, "CUDA graphs": max_bs * 2.0, "tp x pp / 8 x 1024": par / 8 * 1024}
    if attn_dp_size > 1:
        terms["DP attention"] = max_bs * attn_dp_size * 3 + (max_bs * attn_dp_size * 1.5 if max_bs > 300 else 0)
    reserved = sum(terms.values())
    if gpu_mib > 60 * 1024 and reserved < 10 * 1024:
        terms["floor to 10 GiB"] = 10 * 1024 - reserved
        reserved = 10 * 1024
    spec = str(speculative or "").upper()
    if spec and spec != "NGRAM":  # after the floor: a standalone draft 6 GiB, an EAGLE / MTP head 2 GiB (module doc)
        terms["speculative draft"] = 6 * 1024 if spec == "STANDALONE" else 2 * 1024
        reserved += terms["speculative draft"]
    return MemFraction(round((gpu_mib - reserved) / gpu_mib, 3), reserved, terms, cps, max_bs)
