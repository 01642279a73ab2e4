"""sluice.Planner and sluice.IterationPlanner: the plans the comparison reports, the order and results of synchronous
planning, a bounded window, errors at their iteration, and a clean stop at any point."""
import itertools
import subprocess
import sys
import threading

import numpy as np
import pytest

import sluice
from conftest import CANDIDATES_64


# The planner's mechanics are the same for any plan: most tests plan cheaply (1F1B, the V step charged, no layout
# moves); the first checks the default plan against the comparison's.
CHEAP = sluice.PlanOptions(dispatch=sluice.DispatchOptions(seed=4), schedule=sluice.ScheduleOptions(kind="1f1b"),
                           v_step="on", layout_moves="none")


@pytest.fixture(scope="module")
def batches():
    dataset = sluice.LengthDataset.bundled("cpython-stdlib").truncated(32768)
    return list(itertools.islice(sluice.BatchSampler(dataset, tokens_per_batch=200_000, seed=3), 6))


def test_plans_are_the_comparisons_sluice_plans():
    """What sluice simulate reports for sluice is what a trainer's Planner plans, iteration by iteration."""
    profile = sluice.Profile.bundled("llama2-7b", gpus=16)
    dataset = sluice.LengthDataset.bundled("man-pages").truncated(16384)
    source = list(itertools.islice(sluice.BatchSampler(dataset, tokens_per_batch=20_000, seed=3), 3))
    dispatch = sluice.DispatchOptions(trials=8, seed=3)
    comparison = sluice.compare_systems(profile, dataset, batches=source, context=16384, tokens=20_000,
                                        dispatch=dispatch, seed=3)
    options = sluice.PlanOptions(dispatch=dispatch, schedule=sluice.ScheduleOptions(seed=3))  # the comparison's
    with sluice.Planner(profile, comparison.candidates, source, options, threads=2) as planner:
        delivered = list(planner)
    run = comparison["sluice"]
    assert [planned.plan for planned in delivered] == run.plans[:3]
    for planned, outcome in zip(delivered, run.iterations):
        assert planned.plan.strategy.name == outcome.strategy
        assert planned.simulated.schedule.makespan + outcome.switching == outcome.seconds


@pytest.mark.parametrize("threads, lookahead", [(1, 1), (2, 2), (4, 3)])
def test_plans_equal_synchronous_planning_in_order(profile_64, batches, threads, lookahead):
    with sluice.Planner(profile_64, CANDIDATES_64, batches, CHEAP, threads=threads, lookahead=lookahead) as planner:
        delivered = list(planner)
    planner_alone = sluice.IterationPlanner(profile_64, CANDIDATES_64, CHEAP)
    assert [planned.iteration for planned in delivered] == list(range(len(batches)))
    for planned, batch in zip(delivered, batches):
        assert np.array_equal(planned.ids, batch.ids) and np.array_equal(planned.lengths, batch.lengths)
        assert planned.simulated == planner_alone.plan(batch.lengths, ids=batch.ids)
        assert planned.plan == planned.simulated.plan
        planner_alone.validate(planned.simulated, planned.lengths, ids=planned.ids)
    assert planner.waits.calls == len(batches) + 1  # the last call found the source ended


def test_sources_of_arrays_and_pairs(profile_64, batches):
    pairs = [(batch.ids, batch.lengths) for batch in batches[:2]]
    arrays = [batch.lengths.astype(np.int32) for batch in batches[:2]]
    from_pairs = [planned.simulated for planned in sluice.Planner(profile_64, CANDIDATES_64, pairs, CHEAP)]
    from_arrays = list(sluice.Planner(profile_64, CANDIDATES_64, arrays, CHEAP))
    planner = sluice.IterationPlanner(profile_64, CANDIDATES_64, CHEAP)
    assert from_pairs == [planner.plan(l, ids=i) for i, l in pairs]
    assert [p.ids.tolist() for p in from_arrays] == [list(range(len(a))) for a in arrays]


def test_layout_moves_are_charged_as_asked(profile_64, batches):
    lengths = batches[0].lengths
    planned = {}
    for policy in ("none", "exposed", "all"):
        options = sluice.PlanOptions(layout_moves=policy, schedule=sluice.ScheduleOptions(kind="1f1b"))
        planner = sluice.IterationPlanner(profile_64, CANDIDATES_64, options)
        planned[policy] = planner.plan(lengths)
        assert planned[policy].plan.overhead == (0 if policy == "none" else planner.charged[planned[policy].chosen])
    moves = sluice.IterationPlanner(profile_64, CANDIDATES_64).layout_moves
    charged_all = sluice.IterationPlanner(profile_64, CANDIDATES_64, sluice.PlanOptions(layout_moves="all")).charged
    assert len(moves) == len(CANDIDATES_64) and np.array_equal(charged_all, moves) and (moves > 0).all()
    assert planned["none"].total <= planned["exposed"].total <= planned["all"].total


def test_window_is_bounded(profile_64, batches):
    pulled = []

    def source():
        for batch in itertools.cycle(batches):
            pulled.append(batch.index)
            yield batch

    lookahead = 2
    with sluice.Planner(profile_64, CANDIDATES_64, source(), CHEAP, lookahead=lookahead, threads=2) as planner:
        for planned in itertools.islice(planner, 20):
            # Batches pulled beyond those delivered (this one included): at most lookahead, so memory stays flat.
            assert len(pulled) - planned.iteration <= lookahead + 1
    assert planner.closed


