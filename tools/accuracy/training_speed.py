"""Training speed against published measured throughput: ``make accuracy`` (training half).

Rows: tools/accuracy/training_rows.yaml - each a real optkg training stack (``stack:``) with the tokens/s per
GPU its source measured (``measured``), the source's file and line, what the source leaves open and was
assumed (``assumed``), and rows kept out with the reason (``excluded``). Sources: NVIDIA Megatron-Bridge /
NeMo performance summaries, the Megatron-LM README tables, torchtitan's benchmark pages, llm-foundry's FSDP
benchmark tables (see the file's ``sources``).

Split: a row's configuration group is its stack without the name (the same layout measured in several
container releases is one group); a group is held out when ``int(sha256(group)[:8], 16) % 10 < 3``. The
constants of kg/speed/training/constants.yaml are fitted on train rows only (``--fit``: least squares on
log(predicted / measured), scipy); held-out rows are only scored.

Usage: ``python tools/accuracy/training_speed.py [--fit] [--check] [--rows]``: writes
docs/training-speed-accuracy.md (``--check``: only verifies that it is current).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

ROWS = HERE / "training_rows.yaml"
DOC = REPO / "docs" / "training-speed-accuracy.md"
CONSTANTS = REPO / "kg" / "speed" / "training" / "constants.yaml"
LIMIT = 0.20  # issue 29: <= 20 % error on each held-out cited row


def load_rows() -> tuple[dict, list[dict]]:
    import yaml
    d = yaml.load(ROWS.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return d["sources"], d["rows"]


def group_of(row: dict) -> str:
    st = {k: v for k, v in row["stack"].items() if k != "name"}
    return json.dumps({"stack": st, "override": row.get("hardware_override")}, sort_keys=True)


def split_of(row: dict) -> str:
    return "held-out" if int(hashlib.sha256(group_of(row).encode()).hexdigest()[:8], 16) % 10 < 3 else "train"


@lru_cache(maxsize=1)
def _catalog():
    from kg import load_catalog
    return load_catalog()


def job_of(row: dict):
    """The row's stack as optkg reads it (kg.inputs.training.stackfile), with the source's hardware overrides."""
    from kg.core.yamlio import YamlDoc
    from kg.inputs.modelcfg import resolve_model
    from kg.inputs.training.stackfile import job_from_stack_doc
    job = job_from_stack_doc(YamlDoc(f"{ROWS.name}:{row['id']}", row["stack"]), f"{ROWS.name}:{row['id']}",
                             _catalog(), resolve_model)
    if row.get("hardware_override"):
        job.hardware = {**job.hardware, **row["hardware_override"]}
    return job


def measured_tokens(row: dict, job) -> float:
    """Tokens/s per GPU the source measured (TFLOP/s figures turned back with the source's own formula)."""
    from kg.frameworks.registry import get as framework_of
    from kg.speed.training.flops import megatron_r080_flops, narayanan_eq3_flops
    m = row["measured"]
    if "tokens_per_s_per_gpu" in m:
        return float(m["tokens_per_s_per_gpu"])
    shape = job.shape()
    vocab = framework_of(job.framework).padded_vocab(shape["vocab_size"], job.parallel()["tp_size"], job)
    seq = job.get("seq_length")
    formula = {"megatron-core-r0.8.0": megatron_r080_flops, "narayanan-2021-eq3": narayanan_eq3_flops}[m["flops_formula"]]
    tflops = m.get("model_tflops_per_gpu", m.get("hardware_tflops_per_gpu"))
    return tflops * 1e12 / (formula(shape, seq, vocab) / seq)


def prepared(rows: list[dict]) -> list[dict]:
    """Per row: its job's step inputs (kg.speed.training.step_inputs), measured tokens/s per GPU, split."""
    from kg.analyses.training import training_facts
    from kg.speed.training import SpeedNotEvaluable, step_inputs, step_time
    out = []
    for r in rows:
        if r.get("excluded"):
            out.append({"row": r, "split": split_of(r), "excluded": r["excluded"]})
            continue
        job = job_of(r)
        _, _, derived = training_facts(job)
        try:
            x = step_inputs(job, derived)
            step_time(x, yaml_constants())
        except SpeedNotEvaluable as e:
            out.append({"row": r, "split": split_of(r), "excluded": f"not evaluable: {e}"})
            continue
        out.append({"row": r, "split": split_of(r), "inputs": x, "measured": measured_tokens(r, job), "job": job,
                    "derived": derived})
    return out


def yaml_constants() -> dict:
    import yaml
    return yaml.safe_load(CONSTANTS.read_text(encoding="utf-8"))


def predict(p: dict, k: dict) -> float:
    from kg.speed.training import step_time
    x = p["inputs"]
    step = step_time(x, k)["step_s"]
    return x.microbatches * x.micro_batch * x.dp * x.seq / step / x.world


# ---------------------------------------------------------------------------------------------- fit
def _params(k: dict, rows: list[dict]) -> list[tuple[tuple, float, float, float]]:
    """(path in the constants, start, low, high) of every fitted constant the train rows can inform."""
    from kg.speed.training import efficiency, SpeedNotEvaluable
    cells = set()
    for p in rows:
        x = p["inputs"]
        table = k["gemm_efficiency"]
        gpu = x.gpu
        while isinstance(table.get(gpu), dict) and table[gpu].get("same_as"):
            gpu = table[gpu]["same_as"]
        cells.add(("gemm_efficiency", gpu, "fp8" if x.precision == "mxfp8" else x.precision))
        cells.add(("gemm_efficiency", gpu, "attention"))  # bounded below by 0.05, above by 0.75
    # attention kernels: at most 75 % of the BF16 peak (FlashAttention-3 reports 75 % on H100, Shah et al. 2024)
    out = [(c, k["gemm_efficiency"].get(c[1], {}).get(c[2], 0.5), 0.05, 0.75 if c[2] == "attention" else 0.95)
           for c in sorted(cells)]
    out += [
            (("elementwise_bytes",), k["elementwise_bytes"], 10.0, 150.0),
            (("overlap_window",), 2.0, 1.0, 20.0),
            (("mxfp8_factor",), k.get("mxfp8_factor", 0.9), 0.5, 1.2),
            (("gemm_half_width",), k.get("gemm_half_width", 100.0), 0.0, 2000.0),
            (("fp8_cast_bytes",), k.get("fp8_cast_bytes", 2.0), 0.0, 8.0),
            (("power_exponent",), k["power_exponent"], 0.0, 2.0)]
    out += [(("exposed", e), k["exposed"][e], 0.0, 1.0) for e in sorted(k["exposed"])]
    for kern, vals in sorted(k["kernels"].items()):  # noqa: B007
        if kern == "megatron":
            continue  # the reference: the GPU constants are Megatron's
        for mode in sorted(vals):
            out.append((("kernels", kern, mode), vals[mode], 0.2, 1.5))
    return out


def _set(k: dict, path: tuple, v: float) -> None:
    d = k
    for p in path[:-1]:
        d = d.setdefault(p, {})
    d[path[-1]] = float(v)


def fit(prep: list[dict], k: dict) -> dict:
    import copy

    import numpy as np
    from scipy.optimize import least_squares
    train = [p for p in prep if "inputs" in p and p["split"] == "train"]
    params = _params(k, train)
    k = copy.deepcopy(k)

    def res(v):
        for (path, *_), val in zip(params, v):
            _set(k, path, val)
        return np.array([math.log(predict(p, k) / p["measured"]) for p in train])
    sol = least_squares(res, [p[1] for p in params], bounds=([p[2] for p in params], [p[3] for p in params]))
    for (path, *_), val in zip(params, sol.x):
        _set(k, path, round(float(val), 4))
    return k


HEADER = """\
# Constants of kg.speed.training's step-time model (its module doc says what each term is).
# FITTED, not hand-set: tools/accuracy/training_speed.py --fit, least squares on log(predicted / measured)
# over the TRAIN split of tools/accuracy/training_rows.yaml (published rows, each cited there); held-out rows
# never enter the fit. Bounds: GEMM efficiencies <= 0.95 of the dense peak; attention <= 0.75 of the BF16
# peak (FlashAttention-3 reaches 75 % on H100, Shah et al. 2024); element-wise 10-150 bytes per token,
# hidden unit and layer pass. Not fitted: optimizer_bytes_per_param (mixed-precision Adam reads and writes
# the FP32 master weight, both moments and the gradient: ~32 bytes per parameter shard); link_efficiency
# (NCCL bus bandwidth ~80 % of the link's, nccl-tests); H200 = H100-SXM (same SMs and clocks, more HBM).
# gemm_efficiency: per GPU, the share of the dense tensor-core peak its GEMMs reach (bf16; fp8 per-tensor or
#   delayed scaling; MXFP8 = fp8 x mxfp8_factor), times n / (n + gemm_half_width) with n = hidden / TP;
#   attention: the core attention's share of the BF16 peak.
# kernels: a framework's kernels relative to Megatron's (eager / torch.compile; attention).
# exposed: the share of overlapped communication left on the critical path (never less than what exceeds
#   overlap_window x the compute beside it). power_exponent: compute x (power limit / TDP) ** exponent.
"""


def write_constants(k: dict, prep: list[dict]) -> None:
    import datetime

    import yaml
    train = sum(1 for p in prep if "inputs" in p and p["split"] == "train")
    held = sum(1 for p in prep if "inputs" in p and p["split"] == "held-out")
    k = dict(k)
    k["source"] = (f"fitted {datetime.date.today().isoformat()} on {train} train rows of tools/accuracy/"
                   f"training_rows.yaml (sha256 {hashlib.sha256(ROWS.read_bytes()).hexdigest()[:16]}); "
                   f"{held} held-out rows scored in docs/training-speed-accuracy.md")
    CONSTANTS.write_text(HEADER + yaml.safe_dump(k, sort_keys=False, width=120), encoding="utf-8")


def input_digest() -> str:
    """Digest of what the doc depends on: the rows, the constants, the step model and this harness."""
    h = hashlib.sha256()
    for f in [Path(__file__), ROWS, CONSTANTS, *sorted((REPO / "kg" / "speed" / "training").glob("*.py"))]:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def scored(prep: list[dict], k: dict) -> list[dict]:
    out = []
    for p in prep:
        r = p["row"]
        d = {"id": r["id"], "source": r["source"], "line": r.get("line"), "split": p["split"],
             "table": r.get("table", "")}
        if "inputs" in p:
            pred = predict(p, k)
            d.update(measured=p["measured"], predicted=pred, error=pred / p["measured"] - 1)
            from kg.analyses.training import _gpu_memory_bytes
            mem = (p["derived"].get("memory") or {}).get("total_bytes")
            gpu = _gpu_memory_bytes(p["job"].hardware)
            if mem and gpu and mem > gpu:
                d["memory_refusal"] = (mem, gpu)
        else:
            d["excluded"] = p["excluded"]
        out.append(d)
    return out


def _summary(rows: list[dict], split: str) -> str:
    errs = [abs(r["error"]) for r in rows if r["split"] == split and "error" in r]
    if not errs:
        return f"| {split} | 0 | - | - | - |"
    over = sum(1 for e in errs if e > LIMIT)
    return f"| {split} | {len(errs)} | {100 * sum(errs) / len(errs):.1f} % | {100 * max(errs):.1f} % | {over} |"


def render(sources: dict, rows: list[dict], k: dict, why: str = "") -> str:
    lines = [f"<!-- generated by tools/accuracy/training_speed.py (make accuracy); inputs {input_digest()} -->",
             "# Training speed: optkg against published measured throughput", "",
             "kg.speed.training estimates the step time, tokens/s per GPU and MFU of a training job (the Speed "
             "section of `optkg check` on a training stack). This page scores it against every published row of "
             "tools/accuracy/training_rows.yaml: each row is an optkg training stack with the tokens/s per GPU "
             "its source measured. The constants (kg/speed/training/constants.yaml) are fitted on the train "
             "split only; the held-out split (configuration groups with sha256 mod 10 < 3) is never fitted on. "
             f"Target: at most {int(LIMIT * 100)} % error on each held-out row.", "",
             f"Constants: {k.get('source', '')}.", "",
             "| split | rows | mean abs. error | max | over 20 % |", "|---|---:|---:|---:|---:|",
             _summary(rows, "train"), _summary(rows, "held-out"), ""]
    for split in ("held-out", "train"):
        miss = [r for r in rows if r["split"] == split and "error" in r and abs(r["error"]) > LIMIT]
        if miss:
            lines += [f"{split.capitalize()} rows over 20 %:", ""]
            lines += [f"- `{r['id']}`: {100 * r['error']:+.1f} % ({KNOWN_MISSES.get(r['id'], 'not explained')})"
                      for r in miss]
            lines.append("")
    lines += ([why] if why else []) + ["## Sources", ""]
    lines += [f"- `{key}`: [{v['title']}]({v['url']})" for key, v in sources.items()]
    for split in ("held-out", "train"):
        lines += ["", f"## {split.capitalize()} rows", "",
                  "| row | source:line | measured tok/s/GPU | optkg | error |", "|---|---|---:|---:|---:|"]
        for r in rows:
            if r["split"] == split and "error" in r:
                where = f"{r['source']}:{r['line']}" if r.get("line") else r["source"]
                lines.append(f"| `{r['id']}` | {where} | {r['measured']:,.1f} | {r['predicted']:,.1f} | "
                             f"{100 * r['error']:+.1f} % |")
    refused = [r for r in rows if r.get("memory_refusal")]
    lines += ["", "## Rows `optkg check` refuses although their source ran them", "",
              f"{len(refused)} scored rows have an estimated memory per GPU (kg.derive.training_memory) above the "
              "GPU's, so `optkg check` on them prints \"not evaluable: memory per GPU ... is over the GPU's\" "
              "instead of a speed: memory false alarms for the training-memory model (the tables do not list "
              "recomputation, CPU offload or FP8 weight storage where the recipes used them). The speed model is "
              "scored on them all the same.", ""]
    lines += [f"- `{r['id']}`: {r['memory_refusal'][0] / 2**30:,.1f} GiB estimated, GPU {r['memory_refusal'][1] / 2**30:,.1f} GiB"
              for r in refused]
    lines += ["", "## Rows not scored", ""]
    lines += [f"- `{r['id']}` ({r['split']}): {r['excluded']}" for r in rows if "excluded" in r]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------- llm-foundry memory count
def mpt_fsdp_peak_bytes(x, fp32_reduce: bool) -> int | None:
    """Peak bytes per GPU of an llm-foundry MPT row under FULL_SHARD (None otherwise), counted from llm-foundry
    0.3.0 and Composer 0.16 (the doc's "Why the three rows are over 20 %"). ``x``: the row's StepInputs; tokens
    ``t`` per micro-batch, hidden ``d``, ``L`` blocks, vocabulary ``V``:

    - model states 16 B per parameter / shard group: FP32 flat parameters, gradients, Adam moments;
    - activation checkpointing keeps each block's input (2 t d B) and the block being recomputed holds its
      saved tensors, 30 t d B in BF16 (LayerNorm outputs 2 + 2, QKV 6, attention output 2, the residual 2,
      MLP up 8 and GELU 8 per token and hidden unit), and its largest gradients (the two 4d-wide ones, 16 t d);
      without checkpointing every block holds 32 t d and the backward adds 16 t d (MPT has no dropout);
    - FSDP: two unsharded BF16 blocks (12 d^2 x 2 B each, one prefetched) and the block's BF16 gradient, plus
      its FP32 copy when the mixed precision reduces in FP32 (Composer DEFAULT);
    - the loss phase instead: BF16 logits and their gradient (4 t V; flash-attn's fused cross-entropy keeps no
      FP32 copy) and the unsharded tied embedding with its gradient (4 or 8 B x V d)."""
    if x.shard_level < 3:
        return None
    t, d, L = x.micro_batch * x.seq, x.hidden, x.layers
    vocab = round(x.logits_fwd / (2 * t * d))
    states = 16 * x.params_per_gpu / x.shard_group
    if x.full_recompute_fraction:
        kept, work = L * 2 * t * d, 46 * t * d
    else:
        kept, work = L * 32 * t * d, 16 * t * d
    fsdp = (5 if fp32_reduce else 3) * 24 * d * d
    loss = 4 * t * vocab + (8 if fp32_reduce else 4) * vocab * d
    return int(states + kept + max(work + fsdp, loss))


def llmfoundry_fp32_reduce(row: dict) -> bool:
    """The page's Precision amp_* rows run MP Mode DEFAULT (FP32 gradient reduction), its bf16 rows PURE: the A100
    40GB table and the 70B A100 80GB rows (README at 5e85bd6: 136 amp_* rows all DEFAULT, 80 bf16 rows all PURE)."""
    return not (row["table"].startswith("A100 40GB") or
                (row["table"].startswith("A100 80GB") and "-mpt-70b-" in row["id"]))


def memory_shares(prep: list[dict]) -> list[tuple[float, dict]]:
    """(peak share of the GPU, prepared row) of every FULL_SHARD llm-foundry row, highest first."""
    from kg.analyses.training import _gpu_memory_bytes
    out = []
    for p in prep:
        if "inputs" in p and p["row"]["source"] == "llm-foundry":
            peak = mpt_fsdp_peak_bytes(p["inputs"], llmfoundry_fp32_reduce(p["row"]))
            if peak is not None:
                out.append((peak / _gpu_memory_bytes(p["job"].hardware), p))
    return sorted(out, key=lambda sp: -sp[0])


# rows over the target, with what the row shows (kept in the doc; the test holds held-out rows' bound)
KNOWN_MISSES = {
    "llmfoundry-a100-40gb-mpt-70b-s2048-g64-mb2":
        "70B with FULL_SHARD over 64 A100 40GB at 2 sequences per GPU, one micro-batch per step: 383 GB of "
        "all-gathers and reduce-scatter per GPU at 200 GB/s (8 NICs of 25 GB/s per node) is 2.4 s beside 9.2 s "
        "of compute; measured 14.8 s per step, estimated 11.6 s. The same model at 128 GPUs and 4 sequences "
        "(376 tokens/s, a train row) is within 5 %. What costs the 64-GPU run 3 s more is not in the model; "
        "llm-foundry does not state that cluster's network, and this table predates the others and was not re-measured "
        "(see below)",
    # train rows (the fit sees them and still misses): both are MPT-30B at 8,192 tokens on 8 GPUs, one sequence
    "llmfoundry-h100-80gb-mpt-30b-s8192-g8-mb1":
        "same settings as the 4,096-token row, which is within 2 %; the page's own sweep script asks for another "
        "batch. The row runs near the GPU's memory (87 % by the count below), as do rows optkg estimates within "
        "4 %; the most likely cause, allocator thrashing, is not in the step model",
    "llmfoundry-a100-80gb-mpt-30b-s8192-g8-mb1":
        "the A100 80GB run of the H100 row above: at 4,096 tokens (814 tokens/s) the error is 2 %; see below",
}

# what llm-foundry's page and scripts show about the rows above (docs/training-speed-accuracy.md, "Why")
LLMF_PAGE = ("https://github.com/mosaicml/llm-foundry/blob/5e85bd62d4ec9e13353ca95877477602ab538e5b/"
             "scripts/train/benchmarking/README.md")
MISS_WHY = """\
## Why the three rows are over 20 %

The llm-foundry rows are the [MPT benchmark page]({page}).
Its H100 and A100 80GB tables were measured by PR #543 (b2a43a1, 2023-10-19; its rows are unchanged
since). That commit's `submit_benchmarks.py` runs llm-foundry v0.3.0 (`'git_branch': 'v0.3.0'`, line 401)
with `attn_impl: triton` (lines 144, 305), 30 batches (line 277); mpt-30b.yaml adds FULL_SHARD,
`limit_all_gathers`, non-reentrant activation checkpointing of each MPTBlock (v0.3.0
llmfoundry/models/mpt/modeling_mpt.py:619-620) and a 10-batch speed window. llm-foundry 0.3.0 pins Composer
0.16 (setup.py:50); its FSDP `DEFAULT` mixed precision (the rows' MP Mode) computes in BF16 and reduces
gradients in FP32 (composer 0.16.4 composer/trainer/mosaic_fsdp_utils.py:87-90).

**MPT-30B at 8,192 tokens on 8 GPUs** (README:100 H100, README:168 A100 80GB; both train rows):

- The published numbers agree with each other. llm-foundry's MFU (collect_results.py:158-165) with N =
  30,019,254,272, 48 layers, d = 7,168: 3 x 2 N s + 3 x 4 x 48 x d x s^2 = 1.7526e15 FLOPs per 8,192-token
  sequence. A100: x 4,594 / 8,192 sequences/s / (8 x 312e12) = 39.38 %, the page's 39.38. H100: x 11,072 /
  8,192 / (8 x 989.5e12) = 29.93 % (page 29.92).
- Nothing the table lists changes from the 4,096-token row (README:101, :169), which optkg estimates within 2 %:
  amp_bf16, DEFAULT, FULL_SHARD, activation checkpointing, no CPU offload, micro-batch 1, 21 micro-batches,
  global batch 168. Per token the model FLOPs grow by 1.9685e11 -> 2.1394e11 (the attention term), so the same
  MFU would give 0.920 x the 4,096-token throughput. The page shows 574 / 814 = 0.705 (A100, MFU 51.37 ->
  39.38 %) and 1,384 / 1,802 = 0.768 (H100).
- The page's own script does not give this row. At the cited commit, sweep.sh:85 (H100) and :188 (A100) submit
  MPT-30B at 8,192 tokens with `--microbatch_size 2 --accum 1`, a global batch of 1 x 8 x 2 = 16
  (submit_benchmarks.py:536-540), not the row's 168. Every other 30B 8-GPU line matches its row, e.g. 4,096 tokens
  at sweep.sh:76 / :179: micro-batch 1, accumulation 21 -> 168. The row's micro-batch is the last one the log
  printed (collect_results.py:140-143); GradAccum is computed, not logged (collect_results.py:194).
- Memory differs, but a count does not single the rows out. FULL_SHARD over 8 GPUs keeps 16 B x 30.02e9 / 8
  = 60.0 GB (55.9 GiB, 70 % of 80 GiB) of FP32 parameters, gradients and Adam states per GPU.
  - The other 30B 8-GPU rows hold at most 6,144 tokens per micro-batch (12 x 512, 6 x 1,024, 3 x 2,048); 4,096
    tokens holds 4,096. This row holds 8,192, at the smallest micro-batch there is.
  - `mpt_fsdp_peak_bytes` in tools/accuracy/training_speed.py counts the peak per GPU from llm-foundry 0.3.0
    and Composer 0.16: states, checkpointed block inputs, the recomputed block, FSDP's unsharded blocks and
    FP32 gradient copy, or the loss phase.
  - It puts this row at {p30_8k} of the GPU and the 3 x 2,048 rows at {p30_2k}. The sweep's micro-batch 2
    would be {p30_16k} before the CUDA context and NCCL's buffers, which is consistent with the row running
    micro-batch 1.
  - The same count puts other rows at the same level or higher, most of them estimated within 4 % (table
    below): 3B at 3 x 8,192 tokens without checkpointing is {p3b}. Session 8 found the same with
    kg.derive.training_memory.
  - What sets the two 30B rows apart in that table is the size of what FSDP allocates and frees once per block
    on its own streams: a 1.2 GB BF16 block and, under DEFAULT, a 2.5 GB FP32 gradient (3B: 0.16 and 0.31 GB).
    Near the limit the caching allocator frees its cache and retries cudaMalloc. Composer's authors say of
    this "throughput will collapse due to memory thrashing" (mosaicml/composer#1998), and Composer #3510
    lowers the micro-batch when it sees it.
- This is the most likely cause, but the page publishes no memory log, so neither whether it happened nor how
  much it slowed the step can be derived. A memory threshold would be chosen on these two rows alone and would
  misfire on the rows below, so optkg does not model it.
- The same A100 row in the table before #543 dropped less (c6cfb42:78-79: PURE, BF16 reduction,
  622 / 778 = 0.80), but other software changed too.
- In the same direction, also under 20 % and also not explained by the count: MPT-13B on 8 A100 40GB
  (README:236-244) keeps 60 % of the GPU in model states ({p13b} by the count). All five rows run 8,192
  tokens per micro-batch at MFU 43.9-44.9 %, against 51.9-52.6 % for the same model on 16-128 GPUs of that
  table, and optkg overestimates them by 11-14 %.

{table}

**MPT-70B on 64 A100 40GB, micro-batch 2** (README:233, held-out, reported as it comes out): its MFU agrees
with its tokens/s too (6 N s + 12 x 80 x 8,192 x s^2 with N = 64,862,437,376, s = 2,048, x 17,672 / 2,048
sequences/s / (64 x 312e12) = 35.87 %, the page's 35.87). The A100 40GB table was not re-measured by #543
("added back old numbers that I didn't reproduce", b2a43a1's message): it is the table before #543
(c6cfb42:167-168, in the README since 300cc5c of 2023-05-03; precision `bf16`, PURE), submitted from
mosaicml/examples (that commit's submit_benchmarks.py get_integrations) on a PyTorch 1.13 image. The
memory count above puts it at {p70b} of the GPU. optkg is not tuned on this row.
"""


def miss_why(prep: list[dict], k: dict) -> str:
    """MISS_WHY with the memory count's numbers and its table of the most loaded rows."""
    import dataclasses
    shares = memory_shares(prep)
    by_id = {p["row"]["id"]: (v, p) for v, p in shares}

    def pct(rid: str) -> str:
        return f"{100 * by_id['llmfoundry-' + rid][0]:.1f} %"
    v8, p8 = by_id["llmfoundry-a100-80gb-mpt-30b-s8192-g8-mb1"]
    from kg.analyses.training import _gpu_memory_bytes
    mb2 = dataclasses.replace(p8["inputs"], micro_batch=2, logits_fwd=2 * p8["inputs"].logits_fwd)
    p16 = mpt_fsdp_peak_bytes(mb2, True) / _gpu_memory_bytes(p8["job"].hardware)
    top = [(v, p) for v, p in shares if v >= 0.85]
    table = [f"FULL_SHARD llm-foundry rows the count puts at 85 % of the GPU or more ({len(top)} of {len(shares)}):",
             "", "| row | tokens per micro-batch | peak, share of the GPU | optkg error |", "|---|---:|---:|---:|"]
    table += [f"| `{p['row']['id']}` | {p['inputs'].micro_batch * p['inputs'].seq:,} | {100 * v:.1f} % | "
              f"{100 * (predict(p, k) / p['measured'] - 1):+.1f} % |" for v, p in top]
    return MISS_WHY.format(page=LLMF_PAGE, p30_8k=f"{pct('h100-80gb-mpt-30b-s8192-g8-mb1')} (H100) and "
                           f"{100 * v8:.1f} % (A100)", p30_2k=f"{pct('a100-80gb-mpt-30b-s2048-g8-mb3')} (A100)",
                           p30_16k=f"{100 * p16:.1f} %", p3b=pct("h100-80gb-mpt-3b-s8192-g8-mb3"),
                           p13b=pct("a100-40gb-mpt-13b-s8192-g8-mb1"), p70b=pct("a100-40gb-mpt-70b-s2048-g64-mb2"),
                           table="\n".join(table))


def main(argv: list[str] | None = None) -> int:
    import yaml
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="refit kg/speed/training/constants.yaml on the train split")
    ap.add_argument("--rows", action="store_true", help="print every row's error")
    ap.add_argument("--check", action="store_true", help="only check that docs/training-speed-accuracy.md is current")
    a = ap.parse_args(argv)
    if a.check:
        head = DOC.read_text(encoding="utf-8").splitlines()[0] if DOC.is_file() else ""
        if f"inputs {input_digest()}" not in head:
            print(f"{DOC.relative_to(REPO)} is stale: run `make accuracy` (tools/accuracy/training_speed.py)")
            return 1
        return 0
    sources, rows = load_rows()
    prep = prepared(rows)
    k = yaml_constants()
    if a.fit:
        write_constants(fit(prep, k), prep)
        k = yaml_constants()
    res = scored(prep, k)
    if a.rows:
        for r in res:
            if "error" in r:
                print(f"{r['split'][0].upper()} {r['id']:75s} {r['measured']:10.1f} {100 * r['error']:+6.1f}%")
    DOC.write_text(render(sources, res, k, miss_why(prep, k)), encoding="utf-8")
    for split in ("train", "held-out"):
        print(_summary(res, split))
    print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
