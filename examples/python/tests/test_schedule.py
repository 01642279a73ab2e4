"""Micro-batch partitions, pipeline schedules, the simulator and the simulated iteration: against `sluice schedule`
and `sluice trace`, their validators, documents, errors and threads."""
import json
import pickle
import threading

import numpy as np
import pytest

import sluice
from conftest import CANDIDATES_64, json_of, without_header

LINK = dict(latency=1e-5, bandwidth=100e9)  # the tool's default link


def tool_problem(profile):
    """The tool's: its default link, boundary tensors as wide as the model's hidden size."""
    return sluice.ProblemOptions(hidden=hidden_of(profile), **LINK)


def tool_options(profile, seed):
    """`sluice trace`'s: --seed seeds the dispatch and the schedule search."""
    return sluice.PlanOptions(dispatch=sluice.DispatchOptions(seed=seed), schedule=sluice.ScheduleOptions(seed=seed),
                              problem=tool_problem(profile))


def hidden_of(profile):
    assert profile.hidden == json.loads(profile.to_json())["model"]["hidden"]
    return profile.hidden


@pytest.fixture(scope="module")
def profile_7b():
    return sluice.Profile.bundled("llama2-7b")


@pytest.fixture(scope="module")
def setup_pp4(profile_7b):
    return sluice.stage_cost(profile_7b.at(sluice.Scheme(1, 4)))


@pytest.fixture(scope="module")
def batch_7b():
    return sluice.BatchSampler(sluice.LengthDataset.bundled("man-pages").truncated(8192), tokens_per_batch=40_000,
                               seed=3).next()


def options_pp4(setup, profile, **extra):
    return dict(stages=4, replicas=2, micro_batch_memory=setup.memory_limit, schedule=sluice.ScheduleOptions(seed=3),
                problem=tool_problem(profile), **extra)


@pytest.fixture(scope="module")
def run_pp4(batch_7b, setup_pp4, profile_7b):
    return sluice.plan_pipeline(batch_7b.lengths, setup_pp4.model, ids=batch_7b.ids,
                                **options_pp4(setup_pp4, profile_7b))


def test_pipeline_plan_matches_the_tool(cli, profile_7b, setup_pp4):
    document = cli("schedule", "--stages", 4, "--replicas", 2, "--profile", "llama2-7b", "--lengths", "man-pages",
                   "--tokens", 40_000, "--seed", 3, "--context", 8192)
    batch = sluice.BatchSampler(sluice.LengthDataset.bundled("man-pages").truncated(document["context"]),
                                tokens_per_batch=40_000, seed=3).next()
    assert (len(batch), batch.tokens) == (document["sequences"], document["tokens"])
    assert setup_pp4.memory_limit == document["micro_batch_memory"]
    options = options_pp4(setup_pp4, profile_7b)
    plan = sluice.plan_pipeline(batch.lengths, setup_pp4.model, ids=batch.ids, **options)
    plan.validate(batch.lengths, [setup_pp4.model], ids=batch.ids,
                  **{k: v for k, v in options.items() if k != "schedule"})
    assert without_header(json_of(plan.partition)) == document["partition"]
    assert without_header(json_of(plan.assignment)) == document["assignment"]
    assert plan.makespan == document["makespan"]
    for replica, shown in zip(plan.replicas, document["replica_schedules"], strict=True):
        assert replica.micro_batches.tolist() == shown["micro_batches"]
        schedule = replica.schedule
        assert (schedule.kind, schedule.memory_aware, schedule.candidates) == (
            shown["kind"], shown["memory_aware"], shown["candidates"])
        assert schedule.injection.tolist() == shown["injection"]
        assert schedule.simulation.makespan == shown["makespan"]
        assert schedule.simulation.peak_memory.tolist() == shown["peak_memory"]
        assert schedule.simulation.idle.tolist() == shown["idle"]
        assert json_of(schedule.plan) == shown["plan"]