def test_planning_error_reaches_its_iteration(profile_64, batches):
    source = [batches[0], np.array([1000, 500_000]), batches[1]]
    planner = sluice.Planner(profile_64, CANDIDATES_64, source, CHEAP)
    assert next(planner).iteration == 0
    with pytest.raises(sluice.InvalidInput, match="no candidate holds"):
        next(planner)
    assert next(planner).iteration == 2  # the run goes on after a bad batch
    with pytest.raises(StopIteration):
        next(planner)


def test_source_error_ends_the_run(profile_64, batches):
    def source():
        yield batches[0]
        yield np.array([4096, -1])  # an invalid batch: raised when pulled, it ends the source
        yield batches[1]

    planner = sluice.Planner(profile_64, CANDIDATES_64, source(), CHEAP)
    assert next(planner).iteration == 0
    with pytest.raises(sluice.InvalidInput, match="lengths"):
        next(planner)
    with pytest.raises(StopIteration):
        next(planner)

    def failing():
        yield batches[0]
        raise KeyError("the data loader broke")

    planner = sluice.Planner(profile_64, CANDIDATES_64, failing(), CHEAP)
    assert next(planner).iteration == 0
    with pytest.raises(KeyError, match="data loader"):
        next(planner)


def test_close_mid_run_and_from_another_thread(profile_64, batches):
    endless = itertools.cycle(batches)
    planner = sluice.Planner(profile_64, CANDIDATES_64, endless, CHEAP, lookahead=3, threads=2)
    assert [next(planner).iteration for _ in range(3)] == [0, 1, 2]
    planner.close()
    planner.close()
    assert planner.closed
    with pytest.raises(StopIteration):
        next(planner)

    def slow_source():
        yield batches[0]
        threading.Event().wait(0.2)
        yield batches[1]

    planner = sluice.Planner(profile_64, CANDIDATES_64, slow_source(), CHEAP, lookahead=1)
    next(planner)
    threading.Timer(0.05, planner.close).start()
    with pytest.raises(StopIteration):  # a next() that waits is woken by close() and ends the run
        next(planner)


def test_bad_options_raise_when_made(profile_64, batches):
    with pytest.raises(sluice.InvalidInput):
        sluice.Planner(profile_64, CANDIDATES_64, batches, lookahead=0)
    with pytest.raises(sluice.InvalidInput):
        sluice.Planner(profile_64, CANDIDATES_64, batches, threads=0)
    with pytest.raises(TypeError):
        sluice.Planner(profile_64, CANDIDATES_64, 42)


def test_interpreter_exits_with_a_planner_left_open():
    script = (
        "import itertools, sluice\n"
        "profile = sluice.Profile.bundled('llama2-32b', gpus=64)\n"
        "dataset = sluice.LengthDataset.bundled('cpython-stdlib').truncated(32768)\n"
        "sampler = sluice.BatchSampler(dataset, tokens_per_batch=200_000)\n"
        "planner = sluice.Planner(profile, ['4*tp16pp1'], (batch for batch in sampler), lookahead=4)\n"
        "print(next(planner).iteration)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"


def test_flex_domain_beside_the_candidates(batches):
    """A flex CP domain is planned on every batch it holds, runs exactly where it is faster than the kept candidate,
    and the Planner gives the same plans as IterationPlanner."""
    profile = sluice.Profile.bundled("llama2-7b", gpus=8)
    lengths = [3000, 1200, 800, 40, 15000, 9000]
    for scale, runs in ((1e-6, True), (1e3, False)):
        latency = sluice.QuadraticLatency(scale * 1e-9, scale * 1e-4, scale * 1e-2)
        problem = sluice.FlexCpProblem(lengths, 8, 1, [sluice.FlexCpDegree(1, latency, 16384),
                                                       sluice.FlexCpDegree(2, latency, 32768)])
        domain = sluice.FlexDomain([sluice.Scheme.parse("tp1pp1"), sluice.Scheme.parse("tp1cp2ulyssespp1")], problem)
        assert str(domain.strategy) == "8*tp1pp1"
        assert list(domain.problem_of(lengths).lengths) == lengths
        planner = sluice.IterationPlanner(profile, ["2*tp4pp1"], CHEAP, flex=domain)
        iteration = planner.plan(lengths)
        planner.validate(iteration, lengths)
        assert iteration.flex is not None and iteration.runs_flex == runs
        assert iteration.total == (iteration.flex.plan.seconds if runs else iteration.candidate_total)
        assert sluice.SimulatedIteration.from_json(iteration.to_json()) == iteration
        with sluice.Planner(profile, ["2*tp4pp1"], [lengths, lengths], CHEAP, flex=domain) as ahead:
            assert [planned.simulated for planned in ahead] == [iteration, iteration]
    # Of several domains the fastest runs, a charge counted as its groups' time is.
    fast = sluice.FlexDomain(domain.schemes, problem)
    charged = sluice.FlexDomain(domain.schemes, problem, overhead=1e3)
    domains = sluice.FlexDomains([charged, domain, fast])
    assert [d.overhead for d in domains.domains] == [1e3, 0.0, 0.0]
    planner = sluice.IterationPlanner(profile, ["2*tp4pp1"], CHEAP, flex=domains)
    iteration = planner.plan(lengths)
    planner.validate(iteration, lengths)
    assert iteration.flex.domain == 1 and iteration.flex.total == iteration.flex.plan.seconds
    # The candidates' own planner knows no domain: a plan that carries one is not its plan.
    with pytest.raises(sluice.InvalidPlan, match="offers no flex CP domain"):
        sluice.IterationPlanner(profile, ["2*tp4pp1"], CHEAP).validate(iteration, lengths)
    with pytest.raises(sluice.InvalidInput, match="1 schemes for 2 degrees"):
        sluice.FlexDomain([sluice.Scheme.parse("tp1pp1")], problem)
