"""sluice.torch: a plan's micro-batches as the packed tensors a varlen attention kernel takes.

A plan dispatches one iteration's batch across the pipelines of its chosen strategy; every pipeline is one
data-parallel replica (its tp·pp GPUs hold one copy of the model), so pipeline j of the plan *is* data-parallel
rank j's share of the batch, in ``plan.pipelines`` order. For that rank, ``micro_batches`` packs each of its
micro-batches into one token tensor with the ``cu_seqlens``/``max_seqlen`` of FlashAttention's varlen interface,
position ids that restart at 0 at every sequence and next-token labels that never cross a sequence boundary.
Summing every micro-batch's per-token losses on every rank and dividing by ``loss_normaliser(plan)`` gives the
mean loss of the unpacked batch; gradients then need a sum (not a mean) across the data-parallel ranks. ``pack``
packs any list of sequences the same way, for micro-batches a plan does not list (a flex CP group's).

Importing this module needs PyTorch; nothing else in sluice does.
"""
from __future__ import annotations

import functools
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional, Union

try:
    import torch
    import torch.nn.functional as F
except ImportError as error:
    raise ImportError(
        f"sluice.torch needs PyTorch, which failed to import ({error}); the rest of sluice works without it"
    ) from error

from . import IterationPlan, Planned, RankPlacement

__all__ = [
    "IGNORE_INDEX",
    "PackedMicroBatch",
    "micro_batches",
    "pack",
    "loss_normaliser",
    "block_causal_mask",
    "varlen_attention",
    "RankGroups",
    "process_groups",
]

# The ignore_index default of torch.nn.functional.cross_entropy.
IGNORE_INDEX = -100

PlanLike = Union[IterationPlan, Planned]
Sequences = Union[Sequence["torch.Tensor"], Mapping[int, "torch.Tensor"]]


@dataclass
class PackedMicroBatch:
    """One micro-batch of one pipeline, packed: its sequences back to back, in the plan's order.

    tokens, positions, labels: 1-D int64 tensors of the micro-batch's token count; positions restart at 0 at every
    sequence; labels are the next token within the sequence and IGNORE_INDEX at each sequence's last token.
    cu_seqlens: int32, the sequences' start offsets and the total (len(sequence_ids) + 1 entries).
    max_seqlen: the longest sequence. target_count: labels that are not IGNORE_INDEX.
    loss_normaliser: the whole iteration's target count, across all pipelines (see loss_normaliser).
    """

    tokens: torch.Tensor
    positions: torch.Tensor
    labels: torch.Tensor
    cu_seqlens: torch.Tensor
    max_seqlen: int
    sequence_ids: list[int]
    target_count: int
    loss_normaliser: int


def _iteration_plan(plan: PlanLike) -> tuple[IterationPlan, Optional[dict[int, int]]]:
    """The plan and, for a Planner's item, each sequence's length by id."""
    if isinstance(plan, Planned):
        return plan.plan, dict(zip(plan.ids.tolist(), plan.lengths.tolist()))
    if isinstance(plan, IterationPlan):
        return plan, None
    raise TypeError(f"plan must be a sluice.IterationPlan or a sluice.Planned, got {type(plan).__name__}")


def loss_normaliser(plan: PlanLike) -> int:
    """The iteration's next-token targets across all pipelines: its tokens minus its sequences.

    Taken from the plan alone, so every data-parallel rank knows it without seeing the others' sequences.
    """
    iteration, _ = _iteration_plan(plan)
    return sum(
        micro_batch.tokens - len(micro_batch.sequence_ids)
        for pipeline in iteration.pipelines
        for micro_batch in pipeline.micro_batches
    )


def _sequence(sequences: Sequences, sequence_id: int) -> torch.Tensor:
    if isinstance(sequences, Mapping):
        found = sequences.get(sequence_id)
    else:
        found = sequences[sequence_id] if 0 <= sequence_id < len(sequences) else None
    if found is None:
        raise ValueError(f"sluice.torch: the plan's sequence id {sequence_id} is not in sequences")
    tokens = torch.as_tensor(found)
    if tokens.dim() != 1 or tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise ValueError(
            f"sluice.torch: sequence {sequence_id} must be a 1-D integer tensor, "
            f"got shape {tuple(tokens.shape)} of {tokens.dtype}"
        )
    return tokens


