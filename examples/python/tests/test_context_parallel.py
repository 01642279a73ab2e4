"""sluice.context_parallel: CP shards against their definition, and ring and Ulysses attention run by real
processes (gloo on 127.0.0.1) against unsharded attention in float64, outputs and gradients; bad input; a rank that
dies ends the others."""
import functools
import math
import os
import re
from datetime import timedelta

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

import torch.multiprocessing as mp  # noqa: E402

import sluice.context_parallel  # noqa: E402
from sluice.context_parallel import (  # noqa: E402
    cp_shard,
    hybrid_attention,
    ring_attention,
    ring_attention_serialized,
    ulysses_attention,
)
from sluice.torch import block_causal_mask  # noqa: E402

# Float32 attention against the float64 reference: relative error of a whole tensor (norm of the difference over
# the reference's norm).
TOLERANCE = 1e-5
# (name, sequence lengths, heads, seed): odd lengths, sequences shorter than 2·cp (some ranks hold none of their
# tokens), one spanning every rank, and a micro-batch of short sequences only.
CASES = [
    ("mixed", [37, 1, 3, 12, 8], 4, 1),
    ("one long", [61], 4, 2),
    ("short only", [1, 2, 1, 3], 4, 3),
]
HEAD_DIM = 8
# A worker that neither ends nor fails within this is hung: the test kills it and fails.
HANG_SECONDS = 240


def cu_of(lengths):
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    cu[1:] = torch.cumsum(torch.tensor(lengths), 0)
    return cu.to(torch.int32)


def inputs(lengths, heads, seed):
    """q, k, v and the output's upstream gradient of the whole micro-batch, float32, the same on every rank."""
    generator = torch.Generator().manual_seed(seed)
    shape = (sum(lengths), heads, HEAD_DIM)
    return [torch.randn(shape, generator=generator) for _ in range(4)]


def reference(lengths, heads, seed):
    """Unsharded causal attention per sequence in float64: the output and the gradients of q, k and v."""
    q, k, v, upstream = (t.double().requires_grad_(i < 3) for i, t in enumerate(inputs(lengths, heads, seed)))
    scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(HEAD_DIM)
    scores = scores.masked_fill(~block_causal_mask(cu_of(lengths))[None], float("-inf"))
    out = torch.einsum("hts,shd->thd", scores.softmax(-1), v)
    (out * upstream).sum().backward()
    return out.detach(), q.grad, k.grad, v.grad


def worker(rank, world, store, out_dir, fail_rank, key_tile):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    sluice.context_parallel.KEY_TILE = key_tile
    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world, timeout=timedelta(seconds=60)
    )
    try:
        if rank == fail_rank:
            os._exit(3)  # dies after the group is up, before the attention its peers wait on
        results = {}
        hybrid = hybrid_groups(rank, world)
        for name, lengths, heads, seed in CASES:
            cu = cu_of(lengths)
            q_full, k_full, v_full, upstream = inputs(lengths, heads, seed)
            for kind, attention in attentions(hybrid):
                shard = cp_shard(cu, world, rank, ulysses=HYBRID_ULYSSES if kind == "hybrid" else 1)
                q, k, v = (shard.select(t).clone().requires_grad_() for t in (q_full, k_full, v_full))
                out = attention(q, k, v, cu)
                (out * shard.select(upstream)).sum().backward()
                results[(name, kind)] = (out.detach(), q.grad, k.grad, v.grad)
        try:  # three heads do not split over an even group
            q = torch.zeros(len(cp_shard(cu_of([5]), world, rank).index), 3, HEAD_DIM)
            ulysses_attention(q, q, q, cu_of([5]))
            results["uneven heads"] = "accepted"
        except ValueError as error:
            results["uneven heads"] = str(error)
        torch.save(results, os.path.join(out_dir, f"{rank}.pt"))
    except Exception as error:  # noqa: BLE001 - reported to the test through a file
        with open(os.path.join(out_dir, f"{rank}.error"), "w") as file:
            file.write(f"{type(error).__name__}: {error}")
        raise SystemExit(1)
    dist.destroy_process_group()


# The hybrid's Ulysses degree in a world of 4: Ulysses groups {0, 1} and {2, 3}, ring groups {0, 2} and {1, 3}.
HYBRID_ULYSSES = 2


