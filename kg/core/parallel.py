"""Bulk work over many inputs: spread over the cores (worker processes), without the garbage collector's rescans.

``map_chunks(fn, context, items)`` returns ``[fn(context, chunk) for chunk in chunks]`` for consecutive
chunks of ``items``, in order, computed in this process and in forked worker processes at once: this
process takes chunks from the front, the workers from the back, and a chunk no worker has started
yet is taken back, so both ends meet wherever the machine's load puts them. Only the results travel
(pickled); the workers see ``fn``, ``context`` and ``items`` because they are forked after these are
set. Sequential (no process) when there are fewer than ``min_items`` items, one usable core, no
``fork`` on this platform, ``OPTKG_JOBS=1``, or when called from inside a worker.

``paused_gc()``: building millions of small containers (a 10,000-entry catalog is ~2.4 million)
makes CPython's cyclic collector rescan the growing heap over and over; plain data read from files
holds no cycles, so the collector is paused while it is built and runs as usual afterwards.

``frozen_gc()``: a sweep evaluates thousands of stacks over a heap (catalog, rules, tables) it does not change, and
makes few cycles (a 2,048-stack sweep left ~1,600 unreachable objects); the collector's passes walked that heap
again and again (~17 % of a 40-stack sweep). Inside the block that heap is frozen (``gc.freeze``: out of the
collector's reach, not freed) and automatic collection is off; ``gc_tick()`` (once per stack) collects the young
generations every ``GC_TICKS`` calls, so cycles made meanwhile are still freed and memory stays bounded.
"""
from __future__ import annotations

import contextlib
import gc
import os
from typing import Any, Callable, Iterator, Sequence

_JOB: tuple[Callable[[Any, Sequence[Any]], Any], Any, list[Sequence[Any]]] | None = None


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector off inside the block (and back to how it was after it). What the block made
    joins the oldest generation (as at the end of ``frozen_gc``): the first young collection after the block would
    otherwise walk all of it, and the next ones again as it ages (at 10,000 techniques ~1 s of CPU after the
    catalog was read)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


GC_TICKS = 10_000
_TICKS = [0, False]  # calls of gc_tick since the last collection, whether a frozen_gc block is open


@contextlib.contextmanager
def frozen_gc() -> Iterator[None]:
    """The objects alive now frozen out of the cyclic collector's passes and automatic collection off inside the
    block (module doc); as before after it. Nested, after another ``gc.freeze`` or with the collector off: no
    change."""
    if gc.get_freeze_count() or not gc.isenabled():
        yield
        return
    gc.freeze()
    gc.disable()
    _TICKS[:] = [0, True]
    try:
        yield
    finally:
        _TICKS[:] = [0, False]
        gc.freeze()  # what the block made joins the oldest generation too, not the youngest: the first collection
        gc.unfreeze()  # after the block would otherwise walk all of it (most is freed with the sweep's memos)
        gc.enable()


def gc_tick() -> None:
    """Inside ``frozen_gc``: every ``GC_TICKS``-th call collects what was made since the last one (the two young
    generations; what survives is not looked at again)."""
    t = _TICKS
    if t[1]:
        t[0] += 1
        if t[0] >= GC_TICKS:
            t[0] = 0
            gc.collect(1)


def cores() -> int:
    """CPUs this process may run on; ``OPTKG_JOBS`` (a positive whole number) overrides it."""
    env = os.environ.get("OPTKG_JOBS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _run(i: int) -> Any:
    """In a worker: chunk ``i`` of the job this process was forked with."""
    assert _JOB is not None
    gc.disable()  # a worker lives for one job; its heap is freed when it exits
    fn, context, chunks = _JOB
    return fn(context, chunks[i])


def map_chunks(fn: Callable[[Any, Sequence[Any]], Any], context: Any, items: Sequence[Any], *,
               min_items: int, chunks_per_core: int = 8) -> list[Any]:
    """``[fn(context, chunk) for chunk in chunks of items]`` in order, over the cores (see the module doc).

    ``fn`` must be a module-level function and its results picklable; it must not depend on which
    process runs it. An exception in a worker is raised here, as it would be sequentially.
    """
    global _JOB
    import multiprocessing

    n = cores()
    if len(items) < min_items or n < 2 or _JOB is not None or "fork" not in multiprocessing.get_all_start_methods():
        return [fn(context, items)] if items else []
    size = max(1, -(-len(items) // (n * chunks_per_core)))
    chunks = [items[i:i + size] for i in range(0, len(items), size)]
    from concurrent.futures import ProcessPoolExecutor

    results: list[Any] = [None] * len(chunks)
    _JOB = (fn, context, chunks)
    try:
        pool = ProcessPoolExecutor(max_workers=n - 1, mp_context=multiprocessing.get_context("fork"))
        try:
            futures = {i: pool.submit(_run, i) for i in reversed(range(len(chunks)))}  # workers start at the back
            mine = set()
            for i in range(len(chunks)):  # this process from the front, taking back what no worker started
                if futures[i].cancel():
                    results[i] = fn(context, chunks[i])
                    mine.add(i)
            for i, fut in futures.items():
                if i not in mine:
                    results[i] = fut.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    finally:
        _JOB = None
    return results