def test_the_plan_is_numpy_views_and_instructions(run_pp4, batch_7b):
    partition = run_pp4.partition
    placed = np.concatenate([mb.sample_ids for mb in partition.micro_batches])
    assert sorted(placed.tolist()) == sorted(batch_7b.ids.tolist())
    view = partition.micro_batches[0].sample_ids
    assert view.dtype == np.int64 and not view.flags.writeable
    assert np.array_equal(partition.times, [mb.seconds for mb in partition.micro_batches])
    assert run_pp4.assignment.max_load == pytest.approx(max(run_pp4.assignment.loads))
    replica = run_pp4.replicas[0]
    plan = replica.schedule.plan
    assert len(plan.ranks) == plan.stages == 4 and plan.micro_batches == len(replica.micro_batches)
    for rank, instructions in enumerate(plan.ranks):
        assert all(i.stage == rank for i in instructions)
        kinds = [i.kind for i in instructions]
        assert kinds.count("forward") == kinds.count("backward") == plan.micro_batches
        for i in instructions:
            assert (i.peer == -1) == (i.kind in ("load_input", "forward", "backward", "free_buffer"))
            assert len(i.shape) == 2
    assert plan.ranks[0][0].kind == "load_input"
    assert sluice.check_deadlock(plan).ok


def test_the_schedule_pieces_agree(run_pp4):
    replica = run_pp4.replicas[0]
    problem, schedule = replica.problem, replica.schedule
    schedule.validate(problem)
    schedule.plan.validate(problem)
    assert sluice.simulate_schedule(problem, schedule.order) == schedule.simulation
    schedule.simulation.validate(problem, schedule.order)
    costs = problem.micro_batches
    rebuilt = sluice.SchedulingProblem(
        np.array([c.forward for c in costs]), np.array([c.backward for c in costs]),
        np.array([c.activation for c in costs]), np.array([c.tokens for c in costs]), problem.memory_limit,
        hidden=problem.hidden, element_bytes=problem.element_bytes, latency=problem.link.latency,
        bandwidth=problem.link.bandwidth)
    assert rebuilt == problem
    again = sluice.schedule_pipeline(rebuilt, schedule=sluice.ScheduleOptions(seed=3))
    assert again == schedule
    order = sluice.one_f_one_b_order(np.arange(len(costs)), problem.stages)
    one_f_one_b = sluice.simulate_schedule(problem, order)
    assert one_f_one_b.makespan >= schedule.simulation.makespan
    assert sluice.ScheduleOrder(order.stages) == order
    assert sum(len(ops) for ops in one_f_one_b.stages) == 2 * len(costs) * problem.stages
    gpipe = sluice.gpipe_order(np.arange(len(costs)), problem.stages)
    gpipe.validate(len(costs), problem.stages)
    cyclic = sluice.adaptive_cyclic_order(problem, schedule.injection)
    sluice.simulate_schedule(problem, cyclic).validate(problem, cyclic)


def test_partition_and_baselines(batch_7b, setup_pp4):
    model, limit = setup_pp4.model, setup_pp4.memory_limit
    partition = sluice.partition_micro_batches(batch_7b.lengths, model, ids=batch_7b.ids, stages=4, replicas=2,
                                               memory_limit=limit)
    partition.validate(batch_7b.lengths, model, ids=batch_7b.ids, stages=4, replicas=2, memory_limit=limit)
    assert partition.layout == "padded" and partition.cost_model == 0
    packed = sluice.partition_micro_batches(batch_7b.lengths, [model, model], ids=batch_7b.ids, stages=4,
                                            memory_limit=limit, layout="packed", ordering=None)
    assert packed.layout == "packed" and all(mb.shape.rows == 1 for mb in packed.micro_batches)
    tokens = sluice.token_based_micro_batches(batch_7b.lengths, model, tokens_per_micro_batch=8192,
                                              ids=batch_7b.ids, stages=4, replicas=2, memory_limit=limit)
    tokens.validate(batch_7b.lengths, model, ids=batch_7b.ids, stages=4, replicas=2, memory_limit=limit)
    # The DP is optimal among cuts of the same order into runs, up to its tmax thinning: (stages − 1) intervals.
    assert partition.objective <= tokens.objective + 3 * 5e-6
    fixed = sluice.fixed_length_packing(batch_7b.lengths, model, row_input=8192, ids=batch_7b.ids, stages=4,
                                        memory_limit=limit)
    assert fixed.layout == "fixed_rows" and all(mb.shape.input == 8192 for mb in fixed.micro_batches)
    assignment = sluice.balance_kk(partition.times, 3)
    assignment.validate(partition.times, 3)
    assert sluice.balance_lpt(partition.times, 3).max_load >= assignment.max_load * 0.75
    encoder = sluice.partition_micro_batches([300, 200, 100], model, targets=[50, 0, 20], ordering="path")
    assert sum(len(mb.sample_ids) for mb in encoder.micro_batches) == 3