def hybrid_groups(rank, world):
    """This process's Ulysses and ring groups of the hybrid in a world of 4 (every process creates every group)."""
    if world != 4:
        return None
    ulysses = [dist.new_group(ranks) for ranks in ([0, 1], [2, 3])]
    ring = [dist.new_group(ranks) for ranks in ([0, 2], [1, 3])]
    return ulysses[rank // 2], ring[rank % 2]


def attentions(hybrid):
    kinds = [("ring", ring_attention), ("ulysses", ulysses_attention)]
    if hybrid is not None:
        ulysses_group, ring_group = hybrid
        kinds.append(("hybrid", functools.partial(hybrid_attention, ulysses_group=ulysses_group,
                                                  ring_group=ring_group)))
    return kinds


# (strategy, profile GPUs) whose rank placements the group test builds in a world of 4 processes.
PLACEMENTS = [("1*tp2pp1+1*tp1pp2", 4), ("2*tp1pp2", 4), ("1*tp1cp2ringpp2", 4)]


def placement_of(strategy, gpus):
    import sluice

    profile = sluice.with_scheme_space(sluice.Profile.bundled("llama2-7b", gpus=gpus), cp=[2])
    return sluice.rank_placement(strategy, profile)


def groups_worker(rank, world, store, out_dir):
    """Builds every placement's groups and all-reduces each process's global rank in each of its groups."""
    import sluice.torch as st

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    results = {}
    for strategy, gpus in PLACEMENTS:
        groups = st.process_groups(placement_of(strategy, gpus))
        for kind in ("tp", "pp", "dp", "cp"):
            total = torch.tensor([rank])
            if getattr(groups, kind) is not None:
                dist.all_reduce(total, group=getattr(groups, kind))
            results[(strategy, kind)] = (getattr(groups, f"{kind}_ranks"), int(total))
    torch.save(results, os.path.join(out_dir, f"{rank}.pt"))
    dist.destroy_process_group()


def run(world, tmp_path, fail_rank=-1, key_tile=1024, target=None):
    """Starts `world` worker processes and returns their exit codes; kills them and fails if any hangs."""
    context = mp.get_context("spawn")
    arguments = (str(tmp_path / "store"), str(tmp_path))
    if target is None:
        target, arguments = worker, (*arguments, fail_rank, key_tile)
    processes = [context.Process(target=target, args=(rank, world, *arguments)) for rank in range(world)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(HANG_SECONDS)
    hung = [rank for rank, process in enumerate(processes) if process.is_alive()]
    for rank in hung:
        processes[rank].kill()
    assert not hung, f"ranks {hung} of {world} did not end"
    return [process.exitcode for process in processes]


def relative_error(value, expected):
    return float((value.double() - expected).norm() / expected.norm().clamp_min(1e-300))


def test_shards_partition_every_sequence_with_balanced_causal_work():
    lengths = [37, 1, 3, 12, 8, 64]
    cu = cu_of(lengths)
    starts = cu[:-1].tolist()
    for cp in (1, 2, 3, 4, 8):
        shards = [cp_shard(cu, cp, rank) for rank in range(cp)]
        held = torch.cat([shard.index for shard in shards])
        assert sorted(held.tolist()) == list(range(sum(lengths)))  # every token on exactly one rank
        for shard in shards:
            assert shard.cu_seqlens.dtype == torch.int32 and int(shard.cu_seqlens[-1]) == len(shard.index)
            sizes = (shard.cu_seqlens[1:] - shard.cu_seqlens[:-1]).tolist()
            assert shard.max_seqlen == max(sizes)
            assert torch.equal(shard.sequence, torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(sizes)))
            assert torch.equal(shard.index, torch.tensor(starts)[shard.sequence] + shard.positions)
            # Chunks r and 2·cp−1−r of each sequence, in order.
            for s, length in enumerate(lengths):
                chunks = 2 * cp
                expected = [
                    p
                    for chunk in (shard.rank, chunks - 1 - shard.rank)
                    for p in range(chunk * length // chunks, (chunk + 1) * length // chunks)
                ]
                assert shard.positions[shard.sequence == s].tolist() == expected
        # Causal work (keys attended) is equal across ranks for a length that 2·cp divides.
        work = [int((shard.positions[shard.sequence == 5] + 1).sum()) for shard in shards]
        if 64 % (2 * cp) == 0:
            assert len(set(work)) == 1, work


def test_hybrid_shards_nest_the_balance_in_the_ring_ranks_share():
    lengths = [37, 1, 3, 12, 8, 64]
    cu = cu_of(lengths)
    for cp, ulysses in ((4, 2), (8, 2), (8, 4)):
        ring = cp // ulysses
        shards = [cp_shard(cu, cp, rank, ulysses=ulysses) for rank in range(cp)]
        assert sorted(torch.cat([shard.index for shard in shards]).tolist()) == list(range(sum(lengths)))
        for rho in range(ring):  # a Ulysses group of consecutive CP ranks holds the ring rank's share
            group = torch.cat([shards[rho * ulysses + u].index for u in range(ulysses)])
            assert sorted(group.tolist()) == cp_shard(cu, ring, rho).index.tolist()
        work = [int((shard.positions[shard.sequence == 5] + 1).sum()) for shard in shards]
        assert max(work) - min(work) <= max(work) // 8, work  # 64 tokens: near-equal causal work
    assert torch.equal(cp_shard(cu, 4, 1, ulysses=4).index, cp_shard(cu, 4, 1).index)  # Ulysses: the flat balance
    with pytest.raises(ValueError, match="the Ulysses degree 3 does not divide cp 4"):
        cp_shard(cu, 4, 0, ulysses=3)


def test_shard_select_takes_the_ranks_rows():
    # Sequence 0 (5 tokens) cut at 0, 1, 2, 3, 5: rank 1 of 2 holds chunks 1 and 2, positions 1 and 2; sequence 1
    # (2 tokens) cut at 0, 0, 1, 1, 2: chunk 1 is its first token, chunk 2 is empty.
    shard = cp_shard(cu_of([5, 2]), 2, 1)
    assert shard.index.tolist() == [1, 2, 5]
    assert shard.positions.tolist() == [1, 2, 0]
    assert shard.cu_seqlens.tolist() == [0, 2, 3]
    assert shard.select(torch.arange(7) * 10).tolist() == [10, 20, 50]


@pytest.mark.parametrize(
    "cu, cp, rank, message",
    [
        (cu_of([3]), 0, 0, "cp must be a positive integer"),
        (cu_of([3]), 2.0, 0, "cp must be a positive integer"),
        (cu_of([3]), 2, 2, "rank must be in [0, 2)"),
        (cu_of([3]), 2, -1, "rank must be in [0, 2)"),
        (torch.tensor([1, 4], dtype=torch.int32), 2, 0, "must start at 0 and increase strictly"),
        (torch.tensor([0, 4, 4], dtype=torch.int32), 2, 0, "must start at 0 and increase strictly"),
        (torch.tensor([0.0, 4.0]), 2, 0, "1-D integer tensor"),
        (torch.tensor([0], dtype=torch.int32), 2, 0, "1-D integer tensor"),
    ],
)
def test_bad_shards_are_refused(cu, cp, rank, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cp_shard(cu, cp, rank)


def test_attention_needs_a_process_group():
    q = torch.zeros(3, 2, HEAD_DIM)
    for attention in (ring_attention, ulysses_attention):
        with pytest.raises(RuntimeError, match="not initialised"):
            attention(q, q, q, cu_of([3]))


# Tiles of 3 keys cut every sequence's block into several, some of them wholly after the queries (left out).
@pytest.mark.parametrize("world, key_tile", [(2, 3), (4, 1024)])
def test_ring_and_ulysses_equal_unsharded_attention(world, key_tile, tmp_path):
    codes = run(world, tmp_path, key_tile=key_tile)
    errors = {path.name: path.read_text() for path in tmp_path.glob("*.error")}
    assert codes == [0] * world, errors
    results = [torch.load(tmp_path / f"{rank}.pt") for rank in range(world)]
    for name, lengths, heads, seed in CASES:
        expected = reference(lengths, heads, seed)
        for kind in ("ring", "ulysses", "hybrid") if world == 4 else ("ring", "ulysses"):
            nested = HYBRID_ULYSSES if kind == "hybrid" else 1
            shards = [cp_shard(cu_of(lengths), world, rank, ulysses=nested) for rank in range(world)]
            for position, what in enumerate(("output", "dq", "dk", "dv")):
                assembled = torch.full_like(expected[position], float("nan"))
                for rank, shard in enumerate(shards):
                    assembled[shard.index] = results[rank][(name, kind)][position].double()
                error = relative_error(assembled, expected[position])
                assert error <= TOLERANCE, f"{kind} attention, {name}, cp {world}: {what} off by {error:.2e}"
    for rank in range(world):
        assert "the heads must divide by the CP degree" in results[rank]["uneven heads"]


def serialized(lengths, heads, seed, cp):
    """ring_attention_serialized's output and gradients of q, k and v, float32."""
    q, k, v, upstream = (t.requires_grad_(i < 3) for i, t in enumerate(inputs(lengths, heads, seed)))
    out = ring_attention_serialized(q, k, v, cu_of(lengths), cp)
    (out * upstream).sum().backward()
    return out.detach(), q.grad, k.grad, v.grad


def emulated_flash_forward(q, k, v, cu_q, cu_k, max_q, max_k, dropout, causal, debug, *, scale):
    """What aten::_flash_attention_forward returns (output, log-sum-exp (heads, queries), ...), in plain PyTorch."""
    assert dropout == 0.0 and not debug and max_q == int((cu_q[1:] - cu_q[:-1]).max())
    outs, lses = [], []
    for qa, qb, ka, kb in zip(cu_q[:-1].tolist(), cu_q[1:].tolist(), cu_k[:-1].tolist(), cu_k[1:].tolist()):
        scores = torch.einsum("thd,shd->hts", q[qa:qb], k[ka:kb]) * scale
        if causal:
            assert qb - qa == kb - ka
            scores = scores.masked_fill(~torch.ones(qb - qa, kb - ka, dtype=torch.bool).tril()[None], float("-inf"))
        outs.append(torch.einsum("hts,shd->thd", scores.softmax(-1), v[ka:kb]))
        lses.append(torch.logsumexp(scores, -1))
    return torch.cat(outs), torch.cat(lses, 1), None, None, None


def emulated_flash_backward(grad_out, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, dropout, causal, rng, unused, *,
                            scale):
    """What aten::_flash_attention_backward returns (dq, dk, dv) from the whole row's output and log-sum-exp."""
    grads = [torch.zeros_like(t) for t in (q, k, v)]
    for qa, qb, ka, kb in zip(cu_q[:-1].tolist(), cu_q[1:].tolist(), cu_k[:-1].tolist(), cu_k[1:].tolist()):
        scores = torch.einsum("thd,shd->hts", q[qa:qb], k[ka:kb]) * scale
        if causal:
            scores = scores.masked_fill(~torch.ones(qb - qa, kb - ka, dtype=torch.bool).tril()[None], float("-inf"))
        probabilities = torch.exp(scores - lse[:, qa:qb, None])
        delta = (grad_out[qa:qb] * out[qa:qb]).sum(-1).transpose(0, 1)
        grads[2][ka:kb] += torch.einsum("hts,thd->shd", probabilities, grad_out[qa:qb])
        grad_scores = probabilities * (torch.einsum("thd,shd->hts", grad_out[qa:qb], v[ka:kb]) - delta[..., None])
        grads[0][qa:qb] += torch.einsum("hts,shd->thd", grad_scores, k[ka:kb]) * scale
        grads[1][ka:kb] += torch.einsum("hts,thd->shd", grad_scores, q[qa:qb]) * scale
    return grads


@pytest.mark.parametrize("blocks", ["reference", "flash (emulated)"])
def test_serialized_ring_equals_unsharded_attention(blocks, monkeypatch):
    if blocks != "reference":
        flash = sluice.context_parallel._FlashBlocks(emulated_flash_forward, emulated_flash_backward)
        monkeypatch.setattr(sluice.context_parallel, "_block_math", lambda q: flash)
    for name, lengths, heads, seed in CASES:
        expected = reference(lengths, heads, seed)
        for cp in (1, 2, 3, 4):
            computed = serialized(lengths, heads, seed, cp)
            for what, value, wanted in zip(("output", "dq", "dk", "dv"), computed, expected):
                error = relative_error(value, wanted)
                assert error <= TOLERANCE, f"{blocks}, {name}, cp {cp}: {what} off by {error:.2e}"


def test_flash_blocks_cover_exactly_the_causal_pairs():
    # Every (query, key) pair a rank's block gives the kernel is one of the same sequence with the key no later,
    # and every such pair is in exactly one block.
    for lengths in ([37, 1, 3, 12, 8], [61], [1, 2, 1, 3], [16, 15, 17]):
        cu = cu_of(lengths)
        for cp in (1, 2, 3, 4):
            shards = [cp_shard(cu, cp, rank) for rank in range(cp)]
            covered = []
            for mine in shards:
                for keys in shards:
                    block = sluice.context_parallel._flash_block(mine, keys, "cpu")
                    if block is None:
                        continue
                    bounds = zip(block.cu_q[:-1].tolist(), block.cu_q[1:].tolist(), block.cu_k[:-1].tolist(),
                                 block.cu_k[1:].tolist())
                    for qa, qb, ka, kb in bounds:
                        for i in range(qa, qb):
                            for j in range(ka, kb):
                                if block.causal and j - ka > i - qa:
                                    continue
                                covered.append((int(mine.index[block.q_rows[i]]), int(keys.index[block.k_rows[j]])))
            starts = cu[:-1].tolist()
            expected = [(starts[s] + i, starts[s] + j) for s, n in enumerate(lengths) for i in range(n)
                        for j in range(i + 1)]
            assert sorted(covered) == sorted(expected), (lengths, cp)


def test_serialized_ring_refuses_bad_input():
    q = torch.zeros(5, 2, HEAD_DIM)
    with pytest.raises(ValueError, match="cp must be a positive integer"):
        ring_attention_serialized(q, q, q, cu_of([5]), 0)
    with pytest.raises(ValueError, match=re.escape("cu_seqlens[-1] = 4 tokens")):
        ring_attention_serialized(q, q, q, cu_of([4]), 2)


def test_a_rank_that_dies_ends_the_others(tmp_path):
    codes = run(2, tmp_path, fail_rank=1)
    assert codes == [1, 3]
    assert (tmp_path / "0.error").read_text().startswith("RuntimeError")


def test_process_groups_of_a_rank_placement(tmp_path):
    assert run(4, tmp_path, target=groups_worker) == [0] * 4
    for strategy, gpus in PLACEMENTS:
        expected = placement_of(strategy, gpus).groups
        for rank in range(4):
            results = torch.load(tmp_path / f"{rank}.pt")
            for kind in ("tp", "pp", "dp", "cp"):
                ranks, total = results[(strategy, kind)]
                in_a_group = ranks in getattr(expected, kind)
                # Only a rank of a CP stage has a CP group; the others' is themselves alone.
                assert rank in ranks and (in_a_group or (kind == "cp" and ranks == [rank])), (strategy, kind, rank)
                assert total == sum(ranks)  # the group holds exactly those processes
    # The CP pipeline's first stage shares each sequence between ranks 0 and 1.
    assert torch.load(tmp_path / "0.pt")[(PLACEMENTS[2][0], "cp")] == ([0, 1], 1)


def test_process_groups_need_a_process_group():
    import sluice.torch as st

    placement = sluice.rank_placement("2*tp1pp2", sluice.Profile.bundled("llama2-7b", gpus=4))
    with pytest.raises(RuntimeError, match="not initialised"):
        st.process_groups(placement)


# A flex CP domain of 4 units with groups of 1, 2 and 4 (FlexSP's per-micro-batch groups): 150 tokens need the
# 4-group, 61 and 37 a 2-group, the rest run unsharded beside them.
FLEX_LENGTHS = [61, 37, 12, 8, 3, 1, 20, 5, 150, 2, 33, 17]
FLEX_HEADS = 4


def flex_problem():
    import sluice

    degrees = [
        sluice.FlexCpDegree(1, sluice.QuadraticLatency(1e-6, 1e-4, 1e-3), 40),
        sluice.FlexCpDegree(2, sluice.QuadraticLatency(0.5e-6, 0.6e-4, 2e-3), 80, 4),
        sluice.FlexCpDegree(4, sluice.QuadraticLatency(0.25e-6, 0.35e-4, 4e-3), 160, 8),
    ]
    problem = sluice.FlexCpProblem(FLEX_LENGTHS, 4, 1, degrees)
    return problem, sluice.solve_flex_cp(problem)


def flex_seed(micro_batch, first_unit):
    return 100 + 8 * micro_batch + first_unit


def flex_worker(rank, world, store, out_dir):
    """Every micro-batch of the flex plan: this unit's group runs ring and Ulysses attention on its sequences."""
    from sluice.context_parallel import FlexCPGroups, flex_cp_work

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world, timeout=timedelta(seconds=60)
    )
    problem, plan = flex_problem()
    pool = FlexCPGroups(problem.units, [degree.degree for degree in problem.degrees])
    results = {}
    for m, work in enumerate(flex_cp_work(problem, plan, rank)):
        if work is None:
            continue
        lengths = [FLEX_LENGTHS[s] for s in work.sequences]
        shard = cp_shard(work.cu_seqlens, work.degree, work.rank)
        q_full, k_full, v_full, upstream = inputs(lengths, FLEX_HEADS, flex_seed(m, work.first_unit))
        for kind, attention in (("ring", ring_attention), ("ulysses", ulysses_attention)):
            q, k, v = (shard.select(t).clone().requires_grad_() for t in (q_full, k_full, v_full))
            out = attention(q, k, v, work.cu_seqlens, group=pool.group(work))
            (out * shard.select(upstream)).sum().backward()
            results[(m, kind)] = (out.detach(), q.grad, k.grad, v.grad)
    torch.save(results, os.path.join(out_dir, f"{rank}.pt"))
    dist.destroy_process_group()


def test_flex_cp_work_gives_each_sequence_one_group():
    from sluice.context_parallel import flex_cp_work

    problem, plan = flex_problem()
    work = [flex_cp_work(problem, plan, unit) for unit in range(4)]
    layouts = set()
    seen = []
    for m, micro_batch in enumerate(plan.micro_batches):
        degrees = []
        for group in micro_batch.groups:
            degree = problem.degrees[group.degree_index].degree
            degrees.append(degree)
            members = [work[unit][m] for unit in range(group.first_unit, group.first_unit + degree)]
            assert [member.rank for member in members] == list(range(degree))
            for member in members:
                assert (member.degree, member.first_unit) == (degree, group.first_unit)
                assert member.sequences == tuple(group.sequences.tolist())
                assert member.cu_seqlens.dtype == torch.int32
                assert member.cu_seqlens.tolist() == cu_of([FLEX_LENGTHS[s] for s in member.sequences]).tolist()
            seen += member.sequences
        covered = sum(degrees)
        assert sum(work[unit][m] is not None for unit in range(4)) == covered
        layouts.add(tuple(degrees))
    assert sorted(seen) == list(range(len(FLEX_LENGTHS)))  # every sequence in exactly one group
    # The groups change between micro-batches, and some micro-batch mixes sizes: the case this test is for.
    assert len(layouts) >= 2 and any(len(set(layout)) > 1 for layout in layouts), layouts
    with pytest.raises(ValueError, match=re.escape("unit must be in [0, 4)")):
        flex_cp_work(problem, plan, 4)


def test_flex_cp_groups_equal_unsharded_attention(tmp_path):
    assert run(4, tmp_path, target=flex_worker) == [0] * 4
    problem, plan = flex_problem()
    results = [torch.load(tmp_path / f"{rank}.pt") for rank in range(4)]
    for m, micro_batch in enumerate(plan.micro_batches):
        for group in micro_batch.groups:
            degree = problem.degrees[group.degree_index].degree
            lengths = [FLEX_LENGTHS[s] for s in group.sequences.tolist()]
            expected = reference(lengths, FLEX_HEADS, flex_seed(m, group.first_unit))
            for kind in ("ring", "ulysses"):
                for position, what in enumerate(("output", "dq", "dk", "dv")):
                    assembled = torch.full_like(expected[position], float("nan"))
                    for rank in range(degree):
                        shard = cp_shard(cu_of(lengths), degree, rank)
                        assembled[shard.index] = results[group.first_unit + rank][(m, kind)][position].double()
                    error = relative_error(assembled, expected[position])
                    assert error <= TOLERANCE, f"{kind}, micro-batch {m}, CP {degree}: {what} off by {error:.2e}"


def test_flex_cp_groups_need_a_process_group():
    from sluice.context_parallel import FlexCPGroups

    with pytest.raises(RuntimeError, match="not initialised"):
        FlexCPGroups(4, [1, 2, 4])
