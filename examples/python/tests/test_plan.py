"""The sluice plan against `sluice plan`; plan_iteration and plan_fixed_length: their validators, documents and
threads."""
import json
import pickle
import threading

import numpy as np
import pytest

import sluice
from conftest import CANDIDATES_64, json_of, without_header


def tool_options(profile, seed):
    """`sluice plan`'s: --seed seeds the dispatch and the schedule search, its default link, the model's hidden."""
    return sluice.PlanOptions(dispatch=sluice.DispatchOptions(seed=seed), schedule=sluice.ScheduleOptions(seed=seed),
                              problem=sluice.ProblemOptions(hidden=profile.hidden, latency=1e-5, bandwidth=100e9))


def test_sampled_iterations_match_the_tool(cli, profile_64):
    document = cli("plan", "--profile", "llama2-32b", "--gpus", 64, "--lengths", "cpython-stdlib", "--context",
                   32768, "--tokens", 200_000, "--seed", 5, "--iterations", 3, "--strategies", ",".join(CANDIDATES_64))
    dataset = sluice.LengthDataset.bundled("cpython-stdlib").truncated(32768)
    sampler = sluice.BatchSampler(dataset, tokens_per_batch=200_000, seed=5)
    planner = sluice.IterationPlanner(profile_64, CANDIDATES_64, tool_options(profile_64, seed=5))
    for shown in document["iterations"]:
        batch = sampler.next()
        assert (batch.epoch, batch.tokens, len(batch)) == (shown["epoch"], shown["tokens"], shown["sequences"])
        iteration = planner.plan(batch.lengths, ids=batch.ids)
        planner.validate(iteration, batch.lengths, ids=batch.ids)
        assert without_header(json_of(iteration.plan)) == shown["plan"]
        assert (iteration.schedule.makespan, iteration.total) == (shown["makespan"], shown["total"])


def test_a_given_batch_matches_the_tool(cli, profile_64, tmp_path):
    ids, lengths = [3, 8, 12, 20], [4096, 17000, 950, 2300]
    (tmp_path / "batch.json").write_text(json.dumps([{"id": i, "length": n} for i, n in zip(ids, lengths)]))
    document = cli("plan", "--profile", "llama2-32b", "--gpus", 64, "--strategies", ",".join(CANDIDATES_64),
                   "--batch", tmp_path / "batch.json")
    planner = sluice.IterationPlanner(profile_64, CANDIDATES_64, tool_options(profile_64, seed=0))
    iteration = planner.plan(np.array(lengths, dtype=np.int32), ids=ids)
    assert without_header(json_of(iteration.plan)) == document["iterations"][0]["plan"]


def test_plan_structure_is_numpy(profile_64, batch_64):
    plan = sluice.plan_iteration(batch_64.lengths, CANDIDATES_64, profile_64, ids=batch_64.ids)
    assert plan.strategy == sluice.Strategy(CANDIDATES_64[plan.chosen])
    assert len(plan.pipelines) == plan.strategy.pipeline_count
    length_of = dict(zip(batch_64.ids.tolist(), batch_64.lengths.tolist()))
    planned = np.concatenate([mb.sequence_ids for p in plan.pipelines for mb in p.micro_batches])
    assert sorted(planned.tolist()) == sorted(batch_64.ids.tolist())
    for pipeline in plan.pipelines:
        for micro_batch, copy in zip(pipeline.micro_batches, pipeline.sequence_ids):
            view = micro_batch.sequence_ids
            assert view.dtype == np.int64 and not view.flags.writeable and np.array_equal(view, copy)
            assert micro_batch.tokens == sum(length_of[i] for i in view)
    assert plan.total == pytest.approx(plan.estimate + plan.overhead)
    assert plan.estimate == max(p.estimate for p in plan.pipelines)
    assert [c.strategy.name for c in plan.candidates] == CANDIDATES_64


def test_views_outlive_their_plan(profile_64, batch_64):
    plan = sluice.plan_iteration(batch_64.lengths, CANDIDATES_64, profile_64, ids=batch_64.ids)
    expected = plan.pipelines[0].sequence_ids[0].copy()
    view = plan.pipelines[0].micro_batches[0].sequence_ids
    del plan
    assert np.array_equal(view, expected)


def test_documents_round_trip(profile_64, batch_64, tmp_path):
    plan = sluice.plan_iteration(batch_64.lengths, CANDIDATES_64, profile_64, ids=batch_64.ids)
    assert sluice.IterationPlan.from_json(plan.to_json()) == plan
    assert pickle.loads(pickle.dumps(plan)) == plan
    plan.save(tmp_path / "plan.json")
    assert sluice.IterationPlan.load(tmp_path / "plan.json") == plan