def test_simulated_iteration_matches_the_tool(cli, profile_64, tmp_path):
    ids, lengths = [3, 8, 12, 20, 21, 40], [4096, 17000, 950, 2300, 8000, 600]
    (tmp_path / "batch.json").write_text(json.dumps([{"id": i, "length": n} for i, n in zip(ids, lengths)]))
    document = cli("trace", "--profile", "llama2-32b", "--gpus", 64, "--strategies", ",".join(CANDIDATES_64),
                   "--batch", tmp_path / "batch.json", "--seed", 2, "--context", 32768)
    problem = tool_problem(profile_64)
    planner = sluice.IterationPlanner(profile_64, CANDIDATES_64, tool_options(profile_64, seed=2))
    iteration = planner.plan(np.array(lengths, dtype=np.int32), ids=ids)
    planner.validate(iteration, lengths, ids=ids)
    iteration.validate(lengths, CANDIDATES_64, profile_64, ids=ids, candidate_overhead=planner.charged,
                       problem=problem)
    assert without_header(json_of(iteration.plan)) == document["plan"]
    assert iteration.chosen == document["chosen"]
    assert iteration.schedule.makespan == document["makespan"]
    assert iteration.makespans == [c["makespan"] for c in document["candidates"]]
    assert planner.charged.tolist() == [c["layout_move"] for c in document["candidates"]]
    assert (iteration.plan.overhead, iteration.total) == (document["layout_move"], document["total"])
    busy = [(j, p) for j, p in enumerate(iteration.schedule.pipelines) if p is not None]
    assert [j for j, _ in busy] == [p["index"] for p in document["pipelines"]]
    for (_, pipeline), shown in zip(busy, document["pipelines"]):
        assert pipeline.schedule.kind == shown["kind"]
        assert pipeline.schedule.simulation.makespan == shown["makespan"]
        assert pipeline.schedule.simulation.peak_memory.tolist() == shown["peak_memory"]
    again = sluice.schedule_iteration(iteration.plan, profile_64, schedule=sluice.ScheduleOptions(seed=2),
                                      problem=problem)
    again.validate(iteration.plan, profile_64, problem=problem)
    assert again == iteration.schedule
    assert iteration.total == pytest.approx(iteration.schedule.makespan + iteration.plan.overhead)


def test_documents_round_trip(run_pp4, tmp_path):
    values = [(run_pp4.partition, sluice.MicroBatchPartition), (run_pp4.assignment, sluice.ReplicaAssignment),
              (run_pp4.replicas[0].schedule.plan, sluice.ExecutionPlan)]
    for value, cls in values:
        assert cls.from_json(value.to_json()) == value
        assert pickle.loads(pickle.dumps(value)) == value
        value.save(tmp_path / "document.json")
        assert cls.load(tmp_path / "document.json") == value


@pytest.fixture(scope="module")
def iteration_64(profile_64):
    lengths = np.array([4096, 17000, 950, 2300, 8000, 600], dtype=np.int32)
    options = tool_options(profile_64, seed=2)
    return sluice.IterationPlanner(profile_64, CANDIDATES_64, options).plan(lengths)


