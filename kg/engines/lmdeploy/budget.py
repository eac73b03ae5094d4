"""LMDeploy's KV-cache memory per GPU: ``--cache-max-entry-count`` is a fraction of the memory *free after the weights
are loaded*, not of the total (``cache_max_entry_count: the percentage of gpu memory occupied by the k/v cache ...
For lmdeploy versions greater than v0.2.1, it defaults to 0.8, signifying the percentage of FREE GPU memory to be
reserved for the k/v cache``, lmdeploy 0.18.0 ``lmdeploy/messages.py:305-312``; ``--cache-max-entry-count`` "The
percentage of free gpu memory occupied by the k/v cache, excluding weights", ``lmdeploy/cli/utils.py:526-531``).

Both backends measure the free memory once the model is built (``ExecutorBase.init`` builds the model, then
``update_configs``: 0.18.0 ``lmdeploy/pytorch/engine/executor/base.py:428-433``; TurboMind builds its block manager
once the weights are loaded and takes ``free x ratio / block_size`` blocks, the free memory the least of the ranks'
``cudaMemGetInfo``: InternLM/lmdeploy@0bb835a ``src/turbomind/models/llama/BlockManager.cc:14-28, :101-105``, public
repository, release not pinned: the C++ source is not in the wheel):

    TurboMind:  kv = fraction x (total - weights - non-torch)
    PyTorch:    kv = fraction x (total - weights - non-torch - runtime reserve)

The PyTorch engine first takes a runtime reserve for the logits of a prefill step, ``(max_prefill_token_num +
2 x max_batches) x vocab_size x 2`` bytes, halving ``max_prefill_token_num`` until at least 16 blocks remain
(``base.py:219-238``; the fraction applies to what is left, ``:401``; its state caches for Mamba-style layers are not
modelled here). Activations and CUDA graphs come out of the remaining ``1 - fraction``, so the weights must fit the
device, not ``fraction x total``. ``non-torch`` (CUDA context, NCCL) is optkg's estimate calibrated on vLLM logs
(kg.derive.budget.non_torch_bytes). Which backend runs: ``--backend pytorch``, else TurboMind for the architectures
the release's TurboMind supports (catalog/support/lmdeploy-turbomind-archs.yaml), else PyTorch.

From lmdeploy 0.10.0 TurboMind also takes a value of 1 or more, as a number of KV blocks
(``TurbomindEngineConfig.__post_init__`` asserts only ``cache_max_entry_count > 0``: 0.10.0
``lmdeploy/messages.py:267``, 0.18.0 ``:429``; 0.9.2 ``:263`` asserted ``0 < x < 1``). ``BlockManager::BlockManager``
takes ``block_count`` blocks when it is not below 1, else ``free x ratio / block_size`` (InternLM/lmdeploy@0bb835a
``src/turbomind/models/llama/BlockManager.cc:34-39, :101-105``; public repository, release not pinned): the cache is
then ``floor(count) x bytes per block``, whatever is free. The PyTorch engine still asserts ``0 < x < 1`` (0.18.0
``:608``): rule lmdeploy-pytorch-cache-max-entry-count-not-below-one reports it.

Before the fix this budget was vLLM's (``ceil(total x fraction) - weights - activation - graphs - non-torch``):
Llama-3.1-70B TP 4 on an H100 was 27,189,344,994 B against LMDeploy's 37,120,496,369 B (26.8 % low).
"""
from __future__ import annotations

from dataclasses import replace

from kg.core.relcmp import older_than
from kg.derive.budget import GIB, BudgetInputs, BudgetLine, ServingBudget, non_torch_bytes, serving_budget_of

SOURCE = ("lmdeploy 0.18.0 lmdeploy/messages.py:305-312, lmdeploy/cli/utils.py:526-531 (a fraction of the free memory, "
          "excluding weights)")
PYTORCH_SOURCE = "lmdeploy 0.18.0 lmdeploy/pytorch/engine/executor/base.py:219-238, 401, 409-433"
TURBOMIND_SOURCE = ("InternLM/lmdeploy@0bb835a src/turbomind/models/llama/BlockManager.cc:101-105: free x ratio / "
                    "block_size (public repository; release not pinned)")
BLOCK_COUNT_SOURCE = ("lmdeploy 0.18.0 lmdeploy/messages.py:429 (TurboMind: cache_max_entry_count > 0); "
                      "InternLM/lmdeploy@0bb835a src/turbomind/models/llama/BlockManager.cc:34-39 (1 or more: a block "
                      "count; public repository, release not pinned)")
REFUSED_SOURCE = ("lmdeploy 0.9.2 lmdeploy/messages.py:263, :374 (both engines before 0.10.0); 0.18.0 :608 (the "
                  "PyTorch engine): assert 0 < cache_max_entry_count < 1")
MIN_BLOCKS = 16  # base.py:235-237: the runtime reserve shrinks until this many blocks remain


def runtime_reserve_bytes(free: float, fraction: float, max_prefill_token_num: int, max_batches: int,
                          vocab_size: int, bytes_per_block: float | None) -> tuple[float, int]:
    """(the PyTorch engine's runtime reserve in bytes, the max_prefill_token_num it settles on): ``(tokens + 2 x
    max_batches) x vocab x 2``, halving ``tokens`` while fewer than 16 blocks would remain (``base.py:219-238``)."""
    tokens = int(max_prefill_token_num)
    reserve = 0
    while tokens > 0:
        reserve = int((tokens + max_batches * 2) * vocab_size * 2)
        if not bytes_per_block or int((free - reserve) * fraction) // bytes_per_block >= MIN_BLOCKS:
            break
        tokens //= 2
    return float(reserve), tokens


