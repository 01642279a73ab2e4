"""CP groups per micro-batch from Python: the solver's plans pass their check and respect the bound, the problem
built from a profile's CP schemes, and bad input refused."""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import sluice


def degrees():
    return [
        sluice.FlexCpDegree(1, sluice.QuadraticLatency(1e-6, 1e-4, 1e-3), 40),
        sluice.FlexCpDegree(2, sluice.QuadraticLatency(0.5e-6, 0.6e-4, 2e-3), 80, 4),
        sluice.FlexCpDegree(4, sluice.QuadraticLatency(0.25e-6, 0.35e-4, 4e-3), 160, 8),
    ]


def test_solved_plans_pass_their_check_and_respect_the_bound():
    rng = np.random.default_rng(7)
    for pp in (1, 4):
        lengths = rng.integers(1, 150, size=40)
        problem = sluice.FlexCpProblem(lengths, 4, pp, degrees())
        plan = sluice.solve_flex_cp(problem)
        plan.check(problem)
        assert plan.lower_bound == pytest.approx(problem.lower_bound())
        assert plan.lower_bound <= plan.seconds
        times = [problem.micro_batch_seconds(micro_batch) for micro_batch in plan.micro_batches]
        assert plan.seconds == pytest.approx(sum(times) + (pp - 1) * max(times))
        for micro_batch, seconds in zip(plan.micro_batches, times):
            assert seconds == pytest.approx(max(problem.group_seconds(group) for group in micro_batch.groups))
        assert sorted(np.concatenate([g.sequences for mb in plan.micro_batches for g in mb.groups]).tolist()) == list(
            range(40))
        assert sluice.solve_flex_cp(problem) == plan  # deterministic


def test_one_degree_per_micro_batch():
    problem = sluice.FlexCpProblem([61, 37, 12, 8, 3, 1, 150], 4, 1, degrees(), one_degree_per_micro_batch=True)
    plan = sluice.solve_flex_cp(problem, targets=8, improvement_rounds=2)
    plan.check(problem)
    for micro_batch in plan.micro_batches:
        assert len({group.degree_index for group in micro_batch.groups}) == 1


def test_flexsp_plans_on_every_unit_from_degree_two_and_charges_its_collectives():
    lengths = np.random.default_rng(3).integers(1, 150, size=40)
    problem = sluice.FlexCpProblem(lengths, 4, 1, degrees(), collective_seconds=0.01, backward_ratio=2.0)
    assert problem.collective_seconds == 0.01 and problem.backward_ratio == 2.0
    plan = sluice.solve_flexsp(problem)
    plan.check(problem)
    for micro_batch in plan.micro_batches:
        assert all(group.degree_index > 0 for group in micro_batch.groups)  # FlexSP's pool leaves out degree 1
        assert sum(problem.degrees[group.degree_index].degree for group in micro_batch.groups) == 4
        slowest = max(problem.group_seconds(group) for group in micro_batch.groups)
        # ZeRO-3's collectives: 0.01 s hidden by the forward pass, 0.02 s by the backward, where they are long enough
        assert problem.micro_batch_seconds(micro_batch) == pytest.approx(
            max(slowest / 3, 0.01) + max(slowest * 2 / 3, 0.02))
    assert sluice.solve_flexsp(sluice.FlexCpProblem([60], 4, 1, degrees()[:2])) is None  # one group of 2 on 4 units
    with pytest.raises(sluice.InvalidInput, match="collectives"):
        sluice.FlexCpProblem(lengths, 4, 1, degrees(), collective_seconds=-1.0)


def test_a_plan_of_another_problem_is_refused():
    problem = sluice.FlexCpProblem([61, 37, 12], 4, 1, degrees())
    other = sluice.FlexCpProblem([61, 37], 4, 1, degrees())
    with pytest.raises(sluice.InvalidPlan):
        sluice.solve_flex_cp(other).check(problem)