def test_validator_catches_a_wrong_batch(profile_64, batch_64):
    plan = sluice.plan_iteration(batch_64.lengths, CANDIDATES_64, profile_64, ids=batch_64.ids)
    with pytest.raises(sluice.InvalidPlan):
        plan.validate(batch_64.lengths[:-1], profile_64, ids=batch_64.ids[:-1])
    other = batch_64.lengths.copy()
    other[0] += 1
    with pytest.raises(sluice.InvalidPlan):
        plan.validate(other, profile_64, ids=batch_64.ids)
    with pytest.raises(sluice.InvalidInput):
        plan.validate(batch_64.lengths, profile_64, ids=batch_64.ids[:3])


def test_bad_batches_and_options(profile_64):
    with pytest.raises(sluice.InvalidInput, match="no candidate holds"):
        sluice.plan_iteration([500_000], CANDIDATES_64, profile_64)
    with pytest.raises(sluice.InvalidInput):
        sluice.plan_iteration([1000], [], profile_64)
    with pytest.raises(sluice.InvalidInput):
        sluice.plan_iteration([1000, 2000], CANDIDATES_64, profile_64, ids=[1, 1])
    with pytest.raises(sluice.InvalidInput):
        sluice.plan_iteration([1000], ["4*tp16pp1"], profile_64, dispatch=sluice.DispatchOptions(trials=0))


def test_deterministic_across_threads_and_python_threads(profile_64, batch_64):
    seeded = sluice.DispatchOptions(seed=9)
    reference = sluice.plan_iteration(batch_64.lengths, CANDIDATES_64, profile_64, ids=batch_64.ids, dispatch=seeded)
    for threads in (2, 4):
        assert sluice.plan_iteration(batch_64.lengths, CANDIDATES_64, profile_64, ids=batch_64.ids,
                                     dispatch=sluice.DispatchOptions(seed=9, threads=threads)) == reference
    results = [None] * 6

    def plan(slot):
        results[slot] = sluice.plan_iteration(batch_64.lengths, CANDIDATES_64, profile_64, ids=batch_64.ids,
                                              dispatch=seeded)

    workers = [threading.Thread(target=plan, args=(slot,)) for slot in range(len(results))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert all(result == reference for result in results)


def test_fixed_length_baseline(profile_64, batch_64):
    plan = sluice.plan_fixed_length(batch_64.lengths, "4*tp16pp1", profile_64, capacity_tokens=32768,
                                    ids=batch_64.ids)
    plan.validate(batch_64.lengths, profile_64, ids=batch_64.ids)
    assert all(mb.tokens <= 32768 for p in plan.pipelines for mb in p.micro_batches)
    with pytest.raises(sluice.InvalidInput):
        sluice.plan_fixed_length(batch_64.lengths, "4*tp16pp1", profile_64, capacity_tokens=0)


def test_flex_domains_match_the_tool(cli, tmp_path):
    """sluice_flex_domains offers a Python planner the flex CP domains `sluice plan` offers: the same plan."""
    profile = sluice.with_scheme_space(sluice.Profile.bundled("llama2-7b", gpus=16), cp=[2, 4],
                                       cp_kinds=["ring", "ulysses"], recompute=True)
    ids, lengths = [0, 1, 2, 3, 4], [12000, 900, 3100, 250, 7000]
    (tmp_path / "batch.json").write_text(json.dumps([{"id": i, "length": n} for i, n in zip(ids, lengths)]))
    document = cli("plan", "--profile", "llama2-7b", "--gpus", 16, "--strategies", "2*tp8pp1", "--cp", "2,4",
                   "--cp-kinds", "ring,ulysses", "--ac", "--context", 16384, "--batch", tmp_path / "batch.json")
    shown = document["iterations"][0]
    options = tool_options(profile, seed=0)
    offered = sluice.sluice_flex_domains(profile, context=16384, planning=options)
    assert len(offered.names) == len(offered.domains.domains) == len(offered.layout_moves) > 1
    assert offered.flexsp and offered.names[0] == "16*tp1pp1 flex CP (ZeRO-3)"
    planner = sluice.IterationPlanner(profile, ["2*tp8pp1"], options, flex=offered.domains)
    iteration = planner.plan(lengths, ids=ids)
    planner.validate(iteration, lengths, ids=ids)
    assert json_of(iteration)["flex"] == shown["flex"]
    assert without_header(json_of(iteration.plan)) == shown["plan"] and iteration.total == shown["total"]
    assert offered.domains.domains[iteration.flex.domain].strategy == iteration.flex.strategy
    ranks = sluice.flex_domain_ranks(iteration.flex.strategy, profile)
    assert without_header(json_of(ranks)) == shown["flex_placement"]
    assert sorted(rank for pool in ranks.groups.cp for rank in pool) == list(range(16))
    # Nothing holds a context longer than every scheme's MaxLen; a context must be positive.
    assert sluice.sluice_flex_domains(profile, context=10**9).domains is None
    with pytest.raises(sluice.InvalidInput, match="context must be >= 1"):
        sluice.sluice_flex_domains(profile, context=0)