def budget(inp: BudgetInputs, backend: str, bytes_per_block: float | None = None) -> ServingBudget:
    """LMDeploy's budget lines for one GPU on ``backend`` ('turbomind' or 'pytorch'; module doc): the device, what is
    in use once the model is built, and the (1 - fraction) share of the rest it leaves to activations and graphs,
    so that ``lines[0] - sum(rest)`` is the cache."""
    total, fraction = inp.total_memory_bytes, inp.gpu_memory_utilization
    lines = [BudgetLine("device memory", total, f"total {total / GIB:.2f} GiB (torch.cuda.mem_get_info total)", SOURCE)]
    lines.append(BudgetLine("weights", inp.weight_bytes_per_gpu, "estimated weights per GPU", inp.weights_source))
    if inp.draft_weight_bytes:
        lines.append(BudgetLine("draft weights", inp.draft_weight_bytes, "speculative-decoding draft per GPU",
                                "kg.derive.drafts"))
    nt, nt_err, nt_basis = non_torch_bytes(total, inp.tp_size)
    lines.append(BudgetLine("non-torch", nt, nt_basis, "vLLM logs (PR 10511, issue 10517): LMDeploy's not calibrated",
                            nt_err))
    notes = [f"LMDeploy applies --cache-max-entry-count {fraction:g} to the memory free after the weights are loaded "
             f"({backend}), not to the device total as vLLM's gpu_memory_utilization"]
    if backend == "pytorch":
        free = total - sum(x.bytes for x in lines[1:])
        reserve, tokens = runtime_reserve_bytes(free, fraction, inp.max_num_batched_tokens, inp.max_num_seqs,
                                                int(inp.model.vocab_size or 0), bytes_per_block)
        lines.append(BudgetLine("runtime reserve", reserve, f"(max_prefill_token_num {tokens:,} + 2 x max_batches "
                                f"{inp.max_num_seqs:,}) x vocab {inp.model.vocab_size or 0:,} x 2 B", PYTORCH_SOURCE))
        if tokens != inp.max_num_batched_tokens:
            notes.append(f"LMDeploy lowers max_prefill_token_num to {tokens:,} to keep {MIN_BLOCKS} KV blocks")
    free = max(0.0, total - sum(x.bytes for x in lines[1:]))
    if fraction >= 1:
        if backend == "turbomind" and not older_than(inp.engine_version, "0.10.0"):
            return _block_count_budget(inp, lines, free, bytes_per_block)
        # the engine config refuses it before anything loads (rules lmdeploy-*cache-max-entry-count-not-below-one):
        # no cache, rather than a share of 2,000 x the free memory
        who = " ".join(x for x in ("LMDeploy", inp.engine_version, f"({backend})") if x)
        lines.append(BudgetLine("held back", free, f"no cache: {who} refuses --cache-max-entry-count {fraction:g} "
                                "(it asserts 0 < x < 1)", REFUSED_SOURCE))
        return serving_budget_of(inp, lines, notes)
    lines.append(BudgetLine("held back", (1 - fraction) * free,
                            f"(1 - cache_max_entry_count {fraction:g}) x {free / GIB:.2f} GiB free after loading: "
                            "activations and CUDA graphs", PYTORCH_SOURCE if backend == "pytorch" else TURBOMIND_SOURCE))
    return serving_budget_of(inp, lines, notes)


def _block_count_budget(inp: BudgetInputs, lines: list[BudgetLine], free: float,
                        bytes_per_block: float | None) -> ServingBudget:
    """TurboMind with ``--cache-max-entry-count`` of 1 or more (lmdeploy >= 0.10.0): ``floor(count)`` blocks of the
    stack's KV block (module doc); the rest of the free memory is left to activations. Without the block's size (an
    unsized KV layout) nothing is subtracted beyond the weights and the budget is the free memory, with a note."""
    count = int(inp.gpu_memory_utilization)
    notes = [f"LMDeploy TurboMind reads --cache-max-entry-count {inp.gpu_memory_utilization:g} (1 or more) as "
             f"{count:,} KV blocks, not as a share of the free memory"]
    if not bytes_per_block:
        notes.append("the KV block's size is not known: the budget is all the memory free after loading")
        return serving_budget_of(inp, lines, notes)
    kv = count * float(bytes_per_block)
    if kv > free:
        notes.append(f"{count:,} blocks x {bytes_per_block:,.0f} B = {kv / GIB:.2f} GiB is more than the "
                     f"{free / GIB:.2f} GiB free after loading: TurboMind cannot allocate them (out of memory)")
    lines.append(BudgetLine("held back", free - kv, f"{free / GIB:.2f} GiB free after loading - {count:,} blocks x "
                            f"{bytes_per_block:,.0f} B: activations and CUDA graphs", BLOCK_COUNT_SOURCE))
    # the cache is the count asked for, exactly: the estimates' error bars fall on what is left, not on the cache
    return replace(serving_budget_of(inp, lines, notes), kv_bytes=kv, error_bytes=0.0)
