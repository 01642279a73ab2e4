"""sluice.context_parallel: context parallelism (CP) on torch.distributed, for packed variable-length micro-batches.

A CP group of ``cp`` ranks shares every sequence of a micro-batch. ``cp_shard`` says which tokens each rank holds:
the causal load balance of Megatron-LM's context parallelism, each sequence cut into 2·cp chunks and rank r given
chunks r and 2·cp−1−r, so that every rank has the same causal attention work. Lengths need not divide by 2·cp (the
chunks are then uneven by one token), a sequence shorter than 2·cp leaves some ranks without a chunk of it, and no
token is padded. Two attentions run over such shards, forward and backward:

- ``ring_attention``: ring attention (Liu et al., "Ring Attention with Blockwise Transformers for Near-Infinite
  Context", arXiv 2310.01889), as Megatron-LM's context parallelism runs it: each rank's K and V travel around the
  ring in cp−1 steps while the rank computes its queries against the block it holds, the blocks' results merged
  through their log-sum-exp; in the backward the blocks travel again with their dK and dV partial sums, which end
  on the rank that owns them.
- ``ulysses_attention``: DeepSpeed-Ulysses (Jacobs et al., arXiv 2309.14509, §3): an all-to-all turns "this rank's
  tokens × all heads" into "every token × heads/cp" for q, k and v, attention runs locally per sequence, and an
  all-to-all turns the output back; the heads must divide by cp.
- ``hybrid_attention``: USP (Fang and Zhao, "USP: A Unified Sequence Parallelism Approach for Long Context
  Generative AI", arXiv 2405.07719): Ulysses within groups of U consecutive CP ranks, ring attention across the
  cp/U groups; its shards nest the balance (``cp_shard(..., ulysses=U)``), as the C++ executor's do.

Both take this rank's rows of q, k and v (``shard.index`` of the packed micro-batch) and the micro-batch's
``cu_seqlens``, which every rank of the group knows, and return this rank's rows of the output. On CUDA with 16-bit
inputs the ring runs FlashAttention's varlen kernel (PyTorch's own) on each block; elsewhere its arithmetic is a
float32 reference (float64 inputs stay float64) that computes each sequence's queries against at most KEY_TILE of
its keys at a time, so a step holds heads × (a sequence's tokens on this rank) × KEY_TILE scores, never a
(total, total) mask. Ulysses runs ``sluice.torch.varlen_attention`` (FlashAttention's varlen kernel on CUDA where
installed, else attention sequence by sequence). ``ring_attention_serialized`` runs every rank's part of the ring
in one process, for checking and timing on one device.

CP groups may change from micro-batch to micro-batch (FlexSP, Wang et al., ASPLOS'25; ``sluice.solve_flex_cp``):
``FlexCPGroups`` creates a domain's pool of process groups once, every aligned block of each degree's units, and
``flex_cp_work`` says, per micro-batch of a ``FlexCpPlan``, which group a unit joins, as which rank, and on which
sequences; the attentions above then run in that group on that micro-batch.

Importing this module needs PyTorch; nothing else in sluice does.
"""
from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass
from typing import Optional

try:
    import torch
    import torch.distributed as dist
except ImportError as error:
    raise ImportError(
        f"sluice.context_parallel needs PyTorch, which failed to import ({error}); the rest of sluice works without it"
    ) from error

from .torch import varlen_attention

__all__ = [
    "CPShard",
    "FlexCPGroups",
    "FlexCPWork",
    "cp_shard",
    "flex_cp_work",
    "hybrid_attention",
    "ring_attention",
    "ring_attention_serialized",
    "ulysses_attention",
]


@dataclass
class CPShard:
    """Rank ``rank``'s share of a packed micro-batch under context parallelism of degree ``cp``.

    index: int64, the packed positions of the rank's tokens, sequence by sequence, each sequence's two chunks in
    order; select any per-token tensor of the micro-batch (tokens, labels, positions) with ``select``.
    positions: each of those tokens' position within its sequence (what RoPE needs). sequence: which sequence of
    cu_seqlens each token belongs to. cu_seqlens: int32 offsets of each sequence's tokens on this rank (a
    sequence may have none). max_seqlen: the most tokens of one sequence on this rank.
    """

    cp: int
    rank: int
    index: torch.Tensor
    positions: torch.Tensor
    sequence: torch.Tensor
    cu_seqlens: torch.Tensor
    max_seqlen: int

    def select(self, packed: torch.Tensor) -> torch.Tensor:
        """This rank's rows of a tensor of the packed micro-batch (its first dimension the packed tokens)."""
        return packed.index_select(0, self.index.to(packed.device))


def _positive_int(value, name: str) -> int:
    try:
        number = operator.index(value)
    except TypeError:
        number = None
    if number is None or number < 1:
        raise ValueError(f"sluice.context_parallel: {name} must be a positive integer, got {value!r}")
    return number