def micro_batches(
    plan: PlanLike,
    sequences: Sequences,
    *,
    pipeline: int,
    device: Optional[Union[str, torch.device]] = None,
) -> list[PackedMicroBatch]:
    """Pipeline `pipeline`'s micro-batches (data-parallel rank `pipeline`'s share), packed, in execution order.

    plan: an IterationPlan, or a Planner's Planned item (whose lengths are then checked sequence by sequence).
    sequences: token tensors by sequence id, a list indexed by id or a dict; only this pipeline's ids are read.
    device: where the tensors go (default: where the sequences are).
    """
    iteration, lengths = _iteration_plan(plan)
    pipelines = iteration.pipelines
    try:
        rank = operator.index(pipeline)  # NumPy integers too
    except TypeError:
        rank = None
    if rank is None or not 0 <= rank < len(pipelines):
        raise ValueError(f"sluice.torch: pipeline must be in [0, {len(pipelines)}) for this plan, got {pipeline!r}")
    normaliser = loss_normaliser(iteration)
    packed = []
    for index, micro_batch in enumerate(pipelines[rank].micro_batches):
        batch = pack(sequences, micro_batch.sequence_ids.tolist(), loss_normaliser=normaliser, device=device,
                     lengths=lengths)
        if len(batch.tokens) != micro_batch.tokens:
            raise ValueError(
                f"sluice.torch: pipeline {rank}, micro-batch {index}: its sequences have {len(batch.tokens)} "
                f"tokens, the plan has {micro_batch.tokens}"
            )
        packed.append(batch)
    return packed


def pack(
    sequences: Sequences,
    sequence_ids: Sequence[int],
    *,
    loss_normaliser: int,
    device: Optional[Union[str, torch.device]] = None,
    lengths: Optional[Mapping[int, int]] = None,
) -> PackedMicroBatch:
    """The sequences ``sequence_ids`` (not empty) packed back to back in that order, as ``micro_batches`` packs a
    plan's micro-batch: for micro-batches a plan does not list, such as a flex CP group's
    (``sluice.context_parallel.flex_cp_work``). lengths: each id's planned length, checked when given.
    """
    ids = [operator.index(sequence_id) for sequence_id in sequence_ids]
    if not ids:
        raise ValueError("sluice.torch: a micro-batch needs at least one sequence")
    parts = [_sequence(sequences, sequence_id) for sequence_id in ids]
    sizes = [len(part) for part in parts]
    for sequence_id, size in zip(ids, sizes):
        if size == 0 or (lengths is not None and size != lengths[sequence_id]):
            expected = "at least 1" if lengths is None else lengths[sequence_id]
            raise ValueError(f"sluice.torch: sequence {sequence_id} has {size} tokens, the plan has {expected}")
    tokens = torch.cat([part.to(device=device, dtype=torch.int64) for part in parts])
    target = tokens.device
    size_tensor = torch.tensor(sizes, dtype=torch.int64, device=target)
    ends = torch.cumsum(size_tensor, 0)
    starts = ends - size_tensor
    positions = torch.arange(len(tokens), device=target) - torch.repeat_interleave(starts, size_tensor)
    labels = torch.roll(tokens, -1)
    labels[ends - 1] = IGNORE_INDEX  # a sequence's last token predicts nothing: no target across a boundary
    cu_seqlens = torch.cat([torch.zeros(1, dtype=torch.int64, device=target), ends]).to(torch.int32)
    return PackedMicroBatch(
        tokens=tokens,
        positions=positions,
        labels=labels,
        cu_seqlens=cu_seqlens,
        max_seqlen=max(sizes),
        sequence_ids=ids,
        target_count=len(tokens) - len(ids),
        loss_normaliser=loss_normaliser,
    )


def block_causal_mask(cu_seqlens: torch.Tensor) -> torch.Tensor:
    """A (total, total) boolean mask, True where query i may attend key j: same sequence and j <= i."""
    cu = cu_seqlens.to(torch.int64)
    sizes = cu[1:] - cu[:-1]
    total = int(cu[-1])
    segment = torch.repeat_interleave(torch.arange(len(sizes), device=cu.device), sizes)
    index = torch.arange(total, device=cu.device)
    return (segment[:, None] == segment[None, :]) & (index[None, :] <= index[:, None])


