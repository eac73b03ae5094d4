"""PyTorch FSDP / FSDP2: jobs whose sharding is ``torch.distributed.fsdp`` (read from accelerate configs
and the Trainer's ``--fsdp`` by kg.frameworks.hf_trainer). Its accounting is the generic one: the
strategy decides what is partitioned (FULL_SHARD: ZeRO-3-like, SHARD_GRAD_OP: ZeRO-2-like, HYBRID_*:
within a shard group)."""
from __future__ import annotations

from kg.frameworks.protocol import Release, SpeedTraits, TrainingFramework


class FSDP(TrainingFramework):
    id = "fsdp"
    name = "PyTorch FullyShardedDataParallel (FSDP / FSDP2)"
    aliases = ("pytorch-fsdp", "fsdp2", "torch-fsdp")
    package = "torch"
    # torch 2.1.0: first release whose FSDP1 accepts mixed requires_grad with use_orig_params (rules/training.yaml)
    releases = (Release("2.1.0", "torch 2.1.0 wheel"), Release("2.14.1", "torch 2.14.1 wheel"))
    # FSDP prefetches the next unit's all-gather (BackwardPrefetch.BACKWARD_PRE, the default) and reduce-scatters
    # while the backward pass goes on; no tensor parallelism of its own
    speed_backend = SpeedTraits("fsdp", tp_overlap=False, dp_overlap=True,
                                source="PyTorch FSDP API docs (FullyShardedDataParallel backward_prefetch="
                                       "BackwardPrefetch.BACKWARD_PRE by default), https://pytorch.org/docs/stable/fsdp.html")


FRAMEWORKS = (FSDP(),)