def _index_below(value, bound: int, name: str) -> int:
    try:
        number = operator.index(value)
    except TypeError:
        number = -1
    if not 0 <= number < bound:
        raise ValueError(f"sluice.context_parallel: {name} must be in [0, {bound}), got {value!r}")
    return number


def _sequence_lengths(cu_seqlens) -> list[int]:
    cu = torch.as_tensor(cu_seqlens)
    if cu.dim() != 1 or len(cu) < 2 or cu.dtype.is_floating_point or cu.dtype.is_complex or cu.dtype == torch.bool:
        raise ValueError(
            "sluice.context_parallel: cu_seqlens must be a 1-D integer tensor of at least two offsets, "
            f"got shape {tuple(cu.shape)} of {cu.dtype}"
        )
    bounds = cu.tolist()
    lengths = [end - start for start, end in zip(bounds[:-1], bounds[1:])]
    if bounds[0] != 0 or min(lengths) < 1:
        raise ValueError(
            f"sluice.context_parallel: cu_seqlens must start at 0 and increase strictly, got {bounds[:8]}"
            + ("..." if len(bounds) > 8 else "")
        )
    return lengths


def _balanced(count: int, parts: int, part: int) -> list[tuple[int, int]]:
    """Chunks `part` and 2·parts−1−part of `count` items cut at floor(i·count / (2·parts))."""
    chunks = 2 * parts
    return [(chunk * count // chunks, (chunk + 1) * count // chunks) for chunk in (part, chunks - 1 - part)]


def cp_shard(cu_seqlens, cp: int, rank: int, *, ulysses: int = 1) -> CPShard:
    """Rank ``rank``'s tokens of the packed micro-batch whose sequences ``cu_seqlens`` bounds, CP degree ``cp``.

    Sequence s of length L is cut at start + floor(i·L / (2·cp)), i = 0..2·cp; rank r holds chunks r and 2·cp−1−r.
    With ``ulysses`` U of the hybrid (1 < U < cp, dividing it), the balance nests: ring rank ρ = r // U holds chunks
    ρ and 2R−1−ρ of 2R = 2·cp/U, and Ulysses rank r mod U chunks r mod U and 2U−1−(r mod U) of that share's tokens.
    """
    cp = _positive_int(cp, "cp")
    rank = _index_below(rank, cp, "rank")
    ulysses = _positive_int(ulysses, "ulysses")
    if cp % ulysses:
        raise ValueError(f"sluice.context_parallel: the Ulysses degree {ulysses} does not divide cp {cp}")
    lengths = _sequence_lengths(cu_seqlens)
    ring = cp // ulysses
    index, positions, sequence, local_lengths = [], [], [], []
    start = 0
    for s, length in enumerate(lengths):
        share = torch.cat([torch.arange(begin, end, dtype=torch.int64)
                           for begin, end in _balanced(length, ring, rank // ulysses)])
        mine = torch.cat([share[begin:end] for begin, end in _balanced(len(share), ulysses, rank % ulysses)])
        positions.append(mine)
        index.append(mine + start)
        sequence.append(torch.full((len(mine),), s, dtype=torch.int64))
        local_lengths.append(len(mine))
        start += length
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    cu[1:] = torch.cumsum(torch.tensor(local_lengths, dtype=torch.int64), 0)
    return CPShard(
        cp=cp,
        rank=rank,
        index=torch.cat(index),
        positions=torch.cat(positions),
        sequence=torch.cat(sequence),
        cu_seqlens=cu.to(torch.int32),
        max_seqlen=max(local_lengths),
    )


def _group_layout(group) -> tuple[int, list[int]]:
    """This process's rank in the group and the group's global ranks, in group order."""
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("sluice.context_parallel: torch.distributed is not initialised (init_process_group)")
    if group is None or group is dist.group.WORLD:
        return dist.get_rank(), list(range(dist.get_world_size()))
    return dist.get_rank(group), list(dist.get_process_group_ranks(group))


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, shard: CPShard) -> None:
    if q.dim() != 3 or k.shape != q.shape or v.shape[:2] != q.shape[:2]:
        raise ValueError(
            f"sluice.context_parallel: q, k, v must be (tokens, heads, head_dim) alike, got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[0] != len(shard.index):
        raise ValueError(
            f"sluice.context_parallel: rank {shard.rank} of {shard.cp} holds {len(shard.index)} tokens of this "
            f"micro-batch (cp_shard), q has {q.shape[0]}"
        )


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


# Ring attention.


# Keys per tile of a sequence's block: the scores of a tile, (heads, the sequence's queries here, KEY_TILE), bound
# what one step holds, whatever the sequence's length.
KEY_TILE = 1024


def _tiles(queries: CPShard, keys: CPShard):
    """(query rows, key rows, mask) per tile: for each sequence on both ranks, its queries here against up to
    KEY_TILE of its keys in the block, mask True where the key is no later than the query; tiles whose every key
    comes after every query are left out."""
    q_cu, k_cu = queries.cu_seqlens.tolist(), keys.cu_seqlens.tolist()
    for s in range(len(q_cu) - 1):
        q_rows = slice(q_cu[s], q_cu[s + 1])
        if q_rows.start == q_rows.stop:
            continue
        q_positions = queries.positions[q_rows]
        latest = int(q_positions.max())
        for first in range(k_cu[s], k_cu[s + 1], KEY_TILE):
            k_rows = slice(first, min(first + KEY_TILE, k_cu[s + 1]))
            k_positions = keys.positions[k_rows]
            if int(k_positions.min()) > latest:
                continue
            yield q_rows, k_rows, k_positions[None, :] <= q_positions[:, None]


def _scores(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    """(heads, queries, keys), -inf where the mask is False."""
    scores = torch.einsum("thd,shd->hts", q, k) * scale
    return scores.masked_fill(~mask.to(scores.device)[None], float("-inf"))


class _Ring:
    """Point-to-point passing to the next rank of the ring, receiving from the previous one."""

    def __init__(self, rank: int, ranks: list[int], group) -> None:
        self.cp = len(ranks)
        self.next = ranks[(rank + 1) % self.cp]
        self.previous = ranks[(rank - 1) % self.cp]
        self.group = group

    def start(self, tensors: list[torch.Tensor], shapes: list[tuple]) -> tuple[list, list[torch.Tensor]]:
        """Sends `tensors` on and posts receives of `shapes`; a tag per position keeps the pairs apart."""
        received = [torch.empty(shape, dtype=t.dtype, device=t.device) for t, shape in zip(tensors, shapes)]
        requests = []
        for tag, (tensor, into) in enumerate(zip(tensors, received)):
            requests.append(dist.isend(tensor.contiguous(), self.next, group=self.group, tag=tag))
            requests.append(dist.irecv(into, self.previous, group=self.group, tag=tag))
        return requests, received

    @staticmethod
    def finish(requests: list) -> None:
        for request in requests:
            request.wait()


# The arithmetic of one block: a rank's queries against the keys and values of one rank's shard (its own, or one the
# ring brought), merged into the rank's output and log-sum-exp (heads, queries) in the forward, accumulated into
# the gradients in the backward. The backward takes the final output and log-sum-exp, so each block's softmax is
# the whole row's.


class _ReferenceBlocks:
    """float32 arithmetic (float64 stays float64) on any device: each sequence's queries against KEY_TILE of its
    keys at a time, masked by position."""

    @staticmethod
    def operand_dtype(dtype: torch.dtype) -> torch.dtype:
        return _work_dtype(dtype)

    @staticmethod
    def forward(q, k, v, queries: CPShard, keys: CPShard, scale: float, out, lse) -> None:
        for q_rows, k_rows, mask in _tiles(queries, keys):
            scores = _scores(q[q_rows], k[k_rows], mask, scale)
            old = lse[:, q_rows]
            merged = torch.logaddexp(old, torch.logsumexp(scores, -1))
            finite = merged.masked_fill(torch.isinf(merged), 0)  # rows with no key yet stay zero
            out[q_rows] = out[q_rows] * torch.exp(old - finite).transpose(0, 1)[..., None] + torch.einsum(
                "hts,shd->thd", torch.exp(scores - finite[..., None]), v[k_rows]
            )
            lse[:, q_rows] = merged

    @staticmethod
    def backward(q, k, v, out, lse, grad_out, queries: CPShard, keys: CPShard, scale: float, grads) -> None:
        grad_q, grad_k, grad_v = grads
        for q_rows, k_rows, mask in _tiles(queries, keys):
            scores = _scores(q[q_rows], k[k_rows], mask, scale)
            probabilities = torch.exp(scores - lse[:, q_rows, None])
            delta = (grad_out[q_rows] * out[q_rows]).sum(-1).transpose(0, 1)  # (heads, queries): rowsum(dO ∘ O)
            grad_v[k_rows] += torch.einsum("hts,thd->shd", probabilities, grad_out[q_rows])
            grad_scores = probabilities * (torch.einsum("thd,shd->hts", grad_out[q_rows], v[k_rows]) - delta[..., None])
            grad_q[q_rows] += torch.einsum("hts,shd->thd", grad_scores, k[k_rows]) * scale
            grad_k[k_rows] += torch.einsum("hts,thd->shd", grad_scores, q[q_rows]) * scale


@dataclass(frozen=True)
class _FlashBlock:
    """The rows of a block that see each other, as a varlen kernel takes them."""

    q_rows: torch.Tensor
    k_rows: torch.Tensor
    cu_q: torch.Tensor
    cu_k: torch.Tensor
    max_q: int
    max_k: int
    causal: bool


def _flash_block(queries: CPShard, keys: CPShard, device) -> Optional[_FlashBlock]:
    """A rank's own block is causal attention per sequence (its rows of a sequence are in position order). Against
    another rank's block, the chunks of the causal balance make the visible pairs of each sequence a rectangle: a
    suffix of the queries sees the whole of a prefix of the keys, with no mask. None when no query sees a key."""
    causal = queries.rank == keys.rank
    q_cu, k_cu = queries.cu_seqlens.tolist(), keys.cu_seqlens.tolist()
    q_rows, k_rows, q_lengths, k_lengths = [], [], [], []
    for s in range(len(q_cu) - 1):
        q_first, q_end, k_first, k_end = q_cu[s], q_cu[s + 1], k_cu[s], k_cu[s + 1]
        if q_first == q_end or k_first == k_end:
            continue
        if not causal:
            q_positions, k_positions = queries.positions[q_first:q_end], keys.positions[k_first:k_end]
            q_first += int((q_positions < k_positions.min()).sum())
            k_end = k_first + int((k_positions < q_positions.max()).sum())
            if q_first == q_end or k_first == k_end:
                continue
            if int(keys.positions[k_end - 1]) >= int(queries.positions[q_first]):
                raise AssertionError("sluice.context_parallel: a block's visible pairs are not a rectangle")
        q_rows.append(torch.arange(q_first, q_end))
        k_rows.append(torch.arange(k_first, k_end))
        q_lengths.append(q_end - q_first)
        k_lengths.append(k_end - k_first)
    if not q_rows:
        return None

    def offsets(lengths):
        return torch.tensor([0, *lengths], dtype=torch.int64).cumsum(0).to(device=device, dtype=torch.int32)

    return _FlashBlock(
        torch.cat(q_rows).to(device), torch.cat(k_rows).to(device), offsets(q_lengths), offsets(k_lengths),
        max(q_lengths), max(k_lengths), causal,
    )


class _FlashBlocks:
    """FlashAttention's varlen kernel per block (PyTorch's own: aten::_flash_attention_forward and _backward, which
    return and take the log-sum-exp), on 16-bit operands; output, log-sum-exp and gradients accumulate in float32."""

    def __init__(self, forward_kernel, backward_kernel) -> None:
        self.forward_kernel = forward_kernel
        self.backward_kernel = backward_kernel

    @staticmethod
    def operand_dtype(dtype: torch.dtype) -> torch.dtype:
        return dtype

    @staticmethod
    def block(queries: CPShard, keys: CPShard, device) -> Optional[_FlashBlock]:
        """Made once per micro-batch: kept on the query shard, which _group_shards keeps for the micro-batch."""
        blocks = queries.__dict__.setdefault("_flash_blocks", {})
        key = (keys.rank, str(device))
        if key not in blocks:
            blocks[key] = _flash_block(queries, keys, device)
        return blocks[key]

    def forward(self, q, k, v, queries: CPShard, keys: CPShard, scale: float, out, lse) -> None:
        block = self.block(queries, keys, q.device)
        if block is None:
            return
        q_block, k_block, v_block = q[block.q_rows], k[block.k_rows], v[block.k_rows]
        block_out, block_lse = self.forward_kernel(
            q_block, k_block, v_block, block.cu_q, block.cu_k, block.max_q, block.max_k, 0.0, block.causal, False,
            scale=scale,
        )[:2]
        old = lse[:, block.q_rows]
        merged = torch.logaddexp(old, block_lse.to(lse.dtype))  # finite: every row of a block sees a key
        out[block.q_rows] = out[block.q_rows] * torch.exp(old - merged).transpose(0, 1)[..., None] + block_out.to(
            out.dtype
        ) * torch.exp(block_lse - merged).transpose(0, 1)[..., None]
        lse[:, block.q_rows] = merged

    def backward(self, q, k, v, out, lse, grad_out, queries: CPShard, keys: CPShard, scale: float, grads) -> None:
        block = self.block(queries, keys, q.device)
        if block is None:
            return
        grad_q, grad_k, grad_v = grads
        # The forward's random state, which no dropout never reads (PyTorch before 2.3 has no uint64).
        state_dtype = getattr(torch, "uint64", torch.int64)
        rng_state = torch.zeros(2, dtype=state_dtype, device=q.device)
        unused = torch.zeros((), dtype=state_dtype, device=q.device)
        block_grads = self.backward_kernel(
            grad_out[block.q_rows].to(q.dtype), q[block.q_rows], k[block.k_rows], v[block.k_rows],
            out[block.q_rows].to(q.dtype), lse[:, block.q_rows].contiguous(), block.cu_q, block.cu_k, block.max_q,
            block.max_k, 0.0, block.causal, rng_state, unused, scale=scale,
        )
        grad_q.index_add_(0, block.q_rows, block_grads[0].to(grad_q.dtype))
        grad_k.index_add_(0, block.k_rows, block_grads[1].to(grad_k.dtype))
        grad_v.index_add_(0, block.k_rows, block_grads[2].to(grad_v.dtype))


_REFERENCE_BLOCKS = _ReferenceBlocks()


def _block_math(q: torch.Tensor):
    """FlashAttention per block for 16-bit CUDA tensors where PyTorch has it, the reference arithmetic elsewhere."""
    if (
        q.is_cuda
        and q.dtype in (torch.float16, torch.bfloat16)
        and q.shape[-1] % 8 == 0
        and q.shape[-1] <= 256
        and hasattr(torch.ops.aten, "_flash_attention_backward")
    ):
        return _FlashBlocks(torch.ops.aten._flash_attention_forward, torch.ops.aten._flash_attention_backward)
    return _REFERENCE_BLOCKS


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, shards, rank, ranks, group, scale):
        ring = _Ring(rank, ranks, group)
        math_ = _block_math(q)
        work = _work_dtype(q.dtype)
        operands = math_.operand_dtype(q.dtype)
        qb, kb, vb = (t.to(operands).contiguous() for t in (q, k, v))
        mine = shards[rank]
        out = torch.zeros(q.shape, dtype=work, device=q.device)
        lse = torch.full((q.shape[1], q.shape[0]), float("-inf"), dtype=work, device=q.device)
        owner = rank
        for step in range(ring.cp):
            if step + 1 < ring.cp:  # the next block travels while this one is computed
                incoming = len(shards[(owner - 1) % ring.cp].index)
                shapes = [(incoming, *kb.shape[1:]), (incoming, *vb.shape[1:])]
                requests, (next_k, next_v) = ring.start([kb, vb], shapes)
            math_.forward(qb, kb, vb, mine, shards[owner], scale, out, lse)
            if step + 1 < ring.cp:
                ring.finish(requests)
                kb, vb, owner = next_k, next_v, (owner - 1) % ring.cp
        ctx.save_for_backward(qb, k.to(operands), v.to(operands), out, lse)
        ctx.layout = (shards, rank, ranks, group, scale, math_, q.dtype, k.dtype, v.dtype)
        return out.to(q.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        qb, kb, vb, out, lse = ctx.saved_tensors
        shards, rank, ranks, group, scale, math_, q_dtype, k_dtype, v_dtype = ctx.layout
        ring = _Ring(rank, ranks, group)
        grad_out = grad_out.to(out.dtype)
        mine = shards[rank]
        grad_q = torch.zeros_like(out)
        grad_k, grad_v = (torch.zeros(t.shape, dtype=out.dtype, device=t.device) for t in (kb, vb))
        owner = rank
        for step in range(ring.cp):
            math_.backward(qb, kb, vb, out, lse, grad_out, mine, shards[owner], scale, (grad_q, grad_k, grad_v))
            if ring.cp == 1:
                break
            # The block and its partial sums move on; after the last step only the sums travel, home to their owner.
            incoming = len(shards[(owner - 1) % ring.cp].index)
            moving = [grad_k, grad_v] if step + 1 == ring.cp else [grad_k, grad_v, kb, vb]
            requests, received = ring.start(moving, [(incoming, *t.shape[1:]) for t in moving])
            ring.finish(requests)
            grad_k, grad_v = received[0], received[1]
            if step + 1 < ring.cp:
                kb, vb = received[2], received[3]
            owner = (owner - 1) % ring.cp
        return grad_q.to(q_dtype), grad_k.to(k_dtype), grad_v.to(v_dtype), None, None, None, None, None


def _softmax_scale(softmax_scale: Optional[float], head_dim: int) -> float:
    if softmax_scale is None:
        return 1.0 / math.sqrt(head_dim)
    scale = float(softmax_scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"sluice.context_parallel: softmax_scale must be positive and finite, got {softmax_scale!r}")
    return scale


@functools.lru_cache(maxsize=64)
def _group_shards(cu_seqlens: tuple, cp: int) -> list[CPShard]:
    """Every rank's shard, made once per micro-batch rather than once per layer (the shards are only read)."""
    return [cp_shard(torch.tensor(cu_seqlens), cp, rank) for rank in range(cp)]


def _prepare(q, k, v, cu_seqlens, group, softmax_scale):
    """This rank and the group's ranks, every rank's shard, and the softmax scale; the inputs checked."""
    rank, ranks = _group_layout(group)
    cu = torch.as_tensor(cu_seqlens)
    _sequence_lengths(cu)  # bad offsets raise ValueError here, not as the cache's unhashable key
    shards = _group_shards(tuple(cu.tolist()), len(ranks))
    _check_qkv(q, k, v, shards[rank])
    return rank, ranks, shards, _softmax_scale(softmax_scale, q.shape[-1])


def ring_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens,
    *,
    group=None,
    softmax_scale: Optional[float] = None,
) -> torch.Tensor:
    """Causal attention within each sequence of a packed micro-batch whose tokens the CP group shares.

    q, k, v: (tokens, heads, head_dim), this rank's tokens as ``cp_shard(cu_seqlens, cp, rank)`` orders them.
    cu_seqlens: the whole micro-batch's offsets, the same on every rank of the group (default: the world).
    Returns this rank's rows of the output. Every rank of the group must call it, with the same cu_seqlens.
    """
    rank, ranks, shards, scale = _prepare(q, k, v, cu_seqlens, group, softmax_scale)
    return _RingAttention.apply(q, k, v, shards, rank, ranks, group, scale)


class _SerializedRing(torch.autograd.Function):
    """Every rank's part of the ring, one rank after another in this process: the same blocks in the same order."""

    @staticmethod
    def forward(ctx, q, k, v, shards, scale):
        math_ = _block_math(q)
        work = _work_dtype(q.dtype)
        operand_dtype = math_.operand_dtype(q.dtype)
        operands = [[shard.select(t).to(operand_dtype).contiguous() for shard in shards] for t in (q, k, v)]
        outs, lses = [], []
        for rank, mine in enumerate(shards):
            out = torch.zeros((len(mine.index), *q.shape[1:]), dtype=work, device=q.device)
            lse = torch.full((q.shape[1], len(mine.index)), float("-inf"), dtype=work, device=q.device)
            for step in range(len(shards)):
                owner = (rank - step) % len(shards)
                math_.forward(operands[0][rank], operands[1][owner], operands[2][owner], mine, shards[owner], scale,
                              out, lse)
            outs.append(out)
            lses.append(lse)
        ctx.layout = (shards, scale, math_, operands, outs, lses, q.dtype, k.dtype, v.dtype)
        return _unshard(outs, shards, q.shape[0]).to(q.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        shards, scale, math_, (qs, ks, vs), outs, lses, q_dtype, k_dtype, v_dtype = ctx.layout
        grads = [[torch.zeros(t.shape, dtype=outs[0].dtype, device=t.device) for t in part] for part in (qs, ks, vs)]
        for rank, mine in enumerate(shards):
            grad_rows = mine.select(grad_out).to(outs[rank].dtype)
            for step in range(len(shards)):
                owner = (rank - step) % len(shards)
                math_.backward(qs[rank], ks[owner], vs[owner], outs[rank], lses[rank], grad_rows, mine, shards[owner],
                               scale, (grads[0][rank], grads[1][owner], grads[2][owner]))
        total = grad_out.shape[0]
        return (_unshard(grads[0], shards, total).to(q_dtype), _unshard(grads[1], shards, total).to(k_dtype),
                _unshard(grads[2], shards, total).to(v_dtype), None, None)


def _unshard(parts: list[torch.Tensor], shards: list[CPShard], total: int) -> torch.Tensor:
    """The packed tensor whose rows the shards hold."""
    whole = torch.empty((total, *parts[0].shape[1:]), dtype=parts[0].dtype, device=parts[0].device)
    for part, shard in zip(parts, shards):
        whole[shard.index.to(part.device)] = part
    return whole


def ring_attention_serialized(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens,
    cp: int,
    *,
    softmax_scale: Optional[float] = None,
) -> torch.Tensor:
    """``ring_attention``'s arithmetic for every rank of a CP group of degree ``cp``, one rank after another in this
    process, without communication: each rank's queries against every rank's block in the ring's order. For
    checking and timing CP on one device. q, k, v: the whole packed micro-batch, (tokens, heads, head_dim); returns
    the whole output, differentiable."""
    cp = _positive_int(cp, "cp")
    cu = torch.as_tensor(cu_seqlens)
    _sequence_lengths(cu)
    shards = _group_shards(tuple(cu.tolist()), cp)
    if q.dim() != 3 or k.shape != q.shape or v.shape[:2] != q.shape[:2] or q.shape[0] != int(cu[-1]):
        raise ValueError(
            f"sluice.context_parallel: q, k, v must be (tokens, heads, head_dim) alike with cu_seqlens[-1] = "
            f"{int(cu[-1])} tokens, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    return _SerializedRing.apply(q, k, v, shards, _softmax_scale(softmax_scale, q.shape[-1]))


# Ulysses.


def _all_to_all_rows(rows: torch.Tensor, send_counts: list[int], receive_counts: list[int], group) -> torch.Tensor:
    out = torch.empty((sum(receive_counts), *rows.shape[1:]), dtype=rows.dtype, device=rows.device)
    dist.all_to_all_single(
        out, rows.contiguous(), output_split_sizes=receive_counts, input_split_sizes=send_counts, group=group
    )
    return out


def _tokens_to_heads(x: torch.Tensor, counts: list[int], group) -> torch.Tensor:
    """(this rank's tokens, heads, d) -> (every rank's tokens in rank order, heads/cp, d): head group j to rank j."""
    cp = len(counts)
    tokens, heads, dim = x.shape
    rows = x.reshape(tokens, cp, heads // cp, dim).transpose(0, 1).reshape(cp * tokens, heads // cp, dim)
    return _all_to_all_rows(rows, [tokens] * cp, counts, group)


def _heads_to_tokens(y: torch.Tensor, counts: list[int], rank: int, group) -> torch.Tensor:
    """The inverse of _tokens_to_heads: this rank's tokens, every head group back from the rank that held it."""
    cp = len(counts)
    tokens = counts[rank]
    rows = _all_to_all_rows(y.contiguous(), counts, [tokens] * cp, group)
    return rows.reshape(cp, tokens, *y.shape[1:]).transpose(0, 1).reshape(tokens, cp * y.shape[1], y.shape[2])


class _TokensToHeads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, counts, rank, group):
        ctx.layout = (counts, rank, group)
        return _tokens_to_heads(x.contiguous(), counts, group)

    @staticmethod
    def backward(ctx, grad):
        counts, rank, group = ctx.layout
        return _heads_to_tokens(grad, counts, rank, group), None, None, None


class _HeadsToTokens(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, counts, rank, group):
        ctx.layout = (counts, group)
        return _heads_to_tokens(y, counts, rank, group)

    @staticmethod
    def backward(ctx, grad):
        counts, group = ctx.layout
        return _tokens_to_heads(grad.contiguous(), counts, group), None, None, None


def ulysses_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens,
    *,
    group=None,
    softmax_scale: Optional[float] = None,
) -> torch.Tensor:
    """The same as ``ring_attention`` by DeepSpeed-Ulysses' all-to-alls: the heads must divide by the group's size."""
    rank, ranks, shards, scale = _prepare(q, k, v, cu_seqlens, group, softmax_scale)
    cp = len(ranks)
    if q.shape[1] % cp != 0:
        raise ValueError(f"sluice.context_parallel: Ulysses splits the {q.shape[1]} heads over {cp} ranks: "
                         "the heads must divide by the CP degree")
    counts = [len(shard.index) for shard in shards]
    rank_order = torch.cat([shard.index for shard in shards]).to(q.device)  # packed position of each gathered row
    packed_order = torch.argsort(rank_order)
    cu = torch.as_tensor(cu_seqlens).to(torch.int64)
    max_seqlen = int((cu[1:] - cu[:-1]).max())
    work = _work_dtype(q.dtype)
    q_full, k_full, v_full = (
        _TokensToHeads.apply(t.to(work), counts, rank, group).index_select(0, packed_order) for t in (q, k, v)
    )
    out = varlen_attention(q_full, k_full, v_full, cu, max_seqlen, softmax_scale=scale)
    return _HeadsToTokens.apply(out.index_select(0, rank_order), counts, rank, group).to(q.dtype)


@functools.lru_cache(maxsize=64)
def _hybrid_layout(cu_seqlens: tuple, ulysses: int, ring: int, ring_rank: int):
    """Per micro-batch: the Ulysses group's shards, where each row the all-to-all gathers sits in the ring rank's
    block (its tokens in packed order), and every ring rank's block."""
    cu = torch.tensor(cu_seqlens)
    cp = ulysses * ring
    shards = [cp_shard(cu, cp, ring_rank * ulysses + u, ulysses=ulysses) for u in range(ulysses)]
    gathered = torch.cat([shard.index for shard in shards])  # packed position of each row, in Ulysses rank order
    block_order = torch.argsort(gathered)  # the rows in packed order: the block's order
    place_in_block = torch.empty_like(block_order)
    place_in_block[block_order] = torch.arange(len(block_order))
    blocks = [cp_shard(cu, ring, rho) for rho in range(ring)]
    return shards, block_order, place_in_block, blocks


def hybrid_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens,
    *,
    ulysses_group,
    ring_group,
    softmax_scale: Optional[float] = None,
) -> torch.Tensor:
    """The same as ``ring_attention`` by USP's hybrid: this rank is CP rank ring_rank·U + ulysses_rank of the
    cp = U·R ranks, its rows those of ``cp_shard(cu_seqlens, cp, that rank, ulysses=U)``; an all-to-all in the
    Ulysses group (U ranks, consecutive CP ranks) gathers the group's tokens for heads/U heads, ring attention over
    the ring group (R ranks, one per Ulysses group, with this one's Ulysses rank) attends them to every group's,
    and an all-to-all returns the output. The heads must divide by U."""
    ulysses_rank, ulysses_ranks = _group_layout(ulysses_group)
    ring_rank, ring_ranks = _group_layout(ring_group)
    ulysses, ring = len(ulysses_ranks), len(ring_ranks)
    cu = torch.as_tensor(cu_seqlens)
    _sequence_lengths(cu)
    shards, block_order, place_in_block, blocks = _hybrid_layout(tuple(cu.tolist()), ulysses, ring, ring_rank)
    _check_qkv(q, k, v, shards[ulysses_rank])
    if q.shape[1] % ulysses != 0:
        raise ValueError(f"sluice.context_parallel: the hybrid's Ulysses splits the {q.shape[1]} heads over "
                         f"{ulysses} ranks: the heads must divide by the Ulysses degree")
    scale = _softmax_scale(softmax_scale, q.shape[-1])
    counts = [len(shard.index) for shard in shards]
    block_order, place_in_block = block_order.to(q.device), place_in_block.to(q.device)
    work = _work_dtype(q.dtype)
    q_block, k_block, v_block = (
        _TokensToHeads.apply(t.to(work), counts, ulysses_rank, ulysses_group).index_select(0, block_order)
        for t in (q, k, v)
    )
    out = _RingAttention.apply(q_block, k_block, v_block, blocks, ring_rank, ring_ranks, ring_group, scale)
    rows = out.index_select(0, place_in_block)
    return _HeadsToTokens.apply(rows, counts, ulysses_rank, ulysses_group).to(q.dtype)


@dataclass(frozen=True)
class FlexCPWork:
    """One unit's part of one micro-batch of a flex CP plan.

    degree and first_unit name its group (units first_unit … first_unit + degree − 1); rank is the unit's rank in it;
    sequences are indices into the problem's lengths, packed in that order into the group's micro-batch, whose
    offsets cu_seqlens (int32) every unit of the group passes to the attention.
    """

    degree: int
    first_unit: int
    rank: int
    sequences: tuple
    cu_seqlens: torch.Tensor


def flex_cp_work(problem, plan, unit: int) -> list[Optional[FlexCPWork]]:
    """Per micro-batch of ``plan`` (a ``FlexCpPlan`` of ``problem``), the group that ``unit`` joins, or None when no
    group of that micro-batch covers the unit (it idles)."""
    unit = _index_below(unit, problem.units, "unit")
    plan.check(problem)  # a plan of another problem would hand out sequences no group of this one holds
    lengths = problem.lengths
    work = []
    for micro_batch in plan.micro_batches:
        mine = None
        for group in micro_batch.groups:
            degree = problem.degrees[group.degree_index].degree
            if group.first_unit <= unit < group.first_unit + degree:
                sequences = tuple(int(s) for s in group.sequences)
                cu = torch.zeros(len(sequences) + 1, dtype=torch.int64)
                cu[1:] = torch.cumsum(torch.tensor([int(lengths[s]) for s in sequences], dtype=torch.int64), 0)
                mine = FlexCPWork(degree, group.first_unit, unit - group.first_unit, sequences, cu.to(torch.int32))
                break
        work.append(mine)
    return work


class FlexCPGroups:
    """A flex CP domain's process groups, created once: for each degree d, the groups of units [i·d, (i + 1)·d).

    ranks: the global rank of each unit (default: unit u is rank u of the world); a domain whose units span several
    ranks each (TP, PP) builds one pool per (stage, TP shard), its ranks ``flex_domain_ranks(domain,
    profile).groups.cp`` in that order. Every process must construct every pool, in the same order, as
    torch.distributed.new_group requires.
    """

    def __init__(self, units: int, degrees, *, ranks=None, timeout=None) -> None:
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("sluice.context_parallel: torch.distributed is not initialised (init_process_group)")
        units = _positive_int(units, "units")
        ranks = list(range(units)) if ranks is None else [operator.index(r) for r in ranks]
        if len(ranks) != units or len(set(ranks)) != units:
            raise ValueError(f"sluice.context_parallel: {units} units need {units} distinct ranks, got {ranks!r}")
        options = {} if timeout is None else {"timeout": timeout}
        self._groups = {}
        previous = 1
        for value in degrees:
            degree = _positive_int(value, "degree")
            if units % degree != 0 or degree % previous != 0 or (self._groups and degree == previous):
                raise ValueError(f"sluice.context_parallel: degrees must ascend, each dividing the next and the "
                                 f"{units} units, got {list(degrees)!r}")
            previous = degree
            for first in range(0, units, degree):
                self._groups[(degree, first)] = dist.new_group(ranks[first:first + degree], **options)

    def group(self, work: FlexCPWork):
        """The process group of ``work``'s CP group."""
        key = (work.degree, work.first_unit)
        if key not in self._groups:
            raise ValueError(f"sluice.context_parallel: no group of degree {work.degree} at unit {work.first_unit}")
        return self._groups[key]