def test_schedule_documents_round_trip(run_pp4, iteration_64, tmp_path):
    replica = run_pp4.replicas[0]
    unlimited = sluice.SchedulingProblem([[1e-3, 2e-3]], [[2e-3, 4e-3]], [[1e6, 1e6]], [64], [np.inf, 5e6])
    values = [(replica.problem, sluice.SchedulingProblem, "sluice.scheduling_problem"),
              (unlimited, sluice.SchedulingProblem, "sluice.scheduling_problem"),
              (replica.schedule.order, sluice.ScheduleOrder, "sluice.schedule_order"),
              (replica.schedule.simulation, sluice.ScheduleSimulation, "sluice.schedule_simulation"),
              (replica.schedule, sluice.PipelineSchedule, "sluice.pipeline_schedule"),
              (run_pp4, sluice.PipelineRunPlan, "sluice.pipeline_run_plan"),
              (iteration_64.schedule, sluice.IterationSchedule, "sluice.iteration_schedule"),
              (iteration_64, sluice.SimulatedIteration, "sluice.simulated_iteration")]
    for value, cls, format in values:
        text = value.to_json()
        assert json.loads(text)["format"] == format
        assert cls.from_json(text) == value
        assert pickle.loads(pickle.dumps(value)) == value
        value.save(tmp_path / "document.json")
        assert cls.load(tmp_path / "document.json") == value
        with pytest.raises(sluice.InvalidInput, match="not valid JSON"):
            cls.from_json(text[:len(text) // 2])
    # JSON has no infinity: an unlimited memory or bandwidth is written "inf" and read back as inf.
    document = json_of(unlimited)
    assert document["memory_limit"] == ["inf", 5e6] and document["link"]["bandwidth"] == "inf"
    back = sluice.SchedulingProblem.from_json(json.dumps(document))
    assert back.memory_limit[0] == np.inf and back.link.bandwidth == np.inf
    del document["link"]
    with pytest.raises(sluice.InvalidInput, match="missing field 'link'"):
        sluice.SchedulingProblem.from_json(json.dumps(document))
    document = json_of(iteration_64)
    document["makespans"][0] = "fast"
    with pytest.raises(sluice.InvalidInput, match=r"field 'makespans'\[0\]"):
        sluice.SimulatedIteration.from_json(json.dumps(document))
    document = json_of(run_pp4)
    document["replica_schedules"][0]["schedule"]["kind"] = "gpipe"
    with pytest.raises(sluice.InvalidInput, match="field 'kind'"):
        sluice.PipelineRunPlan.from_json(json.dumps(document))


def test_schedule_documents_name_what_the_tool_shows(cli, run_pp4, iteration_64, profile_64, tmp_path):
    """The documents use the field names of `sluice schedule --json` and `sluice trace --json` for what both show."""
    document = json_of(run_pp4)
    shown = cli("schedule", "--stages", 4, "--replicas", 2, "--profile", "llama2-7b", "--lengths", "man-pages",
                "--tokens", 40_000, "--seed", 3, "--context", 8192)
    for key in ("partition", "assignment", "makespan"):
        assert document[key] == shown[key]
    for replica, replica_shown in zip(document["replica_schedules"], shown["replica_schedules"], strict=True):
        assert replica["micro_batches"] == replica_shown["micro_batches"]
        schedule = replica["schedule"]
        for key in ("kind", "memory_aware", "injection", "candidates"):
            assert schedule[key] == replica_shown[key]
        for key in ("makespan", "peak_memory", "idle"):
            assert schedule["simulation"][key] == replica_shown[key]
        assert schedule["plan"] == without_header(replica_shown["plan"])
    ids, lengths = [3, 8, 12, 20, 21, 40], [4096, 17000, 950, 2300, 8000, 600]
    (tmp_path / "batch.json").write_text(json.dumps([{"id": i, "length": n} for i, n in zip(ids, lengths)]))
    traced = cli("trace", "--profile", "llama2-32b", "--gpus", 64, "--strategies", ",".join(CANDIDATES_64),
                 "--batch", tmp_path / "batch.json", "--seed", 2, "--context", 32768)
    options = tool_options(profile_64, seed=2)
    iteration = sluice.IterationPlanner(profile_64, CANDIDATES_64, options).plan(np.array(lengths, dtype=np.int32),
                                                                                 ids=ids)
    document = json_of(iteration)
    assert (document["plan"], document["chosen"]) == (traced["plan"], traced["chosen"])
    assert document["schedule"]["makespan"] == traced["makespan"]
    assert document["makespans"] == [c["makespan"] for c in traced["candidates"]]


def test_validators_catch_tampered_documents(run_pp4, batch_7b, setup_pp4):
    document = json_of(run_pp4.partition)
    document["micro_batches"][0]["seconds"] *= 1.5
    with pytest.raises(sluice.InvalidPlan, match="cost model gives"):
        sluice.MicroBatchPartition.from_json(json.dumps(document)).validate(
            batch_7b.lengths, setup_pp4.model, ids=batch_7b.ids, stages=4, replicas=2,
            memory_limit=setup_pp4.memory_limit)
    document = json_of(run_pp4.assignment)
    document["loads"][0] += 1
    with pytest.raises(sluice.InvalidPlan, match="load"):
        sluice.ReplicaAssignment.from_json(json.dumps(document)).validate(run_pp4.partition.times, 2)
    replica = run_pp4.replicas[0]
    document = json_of(replica.schedule.plan)
    del document["ranks"][1][-1]
    with pytest.raises(sluice.InvalidPlan):
        sluice.ExecutionPlan.from_json(json.dumps(document)).validate(replica.problem)


def test_last_stage_work_comes_from_inner_seconds_and_lightens_the_other_stages(batch_7b, profile_7b):
    # A <1, 4> stage whose last stage adds a head of 2e-5 s per token and 1 ms: fitted from the inner seconds.
    tokens = np.array([256, 512, 1024, 2048, 4096, 8192])
    inner = 1e-9 * tokens ** 2 + 6e-5 * tokens + 4e-3
    seconds = inner + 2e-5 * tokens + 1e-3
    fit = sluice.fit_profile(["tp1pp4"] * 6 + ["tp1pp1"] * 6, np.concatenate([tokens, tokens]),
                             np.concatenate([seconds, 4 * seconds]), base=profile_7b,
                             inner_seconds=np.concatenate([inner, np.full(6, np.nan)]))
    work = fit.profile.at(sluice.Scheme(1, 4)).last_stage
    assert (work.b, work.c) == (pytest.approx(2e-5, rel=1e-9), pytest.approx(1e-3, rel=1e-9))
    assert fit.schemes[-1].inner is not None and fit.schemes[0].inner is None
    assert fit.profile.at(sluice.Scheme(1, 1)).last_stage == sluice.LastStageWork()
    assert work.seconds(1000) == pytest.approx(2e-5 * 1000 + 1e-3)
    setup = sluice.stage_cost(fit.profile.at(sluice.Scheme(1, 4)))
    assert setup.last_stage == work
    options = dict(stages=4, replicas=2, micro_batch_memory=setup.memory_limit)
    lightened = sluice.plan_pipeline(batch_7b.lengths, setup.model, last_stage=setup.last_stage, **options)
    lightened.validate(batch_7b.lengths, setup.model, last_stage=setup.last_stage, **options)
    alike = sluice.plan_pipeline(batch_7b.lengths, setup.model, **options)
    assert lightened.makespan < alike.makespan
    with pytest.raises(sluice.InvalidPlan):
        lightened.validate(batch_7b.lengths, setup.model, **options)
    with pytest.raises(sluice.InvalidInput, match="finite and >= 0"):
        sluice.LastStageWork(-1.0, 0.0)


def test_deadlock_is_reported():
    def instruction(op, peer):
        return {"op": op, "micro_batch": 0, "stage": 0 if peer == 1 else 1, "peer": peer, "buffer": 0, "output": -1,
                "shape": [8, 4]}

    # Both ranks receive before they send: the heads of their queues are two receives.
    ranks = [[instruction(op, 1) for op in ("recv_grad_start", "recv_grad_wait", "send_act_start", "send_act_wait")],
             [instruction(op, 0) for op in ("recv_act_start", "recv_act_wait", "send_grad_start", "send_grad_wait")]]
    plan = sluice.ExecutionPlan.from_json(json.dumps({"format": "sluice.execution_plan", "version": 1, "stages": 2,
                                                      "micro_batches": 1, "buffer_slots": 1, "ranks": ranks}))
    report = sluice.check_deadlock(plan)
    assert not report.ok and report.outcome in ("deadlock", "mismatch") and report.message


def test_bad_inputs(setup_pp4):
    model = setup_pp4.model
    for lengths in ([100, -3], [], np.array([100.0, 200.0]), np.arange(10)[::2], np.array([[1, 2]])):
        with pytest.raises(sluice.InvalidInput):
            sluice.partition_micro_batches(lengths, model)
    with pytest.raises(sluice.InvalidInput, match="ordering"):
        sluice.partition_micro_batches([100], model, ordering="random")
    with pytest.raises(sluice.InvalidInput, match="targets"):
        sluice.partition_micro_batches([100, 200], model, targets=[1])
    with pytest.raises(sluice.Infeasible):
        sluice.partition_micro_batches([100, 200], model, memory_limit=1.0)
    with pytest.raises(sluice.InvalidInput, match="kind"):
        sluice.plan_pipeline([100, 200], model, schedule=sluice.ScheduleOptions(kind="gpipe"))
    one = np.ones((2, 3))
    with pytest.raises(sluice.InvalidInput, match="forward"):
        sluice.SchedulingProblem(one * np.nan, one, one, [8, 8], [1e9] * 3)
    with pytest.raises(sluice.InvalidInput, match="contiguous"):
        sluice.SchedulingProblem(np.ones((3, 2)).T, one, one, [8, 8], [1e9] * 3)
    with pytest.raises(sluice.InvalidInput, match="micro-batches × stages"):
        sluice.SchedulingProblem(one, np.ones((2, 2)), one, [8, 8], [1e9] * 3)
    with pytest.raises(sluice.InvalidInput, match="bandwidth"):
        sluice.Link(bandwidth=1.0)
    for times in ([1.0, float("nan")], [], np.ones((2, 2)), ["a", "b"]):
        with pytest.raises(sluice.InvalidInput):
            sluice.balance_kk(times, 2)
    with pytest.raises(sluice.InvalidPlan):
        sluice.ScheduleOrder([[(0, "backward"), (0, "forward")]]).validate(1, 1)


def test_deterministic_and_thread_safe(run_pp4, batch_7b, setup_pp4, profile_7b, profile_64, batch_64):
    options = options_pp4(setup_pp4, profile_7b)
    assert sluice.plan_pipeline(batch_7b.lengths, setup_pp4.model, ids=batch_7b.ids, **options) == run_pp4
    eight_trials = sluice.PlanOptions(dispatch=sluice.DispatchOptions(trials=8))
    planner = sluice.IterationPlanner(profile_64, CANDIDATES_64[:2], eight_trials)
    simulated = planner.plan(batch_64.lengths, ids=batch_64.ids)
    results = {}

    def run(key):
        if key == "pipeline":
            results[key] = sluice.plan_pipeline(batch_7b.lengths, setup_pp4.model, ids=batch_7b.ids, **options)
        else:
            results[key] = planner.plan(batch_64.lengths, ids=batch_64.ids)

    threads = [threading.Thread(target=run, args=(key,)) for key in ("pipeline", "simulated")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {"pipeline": run_pp4, "simulated": simulated}
