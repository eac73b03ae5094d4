"""KV-cache derivations for a model under TP/PP/DCP: bytes per token, replication, valid DCP, capacity."""
from __future__ import annotations

import argparse
from pathlib import Path

from kg.core.errors import OptkgError
from kg.core.textsafe import one_line, say


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", type=Path, help="a Hugging Face config.json (or a folder holding one)")
    src.add_argument("--model", help="a bundled hub id, e.g. Qwen/Qwen3-235B-A22B")
    p.add_argument("--tp", type=int, default=1, help="tp_size (default 1)")
    p.add_argument("--pp", type=int, default=1, help="pp_size (default 1)")
    p.add_argument("--dcp", type=int, default=1, help="dcp_size (default 1)")
    p.add_argument("--kv-cache-dtype", default="auto",
                   help="auto (model dtype), bfloat16, fp8, fp8_e4m3, fp8_e5m2, int8, nvfp4, fp4_e2m1, fp8_ds_mla (MLA)")
    p.add_argument("--kv-budget-gib", type=float, help="KV memory per GPU in GiB -> tokens and concurrency")
    p.add_argument("--gpu", help="a catalog GPU (H100-SXM, A100-80GB, ...): the KV budget check estimates for `vllm serve "
                                 "MODEL -tp N` on it (visible memory x the release's gpu_memory_utilization - weights - "
                                 "activation peak - CUDA graphs - non-torch; with --engine sglang, SGLang's: memory x "
                                 "mem_fraction_static - weights - non-torch), its compute capability and batch defaults")
    p.add_argument("--count", type=int, default=None, help="GPUs available (must hold tp x pp)")
    p.add_argument("--max-model-len", type=int, help="tokens per request for max concurrency")
    p.add_argument("--block-size", type=int, default=None,
                   help="KV block size in tokens (default: the release's, 16 before vLLM 0.34.0 and 64 from it, "
                        "catalog/engines/releases/vllm.yaml; at least 64 for sparse MLA, raised for Mamba hybrids)")
    p.add_argument("--max-num-batched-tokens", type=int, default=None,
                   help="tokens per scheduler step (default 8192, vllm serve on H100/H200); sliding-window layers "
                        "reserve two steps of it per request")
    p.add_argument("--mamba-ssm-cache-dtype", default=None,
                   help="SSM-state dtype of Mamba / Gated DeltaNet layers (auto, float32, bfloat16, float16; "
                        "vLLM --mamba-ssm-cache-dtype): sets the state page and so the hybrid block size")
    from kg.cli.common import add_gpu_args
    add_gpu_args(p, compute_capability=False)
    p.add_argument("--gpu-compute-capability", type=float, default=None,
                   help="compute capability of the GPU (default 9.0, Hopper): picks vLLM's GDN prefill kernel, "
                        "which decides the hybrid block alignment (64 tokens on FlashInfer, 16 on Triton)")
    p.add_argument("--engine-version", default=None,
                   help="vLLM release (default: the latest optkg knows): decides the hybrid KV-cache manager for chunked "
                        "local attention (Llama-4: off by default in 0.10.1-0.13.0, on from 0.14.0) and the tokens "
                        "in flight a sliding / chunked layer reserves (two batches from 0.26.0, one before)")
    p.add_argument("--disable-hybrid-kv-cache-manager", action=argparse.BooleanOptionalAction, default=None,
                   help="vLLM's flag: size sliding-window and chunked layers as full attention (--no-...: "
                        "ask for the manager explicitly; vLLM >= 0.13.0 refuses to start where it cannot have it)")
    p.add_argument("--engine", choices=("vllm", "sglang", "trtllm", "lmdeploy"), default="vllm",
                   help="sglang: SGLang 0.5.23's pools for --kv-budget-gib or --gpu's SGLang budget (the token pool "
                        "over the full-attention layers; the SWA pool or the Mamba / GDN state pool and the running "
                        "requests it allows), without vLLM's block lines; trtllm / lmdeploy: refused (their pools "
                        "are in `optkg check --cmd`)")
    p.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    import math
    import sys

    from kg.analyses.kvreport import kv_report
    from kg.inputs.modelcfg import load_config_file, resolve_model
    from kg.engines import get

    for flag, v in (("--tp", args.tp), ("--pp", args.pp), ("--dcp", args.dcp), ("--block-size", args.block_size),
                    ("--max-num-batched-tokens", args.max_num_batched_tokens)):
        if v is not None and v < 1:
            raise OptkgError(f"{flag}: expected a positive integer, found {v}")
    if args.kv_cache_dtype is not None and not str(args.kv_cache_dtype).strip():
        raise OptkgError("--kv-cache-dtype: empty value (give one such as auto or fp8, or drop the flag)")
    if args.max_model_len is not None:  # the check every stack input runs (check refuses the same values)
        from kg.inputs.settingcheck import checked_setting
        args.max_model_len = checked_setting("max_model_len", args.max_model_len, "--max-model-len")
    if args.kv_budget_gib is not None:  # as check / fit / sweep check it (at most the --gpu's memory: below)
        from kg.derive.kv import checked_kv_budget_gib
        args.kv_budget_gib = checked_kv_budget_gib(args.kv_budget_gib, "--kv-budget-gib")
    if not get(args.engine).kv_command:  # no vLLM plan for it: its own pool is check's (kg.engines.<engine>.kv)
        raise OptkgError(f"--engine {args.engine}: `optkg kv` reports vLLM's plan and SGLang's pools; "
                         f"{get(args.engine).title}'s KV pool is in `optkg check --cmd '<its launch command>' --gpu NAME`")
    model = load_config_file(args.config) if args.config else resolve_model(args.model)
    hardware, budget = None, None
    if args.count is not None and (args.count < 1 or args.count < args.tp * args.pp):
        raise OptkgError(f"--count: {args.count} GPU(s) cannot hold tp {args.tp} x pp {args.pp} = {args.tp * args.pp}"
                         if args.count >= 1 else f"--count: expected a positive integer, found {args.count}")
    if args.gpu is None and args.gpu_memory_gib is not None:
        raise OptkgError("--gpu-memory-gib describes the GPU --gpu names; give --gpu NAME too")
    if args.gpu is not None:
        import re
        if re.fullmatch(r"\s*[0-9]+(\.[0-9]*)?\s*", args.gpu):
            raise OptkgError(f"--gpu: '{args.gpu}' is a number; give a GPU name from catalog/hardware (H100-SXM, "
                             f"A100-80GB, ...), or --gpu-compute-capability {args.gpu.strip()} for the capability alone")
        from kg.engines.vllm.budget import gpu_default_budget
        from kg.derive.kv import check_parallel_sizes
        from kg.engines.vllm.kv_plan import default_max_num_batched_tokens
        from kg.knowledge.catalog import load_catalog
        from kg.cli.common import resolve_gpu_arg
        hardware = resolve_gpu_arg(args, load_catalog()[0])
        if args.gpu_compute_capability is None and hardware.get("compute_capability") is not None:
            args.gpu_compute_capability = float(hardware["compute_capability"])
        model = _runtime(model, args)
        if args.max_num_batched_tokens is None:
            mem = hardware.get("memory_gib")
            args.max_num_batched_tokens = default_max_num_batched_tokens(
                float(mem) if mem else None, str(hardware["id"]), hardware.get("compute_capability"),
                _engine_version(args.engine_version))
        if args.kv_budget_gib is not None:
            from kg.derive.kv import checked_kv_budget_gib
            checked_kv_budget_gib(args.kv_budget_gib, "--kv-budget-gib", hardware)
        else:
            check_parallel_sizes(model, args.tp, args.pp)
            from kg.analyses.kvreport import engine_default_budget
            budget = engine_default_budget(get(args.engine), model, hardware, args.tp, args.pp, load_catalog()[0],
                                           _engine_version(args.engine_version)) or \
                gpu_default_budget(model, hardware, args.tp, args.pp, engine_version=_engine_version(args.engine_version))
            args.kv_budget_gib = budget.kv_bytes / 2**30
    if args.gpu_compute_capability is not None and not (math.isfinite(args.gpu_compute_capability)
                                                        and 1.0 <= args.gpu_compute_capability < 100):
        raise OptkgError(f"--gpu-compute-capability: expected a value such as 8.0 or 9.0, found {args.gpu_compute_capability}")
    engine = get(args.engine)
    model = _runtime(model, args)
    cuda = hardware is None or str(hardware.get("vendor", "")).lower() == "nvidia"
    auto_kv = engine.auto_kv_cache_dtype(model, _engine_version(args.engine_version), args.kv_cache_dtype,
                                         args.gpu_compute_capability if cuda else None)
    if auto_kv:  # vLLM's 'auto' stores the checkpoint's KV format (kg.engines.vllm.kv_dtype)
        args.kv_cache_dtype = auto_kv["dtype"]
    out, lay, plan = kv_report(model, args.tp, args.pp, args.dcp, args.kv_cache_dtype, args.kv_budget_gib,
                               args.max_model_len, args.block_size, args.max_num_batched_tokens,
                               args.mamba_ssm_cache_dtype, args.gpu_compute_capability,
                               _engine_version(args.engine_version), args.disable_hybrid_kv_cache_manager)
    out.update(engine.kv_report_extras(model, args.tp, args.kv_budget_gib, args.kv_cache_dtype,
                                       args.mamba_ssm_cache_dtype, args.max_model_len))  # SGLang: its pools
    for w in model.warnings:
        say(f"optkg: note: {w}")
    from kg.inputs.effective import newer_release_note
    release_note = newer_release_note(args.engine or "vllm", _engine_version(args.engine_version))
    if release_note:
        out["release_note"] = release_note
        say(f"optkg: note: {release_note}")
    if auto_kv:
        out["kv_cache_dtype_from_checkpoint"] = auto_kv
    if hardware is not None:
        out["gpu"] = {"id": hardware["id"], "count": args.count}
    if budget is not None:
        out["kv_budget"] = {"source": budget.source_text(), "kv_bytes": budget.kv_bytes, "error_bytes": budget.error_bytes,
                            "lines": [dict(x.__dict__) for x in budget.lines]}
    if args.format == "json":
        from kg.output.report import to_json  # the text report below needs none of kg.output (issue 31)
        print(to_json(out), end="")
        return 0
    # the text is printed line by line below; people read it at 100 columns, wrapped like check's report
    import contextlib
    import io
    from kg.core.textsafe import fit_width
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        for w in out.get("warnings") or []:
            print(f"WARNING {w['rule_id']}: {w['message']}")
        L = lay
        if model.is_mla:
            # MLA caches one latent per token per layer, shared by every query head: KV heads and
            # head_dim are not the cache's shape (facts §1.5)
            print(f"{one_line(model.name)}: MLA, {model.num_attention_heads} query heads sharing one latent of "
                  f"kv_lora_rank {model.kv_lora_rank} + qk_rope_head_dim {model.qk_rope_head_dim} = "
                  f"{(model.kv_lora_rank or 0) + (model.qk_rope_head_dim or 0)} elements per token per layer, "
                  f"{model.num_hidden_layers} layers, {model.dtype}")
        else:
            print(f"{one_line(model.name)}: {model.attention.upper()}, {model.num_attention_heads} query heads, "
                  f"{model.num_key_value_heads} KV heads, head_dim {model.head_dim}, {model.num_hidden_layers} layers, {model.dtype}")
        per_layer = f"{L.bytes_per_token_layer_per_rank:,.0f} bytes/token/layer" if L.kv_cache_dtype.lower() in ("fp8_ds_mla", "nvfp4_ds_mla") \
            else f"{L.kv_element_bytes:g} bytes/element"
        print(f"  tp_size {L.tp_size}  pp_size {L.pp_size}  dcp_size {L.dcp_size}  kv_cache_dtype {L.kv_cache_dtype}"
              f" ({per_layer})" + (f", auto from {'' if auto_kv.get('reason') else 'checkpoint '}{auto_kv['checkpoint']}"
                                  f" ({auto_kv['source']})" if auto_kv else ""))
        print(f"  KV bytes/token, whole model          {L.bytes_per_token_model:,.0f}")
        if model.is_mla:
            print(f"  {'latent copies (one per TP rank)':<37}{L.tp_size}")
        else:
            print(f"  KV heads per rank                    {L.kv_heads_per_rank}")
        print(f"  KV-head replication                  {L.replication_factor:g}x")
        print(f"  KV bytes/token per GPU               {L.bytes_per_token_per_gpu:,.0f}"
              f"  (without replication: {L.bytes_per_token_per_gpu_unreplicated:,.0f})")
        if L.dcp_size > 1:
            print(f"  KV bytes per context token per GPU   {L.bytes_per_token_per_gpu_effective:,.0f}  (DCP-sharded)")
        blocks = not engine.kv_token_pool  # vLLM's block plan; an engine with a token pool (SGLang) prints its own
        if blocks:
            print(f"  valid DCP sizes (vLLM)               {L.valid_dcp_sizes}" + ("" if L.dcp_possible else "  (DCP impossible)"))
        ca = out.get("cross_attention")
        if ca:
            label = f"cross-attention (x{ca['layers']} layers)"
            print(f"  {label:<37}{ca['bytes_per_encoder_token_per_gpu']:,} bytes/encoder token"
                  f" per GPU; {ca['encoder_tokens_reserved_per_request']:,} encoder tokens ({ca['blocks_per_request']:,} blocks)"
                  " reserved per request")
        if plan is not None and blocks:
            print(f"  {'KV layer groups (vLLM)':<37}{plan.groups_text()}")
            if plan.hybrid_reason:
                print(f"  {'hybrid KV-cache manager (vLLM)':<37}{plan.hybrid_reason}")
            if plan.refused:
                print(f"WARNING hybrid-kv-cache-manager-refused: {plan.refused}")
        if "capacity" in out:
            c = out["capacity"]
            if budget is not None:  # the lines check prints for the same stack (kg.derive.budget)
                print(f"  {'KV budget per GPU (estimate)':<37}~{budget.kv_bytes / 2**30:,.1f} GiB ({budget.error_text}) on "
                      f"{hardware['id']}" + (f" x{args.count}" if args.count else ""))
                for i, line in enumerate(budget.lines):
                    print(f"    {('' if i == 0 else '- ') + line.name:<33}{line.bytes / 2**30:,.2f} GiB  {line.basis}")
            else:
                print(f"  KV budget per GPU (given)            {args.kv_budget_gib:g} GiB")
            if "num_blocks" in c and blocks:
                print(f"  {f'GPU blocks (vLLM, {plan.block_size}-token blocks)':<37}{c['num_blocks']:,}")
                print(f"  {f'blocks per request at {plan.max_model_len:,}':<36} {c['blocks_per_request']:,}"
                      f"  ({' + '.join(f'{g.groups} x {g.blocks_per_request:,} {g.kind}' if g.groups > 1 else f'{g.blocks_per_request:,} {g.kind}' for g in plan.specs)}"
                      + (f"; {plan.max_in_flight_tokens:,} tokens in flight, {plan.model_runner} model runner"
                         if any(g.kind in ("sliding", "chunked") for g in plan.specs) else "") + ")")
                print(f"  {'GPU KV cache size (vLLM)':<37}{c['gpu_kv_cache_size_tokens']:,} tokens")
            if blocks:  # a token-pool engine's tokens are its pool's (below)
                print(f"  KV tokens per GPU                    {c['kv_tokens_per_gpu']:,}")
                print(f"  {f'KV tokens, scheduler-wide (x dcp {L.dcp_size})':<37}{c['kv_tokens_total']:,}")
            fits, limit = c["max_model_len_that_fits"], out.get("max_model_len_limit")
            from kg.inputs.modelcfg import VLLM_NO_LENGTH_KEY_DEFAULT
            if blocks:  # no KV block fits: the lines above say so, there is no length to give
                if plan is not None and fits >= 1 << 31:  # window-bounded groups: the search's upper end, not a length
                    upto = f" ({limit:,} tokens for this model)" if limit else ""
                    print(f"  {'longest request that fits':<37}any length up to max_model_len{upto}; "
                          "the sliding / chunked groups stop growing past the window")
                elif limit is None and not args.max_model_len and fits > VLLM_NO_LENGTH_KEY_DEFAULT:
                    print(f"  {'longest request that fits':<37}{VLLM_NO_LENGTH_KEY_DEFAULT:,} tokens (vLLM's default: config.json "
                          f"has no length key; --max-model-len raises it; KV memory alone would hold {fits:,})")
                elif limit and fits > limit:
                    print(f"  {'longest request that fits':<37}{limit:,} tokens (the model's limit; KV memory alone "
                          f"would hold {fits:,})")
                else:
                    print(f"  {'longest request that fits':<37}{fits:,} tokens")
            if c["max_concurrency"] is not None and blocks:
                print(f"  max concurrency at {c['max_model_len']:,} tokens   {c['max_concurrency']:g}x")
        sp = out.get("sglang_pools")
        if sp:
            label = f"SGLang token pool ({sp['kind']})"
            print(f"  {label:<37}{sp['max_total_num_tokens']:,} tokens")
            if sp["swa_tokens"]:
                print(f"  {'SGLang SWA pool':<37}{sp['swa_tokens']:,} tokens")
            if sp.get("layers"):
                print(f"  {'SGLang pools serve':<37}{sp['layers']}")
            mp = sp.get("mamba")
            if mp:
                print(f"  {'SGLang Mamba state per request':<37}{mp['state_bytes_per_request']:,} bytes ({mp['ssm_dtype']} SSM state)")
                print(f"  {'SGLang Mamba state slots':<37}{mp['max_mamba_cache_size']:,} ({mp['memory_bytes'] / 2**30:,.2f} GiB, "
                      f"taken before the token pool)")
                print(f"  {'SGLang max running requests':<37}{mp['max_running_requests']:,}"
                      + (f"  (capped by the Mamba pool: {mp['slots_per_request']} slots per request, {mp['strategy']})"
                         if mp["capped_by_mamba"] else ""))
    sys.stdout.write(fit_width(buf.getvalue().rstrip("\n")) + "\n")
    return 0


def _engine_version(value: str | None) -> str | None:
    """``--engine-version`` as a release string (None: the latest optkg knows); OptkgError when unreadable."""
    if value is None:
        return None
    from kg.inputs.stack import check_engine_version
    return check_engine_version(value, "--engine-version", "a release")


def _runtime(model, args: argparse.Namespace):
    """``model`` as the engine runs it with --dtype auto (a float32 checkpoint in 16 bits), the note on stderr."""
    import sys

    from kg.analyses.weightfacts import runtime_model
    from kg.engines import get
    model, note = runtime_model(get(args.engine), model, None, args.gpu_compute_capability,
                                _engine_version(args.engine_version))
    if note:
        from kg.core.textsafe import fit_width
        sys.stderr.write(fit_width(f"optkg: note: {note}") + "\n")
    return model
