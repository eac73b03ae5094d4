"""Shared by the tests of single generated vLLM check rows (tests/test_vllm_*_rows.py): the refusals a stack meets
at one check site, from kg.analyses.enginechecks.generated_refusals."""
from __future__ import annotations

from typing import Any, Callable


def refused_at(command: str, site: tuple[str, int], catalog: Any, gpu: str = "H100-SXM", count: int = 1,
               release: str = "0.34.0", adjust: Callable[[Any, dict], None] | None = None) -> list[tuple[str, int]]:
    """``[site]`` when vLLM ``release`` refuses ``command`` on ``count`` x ``gpu`` at ``site`` (path, line), else
    ``[]``. ``adjust(stack, facts)`` may change the stack and its facts before the rows are evaluated."""
    import kg
    from kg.analyses.check import stack_facts
    from kg.analyses.enginechecks import generated_refusals
    st = kg.stack_from_command(command, catalog)
    st.engine_version = release
    st.hardware, st.gpu_count = catalog.resolve_hardware(gpu), count
    facts = dict(stack_facts(st)[1])
    if adjust is not None:
        adjust(st, facts)
    got = generated_refusals("vllm", release, facts, stack=st)["engine_check_refusals"]
    return sorted((r["path"], r["line"]) for r in got if (r["path"], r["line"]) == site)