def _causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention of one sequence, (1, heads, length, head_dim) each (4-D, as SDPA's fused kernels need),
    at the default 1/sqrt(head_dim) scale."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # PyTorch < 2.0 has no SDPA: the same computation, the softmax in float32 at least.
    scores = (q @ k.transpose(-2, -1)).to(torch.promote_types(q.dtype, torch.float32)) / math.sqrt(q.shape[-1])
    length = q.shape[-2]
    causal = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    return (scores.softmax(-1).to(v.dtype)) @ v


@functools.lru_cache(maxsize=None)
def _flash_attn_varlen_func():
    """FlashAttention's varlen kernel where the flash_attn package is installed (looked up once), else None."""
    try:
        from flash_attn import flash_attn_varlen_func
    except ImportError:
        return None
    return flash_attn_varlen_func


def varlen_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    *,
    softmax_scale: Optional[float] = None,
) -> torch.Tensor:
    """Causal attention within each packed sequence: q, k, v of shape (total, heads, head_dim), as
    flash_attn_varlen_func takes them; returns (total, heads, head_dim)."""
    if q.dim() != 3 or k.shape != q.shape or v.shape[:2] != q.shape[:2]:
        raise ValueError(
            f"sluice.torch: q, k, v must be (total, heads, head_dim) alike, got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    flash_attn_varlen_func = _flash_attn_varlen_func()
    if flash_attn_varlen_func is not None and q.is_cuda and q.dtype in (torch.float16, torch.bfloat16):
        cu = cu_seqlens.to(device=q.device, dtype=torch.int32)
        return flash_attn_varlen_func(q, k, v, cu, cu, max_seqlen, max_seqlen, softmax_scale=softmax_scale, causal=True)
    if softmax_scale is not None:
        # Folded into q so that every PyTorch version's SDPA (no scale argument before 2.1) applies it.
        q = q * (softmax_scale * math.sqrt(q.shape[-1]))
    # One causal call per sequence: sum(l²) work and no (total, total) mask, against total² for one call with
    # block_causal_mask; and is_causal lets SDPA pick its flash kernel, which takes no explicit mask.
    bounds = cu_seqlens.tolist()
    outputs = [
        _causal_attention(*(t[start:end].transpose(0, 1)[None] for t in (q, k, v)))[0].transpose(0, 1)
        for start, end in zip(bounds[:-1], bounds[1:])
    ]
    return outputs[0] if len(outputs) == 1 else torch.cat(outputs)


@dataclass
class RankGroups:
    """This process's torch.distributed groups of a rank placement: its TP group (the shards of its stage), its PP
    group (its pipeline's stages at its TP shard and CP rank), its DP group (the same stage and shard of every
    pipeline of its scheme and every CP rank) and its CP group (the ranks of its stage and shard that share each
    sequence; None, with ``cp_ranks`` just this rank, when its scheme has no context parallelism), with their global
    ranks. Under a hybrid CP of Ulysses degree U, ``ulysses`` and ``ring`` split the CP group: U consecutive CP ranks,
    and the CP ranks of this one's Ulysses rank (``sluice.context_parallel.hybrid_attention``'s groups); else None."""

    tp: object
    pp: object
    dp: object
    tp_ranks: list[int]
    pp_ranks: list[int]
    dp_ranks: list[int]
    cp: object
    cp_ranks: list[int]
    ulysses: object = None
    ring: object = None


def process_groups(placement: RankPlacement, *, timeout=None) -> RankGroups:
    """Creates every TP, PP, DP and CP group of ``placement`` (``sluice.rank_placement``) and returns this process's.

    torch.distributed must be initialised over the placement's GPUs, one process each; every process must call
    this, since creating a group is collective over the world (groups are made in one order: all TP groups, then
    PP, DP and CP, then the hybrid CP groups' Ulysses and ring groups).
    """
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("sluice.torch: torch.distributed is not initialised (init_process_group)")
    if not isinstance(placement, RankPlacement):
        raise TypeError(f"placement must be a sluice.RankPlacement, got {type(placement).__name__}")
    gpus = placement.placement.gpus
    if dist.get_world_size() != gpus:
        raise ValueError(
            f"sluice.torch: the placement has {gpus} GPUs, torch.distributed {dist.get_world_size()} processes"
        )
    rank = dist.get_rank()
    options = {} if timeout is None else {"timeout": timeout}
    mine = {}
    for kind in ("tp", "pp", "dp", "cp"):
        for ranks in getattr(placement.groups, kind):
            group = dist.new_group(list(ranks), **options)
            if rank in ranks:
                mine[kind] = (group, list(ranks))
    for pipeline in placement.placement.pipelines:  # then a hybrid CP group's Ulysses and ring groups
        scheme = pipeline.scheme
        if not 1 < scheme.ulysses < scheme.cp:
            continue
        for stage in pipeline.stages:
            for t in range(scheme.tp):
                ranks = list(stage.ranks)[t :: scheme.tp]  # the CP ranks of TP shard t, in CP rank order
                for kind, parts in (("ulysses", [ranks[r : r + scheme.ulysses]
                                                 for r in range(0, scheme.cp, scheme.ulysses)]),
                                    ("ring", [ranks[u :: scheme.ulysses] for u in range(scheme.ulysses)])):
                    for part in parts:
                        group = dist.new_group(part, **options)
                        if rank in part:
                            mine[kind] = (group, part)
    cp, cp_ranks = mine.get("cp", (None, [rank]))
    return RankGroups(
        tp=mine["tp"][0], pp=mine["pp"][0], dp=mine["dp"][0],
        tp_ranks=mine["tp"][1], pp_ranks=mine["pp"][1], dp_ranks=mine["dp"][1], cp=cp, cp_ranks=cp_ranks,
        ulysses=mine.get("ulysses", (None,))[0], ring=mine.get("ring", (None,))[0],
    )