def test_the_problem_of_a_profiles_cp_schemes():
    profile = sluice.with_scheme_space(sluice.Profile.bundled("llama2-7b", gpus=16), cp=[2, 4, 8],
                                       cp_kinds=["ring", "ulysses"])
    base = sluice.Scheme(2, 1)
    lengths = [200, 4096, 30000, 80000, 512, 12000]
    ring = sluice.flex_cp_problem(profile, base, 8, lengths, cp_kinds=["ring"])
    assert [degree.degree for degree in ring.degrees] == [1, 2, 4, 8]
    assert [degree.length_multiple for degree in ring.degrees] == [1, 4, 8, 16]  # 2·R causal chunks
    ulysses = sluice.flex_cp_problem(profile, base, 8, lengths, cp_kinds=["ulysses"])
    assert [degree.length_multiple for degree in ulysses.degrees] == [1, 1, 1, 1]
    assert ring.units == 8 and ring.pp == 1 and ring.lengths.tolist() == lengths
    capacities = [degree.capacity for degree in ring.degrees]
    assert capacities == sorted(capacities) and capacities[0] == profile.at(base).max_len
    plan = sluice.solve_flex_cp(ring)
    plan.check(ring)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (([], 4, 1), "the batch is empty"),
        (([5, 0], 4, 1), "sequence 1 has length 0"),
        (([500], 4, 1), "sequence 0 of 500 tokens fits no group"),
        (([5], 3, 1), "must be >= 1 and divide the 3 units"),
        (([5], 4, 0), "PP must be >= 1"),
    ],
)
def test_bad_problems_are_refused(arguments, message):
    with pytest.raises(sluice.InvalidInput, match=message):
        sluice.FlexCpProblem(*arguments, degrees())


def test_bad_degrees_and_kinds_are_refused():
    one, two, four = degrees()
    with pytest.raises(sluice.InvalidInput, match="must ascend"):
        sluice.FlexCpProblem([5], 4, 1, [one, four, two])
    with pytest.raises(sluice.InvalidInput, match="no CP degree"):
        sluice.FlexCpProblem([5], 4, 1, [])
    profile = sluice.with_scheme_space(sluice.Profile.bundled("llama2-7b", gpus=16), cp=[2])
    with pytest.raises(sluice.InvalidInput, match="cp_kinds"):
        sluice.flex_cp_problem(profile, sluice.Scheme(2, 1), 8, [100], cp_kinds=["spiral"])
    with pytest.raises(sluice.InvalidInput, match="not a ⟨TP, PP⟩ scheme"):
        sluice.flex_cp_problem(profile, sluice.Scheme(2, 1, cp=2), 8, [100])


def test_a_degrees_last_stage_work_needs_a_pipeline_and_fits_its_latency():
    head = sluice.LastStageWork(0.25e-4, 1e-3)
    with_head = sluice.FlexCpDegree(1, sluice.QuadraticLatency(1e-6, 1e-4, 1e-3), 40, last_stage=head)
    assert with_head.last_stage == head and degrees()[0].last_stage == sluice.LastStageWork()
    sluice.FlexCpProblem([5, 30], 4, 2, [with_head] + degrees()[1:])
    with pytest.raises(sluice.InvalidInput, match="CP degree 1 states last-stage work but the pipeline has one stage"):
        sluice.FlexCpProblem([5, 30], 4, 1, [with_head] + degrees()[1:])
    too_much = sluice.FlexCpDegree(1, sluice.QuadraticLatency(1e-6, 1e-4, 1e-3), 40,
                                   last_stage=sluice.LastStageWork(2e-4, 0))
    with pytest.raises(sluice.InvalidInput, match="exceeds its latency's b and c"):
        sluice.FlexCpProblem([5, 30], 4, 2, [too_much] + degrees()[1:])


def test_the_gpu_checks_flex_plans_are_valid_and_each_as_its_system_forms_groups(tmp_path):
    """scripts/flex-cp-gpu-plans.py, which plans what scripts/cp-gpu-check.py times on a GPU."""
    script = pathlib.Path(__file__).resolve().parents[3] / "scripts" / "flex-cp-gpu-plans.py"
    out = tmp_path / "plans.json"
    subprocess.run([sys.executable, str(script), "--out", str(out), "--tokens", "131072"], check=True,
                   capture_output=True)
    document = json.loads(out.read_text())
    plans = {plan["name"]: plan for plan in document["plans"]}
    assert set(plans) == {"sluice", "dynamic_cp", "static_cp8"} and document["reference"] == "static_cp8"
    for plan in plans.values():
        placed = sorted(s for mb in plan["micro_batches"] for group in mb["groups"] for s in group["sequences"])
        assert placed == list(range(len(document["lengths"])))
        for micro_batch in plan["micro_batches"]:
            assert sum(group["degree"] for group in micro_batch["groups"]) <= plan["units"]
            for group in micro_batch["groups"]:
                assert group["lengths"] == [document["lengths"][s] for s in group["sequences"]]
        assert plan["lower_bound"] <= plan["predicted_seconds"] + 1e-9
    assert {g["degree"] for mb in plans["static_cp8"]["micro_batches"] for g in mb["groups"]} == {8}
    for micro_batch in plans["dynamic_cp"]["micro_batches"]:
        assert len({group["degree"] for group in micro_batch["groups"]}) == 1
    assert plans["sluice"]["predicted_seconds"] <= plans["static_cp8"]["predicted_seconds"]
