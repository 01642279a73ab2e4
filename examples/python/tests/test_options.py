"""The option classes (DispatchOptions, ScheduleOptions, ProblemOptions, PlanOptions, ProposeOptions,
SampledOptions, PlacementOptions, SpaceOptions, SearchOptions): the C++ defaults, checked fields, value semantics,
and the functions that take them giving what their defaults give."""
import math
import pickle

import numpy as np
import pytest

import sluice
from conftest import CANDIDATES_64, assert_close_json, json_of

INF = float("inf")


def fields(options, names):
    return tuple(getattr(options, name) for name in names)


DISPATCH = ("trials", "threads", "seed", "local_search", "longest_first", "v_step")
SCHEDULE = ("kind", "seed", "clusters")
PROBLEM = ("hidden", "element_bytes", "latency", "bandwidth", "backward_ratio")
PROPOSE = ("gpus", "max_len", "length_step", "gpu_step", "relaxed", "replica_step", "tokens_per_iteration",
           "sequence_constant", "fill_term", "tp_within_node", "max_candidates")
SAMPLED = ("choosing_batches", "held_out_batches", "seed", "dispatch", "max_pool")
PLACEMENT = ("gpus_per_node", "tp_within_node", "order", "stage_layers")
SPACE = ("dp", "sdp", "tp", "ckpt", "tp_outer", "pp_degrees", "max_tp", "zero2", "max_pp", "ulysses")
SEARCH = ("memory_bytes", "granularity_bytes", "global_batch", "batch_step", "max_batch", "schedule", "space",
          "threads")


def test_defaults_are_the_old_keywords_defaults():
    assert fields(sluice.DispatchOptions(), DISPATCH) == (100, 1, 0, True, True, True)
    assert fields(sluice.ScheduleOptions(), SCHEDULE) == ("cyclic", 1, 0)
    assert fields(sluice.ProblemOptions(), PROBLEM) == (1, 2, 0.0, INF, 2.0)
    plan = sluice.PlanOptions()
    assert (plan.dispatch, plan.schedule, plan.problem) == (
        sluice.DispatchOptions(), sluice.ScheduleOptions(), sluice.ProblemOptions())
    assert (plan.layout_moves, plan.v_step) == ("exposed", "best")
    assert fields(sluice.ProposeOptions(), PROPOSE) == (None, None, 128, 10, False, 1, 100000.0, True, True, True, 8)
    # propose_sampled's dispatch tries 4 orders, as it always did.
    assert fields(sluice.SampledOptions(), SAMPLED) == (48, 32, 0, sluice.DispatchOptions(trials=4), 256)
    assert fields(sluice.PlacementOptions(), PLACEMENT) == (8, True, "tp_descending", {})
    assert fields(sluice.SpaceOptions(), SPACE) == (True, True, True, True, True, [], 0, False, 0, False)
    assert fields(sluice.SearchOptions(), SEARCH) == (0, 16 << 20, 0, 8, 1024, "1f1b", sluice.SpaceOptions(), 1)


@pytest.mark.parametrize("function, default", [
    (sluice.plan_iteration, "dispatch: sluice._sluice.DispatchOptions = " + repr(sluice.DispatchOptions())),
    (sluice.propose, "options: sluice._sluice.ProposeOptions = " + repr(sluice.ProposeOptions())),
    (sluice.propose_sampled, "options: sluice._sluice.ProposeOptions = " + repr(sluice.ProposeOptions())),
    (sluice.propose_sampled, "sampled: sluice._sluice.SampledOptions = " + repr(sluice.SampledOptions())),
    (sluice.default_max_len, "options: sluice._sluice.ProposeOptions = " + repr(sluice.ProposeOptions())),
    (sluice.place, "options: sluice._sluice.PlacementOptions = " + repr(sluice.PlacementOptions())),
    (sluice.iteration_cost, "options: sluice._sluice.PlacementOptions = " + repr(sluice.PlacementOptions())),
    (sluice.iteration_costs, "options: sluice._sluice.PlacementOptions = " + repr(sluice.PlacementOptions())),
    (sluice.switching_cost, "options: sluice._sluice.PlacementOptions = " + repr(sluice.PlacementOptions())),
    (sluice.schedule_pipeline, "schedule: sluice._sluice.ScheduleOptions = " + repr(sluice.ScheduleOptions())),
    (sluice.plan_pipeline, "schedule: sluice._sluice.ScheduleOptions = " + repr(sluice.ScheduleOptions())),
    (sluice.plan_pipeline, "problem: sluice._sluice.ProblemOptions = " + repr(sluice.ProblemOptions())),
    (sluice.schedule_iteration, "problem: sluice._sluice.ProblemOptions = " + repr(sluice.ProblemOptions())),
    (sluice.compare_systems, "problem: sluice._sluice.ProblemOptions = " + repr(sluice.ProblemOptions())),
    (sluice.compare_systems, "dispatch: Optional[sluice._sluice.DispatchOptions] = None"),
    (sluice.stage_strategies, "space: sluice._sluice.SpaceOptions = " + repr(sluice.SpaceOptions())),
    (sluice.search, "options: sluice._sluice.SearchOptions = " + repr(sluice.SearchOptions())),
    (sluice.search_base, "options: sluice._sluice.SearchOptions = " + repr(sluice.SearchOptions())),
    (sluice.balance_trace, "options: sluice._sluice.SearchOptions = " + repr(sluice.SearchOptions())),
    (sluice.SearchPlan.validate, "options: sluice._sluice.SearchOptions = " + repr(sluice.SearchOptions())),
    (sluice.SearchReport.validate, "options: sluice._sluice.SearchOptions = " + repr(sluice.SearchOptions())),
])
def test_functions_default_to_the_default_options(function, default):
    assert default in function.__doc__.splitlines()[0]


@pytest.mark.parametrize("cls, bad, message", [
    (sluice.DispatchOptions, dict(trials=0), "trials must be >= 1, got 0"),
    (sluice.DispatchOptions, dict(threads=0), "threads must be >= 1, got 0"),
    (sluice.DispatchOptions, dict(seed=-1), r"seed must be an integer in \[0, 2\*\*64\), got -1"),
    (sluice.DispatchOptions, dict(seed=2**64), "seed must be an integer"),
    (sluice.ScheduleOptions, dict(kind="gpipe"), "kind: expected cyclic or 1f1b, got 'gpipe'"),
    (sluice.ScheduleOptions, dict(seed=-3), "seed must be an integer"),
    (sluice.ScheduleOptions, dict(clusters=7), r"clusters must be in \[0, 6\], got 7"),
    (sluice.ScheduleOptions, dict(clusters=-1), r"clusters must be in \[0, 6\], got -1"),
    (sluice.ProblemOptions, dict(hidden=0), "hidden must be >= 1, got 0"),
    (sluice.ProblemOptions, dict(element_bytes=0), "element_bytes must be >= 1, got 0"),
    (sluice.ProblemOptions, dict(latency=-1.0), "latency must be in"),
    (sluice.ProblemOptions, dict(latency=math.nan), "latency must be in"),
    (sluice.ProblemOptions, dict(bandwidth=1.0), "bandwidth must be in"),
    (sluice.ProblemOptions, dict(backward_ratio=0.0), "backward_ratio must be finite and > 0, got 0"),
    (sluice.PlanOptions, dict(layout_moves="some"), "layout_moves: expected none, exposed or all, got 'some'"),
    (sluice.PlanOptions, dict(v_step="maybe"), "v_step: expected best, on or off, got 'maybe'"),
    (sluice.PlanOptions, dict(dispatch=sluice.DispatchOptions(v_step=False)), "dispatch.v_step is chosen by v_step"),
    (sluice.ProposeOptions, dict(gpus=0), "gpus must be >= 1, got 0"),
    (sluice.ProposeOptions, dict(max_len=64), "max_len must be >= length_step = 128, got 64"),
    (sluice.ProposeOptions, dict(length_step=0), "length_step must be >= 1, got 0"),
    (sluice.ProposeOptions, dict(gpu_step=0), "gpu_step must be >= 1"),
    (sluice.ProposeOptions, dict(gpu_step=5), "gpu_step must be whole GPUs .* got 5"),  # tenths only when relaxed
    (sluice.ProposeOptions, dict(gpu_step=3, relaxed=True), "gpu_step must be whole GPUs .* got 3"),
    (sluice.ProposeOptions, dict(replica_step=3), "replica_step must be 1, 2, 5 or 10 .* got 3"),
    (sluice.ProposeOptions, dict(tokens_per_iteration=0.0), "tokens_per_iteration must be finite and > 0, got 0"),
    (sluice.ProposeOptions, dict(tokens_per_iteration=math.nan), "tokens_per_iteration must be finite and > 0"),
    (sluice.ProposeOptions, dict(tokens_per_iteration=INF), "tokens_per_iteration must be finite and > 0"),
    (sluice.ProposeOptions, dict(max_candidates=0), "max_candidates must be >= 1, got 0"),
    (sluice.SampledOptions, dict(choosing_batches=0), r"choosing_batches must be in \[1, "),
    (sluice.SampledOptions, dict(held_out_batches=0), r"held_out_batches must be in \[1, "),
    (sluice.SampledOptions, dict(max_pool=0), r"max_pool must be in \[1, "),
    (sluice.SampledOptions, dict(seed=-1), r"seed must be an integer in \[0, 2\*\*64\), got -1"),
    (sluice.PlacementOptions, dict(gpus_per_node=0), "gpus_per_node must be >= 1, got 0"),
    (sluice.PlacementOptions, dict(order="sideways"), "order: expected tp_descending or tp_ascending, got 'sideways'"),
    (sluice.PlacementOptions, dict(stage_layers={2: [10]}), "stage_layers for pp 2 has 1 entries"),
    (sluice.PlacementOptions, dict(stage_layers={2: [0, 10]}), "stage_layers for pp 2 has a stage of 0 layers"),
    (sluice.SpaceOptions, dict(max_tp=-1), "space.max_tp must be >= 0, got -1"),
    (sluice.SpaceOptions, dict(max_pp=-2), "space.max_pp must be >= 0, got -2"),
    (sluice.SearchOptions, dict(memory_bytes=-1), "memory_bytes must be >= 0, got -1"),
    (sluice.SearchOptions, dict(granularity_bytes=0), "granularity_bytes must be >= 1, got 0"),
    (sluice.SearchOptions, dict(global_batch=-1), "global_batch must be >= 0, got -1"),
    (sluice.SearchOptions, dict(threads=0), r"threads must be in \[1, 256\], got 0"),
    (sluice.SearchOptions, dict(batch_step=0), "batch_step must be >= 1, got 0"),
    (sluice.SearchOptions, dict(max_batch=4), r"max_batch must be in \[batch_step, 2\^24\], got 4"),
    (sluice.SearchOptions, dict(max_batch=2**24 + 1), r"max_batch must be in \[batch_step, 2\^24\], got 16777217"),
    (sluice.SearchOptions, dict(schedule="zigzag"), "schedule: expected 1f1b or gpipe, got 'zigzag'"),
])
def test_a_bad_field_is_invalid_input_naming_it(cls, bad, message):
    with pytest.raises(sluice.InvalidInput, match=message):
        cls(**bad)


def test_arguments_are_keywords_only_and_typed():
    with pytest.raises(TypeError):
        sluice.DispatchOptions(8)
    with pytest.raises(TypeError):
        sluice.PlanOptions(dispatch=sluice.ScheduleOptions())


EXAMPLES = [
    sluice.DispatchOptions(trials=7, threads=3, seed=2**64 - 1, local_search=False, longest_first=False, v_step=False),
    sluice.ScheduleOptions(kind="1f1b", seed=5, clusters=6),
    sluice.ProblemOptions(hidden=4096, element_bytes=4, latency=1e-5, bandwidth=100e9, backward_ratio=3.0),
    sluice.ProblemOptions(hidden=2),  # bandwidth inf through pickle and repr
    sluice.PlanOptions(dispatch=sluice.DispatchOptions(trials=7, seed=3), schedule=sluice.ScheduleOptions(seed=3),
                       problem=sluice.ProblemOptions(hidden=8), layout_moves="all", v_step="off"),
    sluice.ProposeOptions(gpus=32, max_len=16384, length_step=256, gpu_step=5, relaxed=True, replica_step=2,
                          tokens_per_iteration=2.5e5, sequence_constant=False, fill_term=False, tp_within_node=False,
                          max_candidates=3),
    sluice.ProposeOptions(max_candidates=4),  # gpus and max_len None through pickle and repr
    sluice.SampledOptions(choosing_batches=6, held_out_batches=3, seed=2**64 - 1,
                          dispatch=sluice.DispatchOptions(trials=2, seed=3), max_pool=40),
    sluice.PlacementOptions(gpus_per_node=4, tp_within_node=False, order="tp_ascending",
                            stage_layers={2: [10, 22], 4: [8, 8, 8, 8]}),
    sluice.SpaceOptions(dp=False, sdp=True, tp=False, ckpt=False, tp_outer=False, pp_degrees=[1, 2], max_tp=2,
                        zero2=True, max_pp=2, ulysses=True),
    sluice.SearchOptions(memory_bytes=4 << 30, granularity_bytes=64 << 20, global_batch=32, batch_step=16,
                         max_batch=64, schedule="gpipe", space=sluice.SpaceOptions(ckpt=False, pp_degrees=[2]),
                         threads=3),
]


@pytest.mark.parametrize("options", EXAMPLES, ids=lambda options: type(options).__name__)
def test_value_semantics(options):
    cls = type(options)
    assert options == pickle.loads(pickle.dumps(options))
    assert eval(repr(options), {**vars(sluice), "inf": INF}) == options  # the repr is the constructor call
    assert options != cls()
    first = next(name for name in dir(options) if not name.startswith("_"))
    with pytest.raises(AttributeError):
        setattr(options, first, getattr(options, first))


def test_reprs():
    assert repr(sluice.DispatchOptions()) == (
        "DispatchOptions(trials=100, threads=1, seed=0, local_search=True, longest_first=True, v_step=True)")
    assert repr(sluice.ScheduleOptions(kind="1f1b")) == "ScheduleOptions(kind='1f1b', seed=1, clusters=0)"
    assert repr(sluice.ProblemOptions(bandwidth=100e9)) == (
        "ProblemOptions(hidden=1, element_bytes=2, latency=0.0, bandwidth=100000000000.0, backward_ratio=2.0)")
    assert repr(sluice.PlanOptions()).startswith("PlanOptions(dispatch=DispatchOptions(trials=100, ")
    assert repr(sluice.PlanOptions()).endswith(", layout_moves='exposed', v_step='best')")


def test_default_options_give_what_no_options_give(profile_64, batch_64):
    lengths, ids = batch_64.lengths, batch_64.ids
    plan = sluice.plan_iteration(lengths, CANDIDATES_64, profile_64, ids=ids)
    assert sluice.plan_iteration(lengths, CANDIDATES_64, profile_64, ids=ids, dispatch=sluice.DispatchOptions()) == plan
    schedule = sluice.schedule_iteration(plan, profile_64)
    assert sluice.schedule_iteration(plan, profile_64, schedule=sluice.ScheduleOptions(),
                                     problem=sluice.ProblemOptions()) == schedule
    schedule.validate(plan, profile_64, problem=sluice.ProblemOptions())


def test_each_option_reaches_the_planner():
    """A field changed changes the result: the options are not dropped on the way (pipelines of four stages, so
    that the links matter)."""
    profile = sluice.Profile.bundled("llama2-7b", gpus=8)
    batch = sluice.BatchSampler(sluice.LengthDataset.bundled("man-pages").truncated(8192), tokens_per_batch=40_000,
                                seed=3).next()
    candidates = ["2*tp1pp4"]

    def plan(seed):
        dispatch = sluice.DispatchOptions(trials=1, seed=seed, longest_first=False, local_search=False)
        return sluice.plan_iteration(batch.lengths, candidates, profile, ids=batch.ids, dispatch=dispatch)

    assert plan(0) == plan(0) and plan(0) != plan(1)  # seeded random orders
    free = sluice.schedule_iteration(plan(0), profile)
    slow = sluice.schedule_iteration(plan(0), profile, problem=sluice.ProblemOptions(hidden=8192, latency=1e-3,
                                                                                     bandwidth=1e9))
    assert slow.makespan > free.makespan
    one_f_one_b = sluice.schedule_iteration(plan(0), profile, schedule=sluice.ScheduleOptions(kind="1f1b"))
    assert {p.schedule.kind for p in one_f_one_b.pipelines if p is not None} == {"1f1b"}


def test_plan_options_compose_the_parts(profile_64, batch_64):
    """IterationPlanner with PlanOptions(dispatch, schedule, problem) schedules its plan as schedule_iteration does
    with the same schedule and problem options."""
    options = sluice.PlanOptions(dispatch=sluice.DispatchOptions(trials=8, seed=5),
                                 schedule=sluice.ScheduleOptions(seed=5, clusters=3),
                                 problem=sluice.ProblemOptions(hidden=profile_64.hidden, latency=1e-5,
                                                               bandwidth=100e9), layout_moves="none")
    planner = sluice.IterationPlanner(profile_64, CANDIDATES_64, options)
    assert planner.options == options
    iteration = planner.plan(batch_64.lengths, ids=batch_64.ids)
    assert sluice.schedule_iteration(iteration.plan, profile_64, schedule=options.schedule,
                                     problem=options.problem) == iteration.schedule
    iteration.validate(batch_64.lengths, CANDIDATES_64, profile_64, ids=batch_64.ids, problem=options.problem)
    assert sluice.IterationPlanner(profile_64, CANDIDATES_64, pickle.loads(pickle.dumps(options))).plan(
        batch_64.lengths, ids=batch_64.ids) == iteration


def test_compare_seeds_its_default_dispatch_with_seed():
    profile = sluice.Profile.bundled("llama2-7b", gpus=8)
    dataset = sluice.LengthDataset.bundled("man-pages").truncated(4096)
    batches = [np.array([4000, 3000, 1200, 800, 500, 300, 120])]
    settings = dict(tokens=20_000, batches=batches, context=4096, seed=4)
    seeded = sluice.compare_systems(profile, dataset, **settings)
    given = sluice.compare_systems(profile, dataset, dispatch=sluice.DispatchOptions(seed=4), **settings)
    assert seeded["sluice"].plans == given["sluice"].plans
    with pytest.raises(sluice.InvalidInput, match="dispatch.v_step"):
        sluice.compare_systems(profile, dataset, dispatch=sluice.DispatchOptions(v_step=False), **settings)


def test_reprs_of_the_proposal_options():
    assert repr(sluice.ProposeOptions()) == (
        "ProposeOptions(gpus=None, max_len=None, length_step=128, gpu_step=10, relaxed=False, replica_step=1, "
        "tokens_per_iteration=100000.0, sequence_constant=True, fill_term=True, tp_within_node=True, "
        "max_candidates=8)")
    assert repr(sluice.SampledOptions()) == (
        "SampledOptions(choosing_batches=48, held_out_batches=32, seed=0, dispatch=DispatchOptions(trials=4, "
        "threads=1, seed=0, local_search=True, longest_first=True, v_step=True), max_pool=256)")
    assert sluice.SampledOptions() != sluice.ProposeOptions()


def test_proposal_options_give_what_the_defaults_give():
    """propose and default_max_len given the default ProposeOptions return what they return without; the
    proposal's own options are the given ones with gpus and max_len resolved; a field reaches the DP."""
    profile = sluice.Profile.bundled("llama2-7b")
    loaded = sluice.LengthDataset.bundled("man-pages")
    assert sluice.default_max_len(loaded, profile, options=sluice.ProposeOptions()) == sluice.default_max_len(
        loaded, profile)
    dataset = loaded.truncated(sluice.default_max_len(loaded, profile))
    proposal = sluice.propose(dataset, profile)
    assert sluice.propose(dataset, profile, options=sluice.ProposeOptions()) == proposal
    assert proposal.options == sluice.ProposeOptions(gpus=profile.gpus, max_len=dataset.stats().max)
    options = sluice.ProposeOptions(max_candidates=2, relaxed=True, gpu_step=5)
    small = sluice.propose(dataset, profile, options=options)
    assert len(small.candidates) <= 2 and small.relaxed_optimum is not None
    assert small.options == sluice.ProposeOptions(gpus=profile.gpus, max_len=dataset.stats().max, max_candidates=2,
                                                  relaxed=True, gpu_step=5)
    assert pickle.loads(pickle.dumps(small.options)) == small.options


def test_sampled_options_reach_the_sampled_proposal():
    profile = sluice.Profile.bundled("llama2-7b")
    loaded = sluice.LengthDataset.bundled("man-pages")
    dataset = loaded.truncated(sluice.default_max_len(loaded, profile))
    paper = sluice.ProposeOptions(tokens_per_iteration=50_000, max_candidates=3)
    sampling = sluice.SampledOptions(choosing_batches=4, held_out_batches=2, seed=7,
                                     dispatch=sluice.DispatchOptions(trials=2, seed=7), max_pool=20)
    result = sluice.propose_sampled(dataset, profile, options=paper, sampled=sampling)
    result.validate(profile)
    assert (result.choosing_batches, result.held_out_batches, result.seed, result.trials) == (4, 2, 7, 2)
    assert result.pool_size <= 20 and len(result.candidates) <= 3
    assert result.paper.options.tokens_per_iteration == 50_000
    assert sluice.propose_sampled(dataset, profile, options=paper, sampled=pickle.loads(pickle.dumps(sampling))) == (
        result)
    # Checks that need both objects stay in propose_sampled, with the library's message.
    with pytest.raises(sluice.InvalidInput, match="max_pool must be >= max_candidates = 3, got 2"):
        sluice.propose_sampled(dataset, profile, options=paper, sampled=sluice.SampledOptions(max_pool=2))


def test_placement_options_give_what_the_defaults_give():
    model = sluice.ShardModel.llama_like(sluice.Profile.bundled("llama2-7b"))
    default = sluice.PlacementOptions()
    placement = sluice.place("2*tp4pp1", 8, model.layers)
    assert sluice.place("2*tp4pp1", 8, model.layers, options=default) == placement
    layout = sluice.sharded_layout(8, model.layers)
    cost = sluice.iteration_cost(layout, "2*tp4pp1", model)
    assert sluice.iteration_cost(layout, "2*tp4pp1", model, options=default) == cost
    assert np.array_equal(sluice.iteration_costs(layout, ["2*tp4pp1"], model, options=default), [cost.seconds])
    assert sluice.switching_cost("1*tp8pp1", "2*tp4pp1", 8, model, options=default) == sluice.switching_cost(
        "1*tp8pp1", "2*tp4pp1", 8, model)
    # A field reaches the placement.
    split = sluice.place("1*tp4pp2", 8, model.layers, options=sluice.PlacementOptions(stage_layers={2: [10, 22]}))
    assert [stage.layer_end for stage in split.pipelines[0].stages] == [10, 32]


def test_reprs_of_the_search_options():
    assert repr(sluice.SpaceOptions(pp_degrees=[1, 2])) == (
        "SpaceOptions(dp=True, sdp=True, tp=True, ckpt=True, tp_outer=True, pp_degrees=[1, 2], max_tp=0, zero2=False, "
        "max_pp=0, ulysses=False)")
    assert repr(sluice.SearchOptions(schedule="gpipe")) == (
        "SearchOptions(memory_bytes=0, granularity_bytes=16777216, global_batch=0, batch_step=8, max_batch=1024, "
        "schedule='gpipe', space=SpaceOptions(dp=True, sdp=True, tp=True, ckpt=True, tp_outer=True, pp_degrees=[], "
        "max_tp=0, zero2=False, max_pp=0, ulysses=False), threads=1)")
    assert sluice.SearchOptions(space=sluice.SpaceOptions(max_tp=2)) != sluice.SearchOptions()


def search_model():
    layer = sluice.LayerSpec(type="gpt", hidden=1024, heads=16, ffn=4096, sequence=1024)
    return sluice.ModelSpec("gpt-small", [layer] * 8, embedding_params=50_000_000, head_params=50_000_000)


def test_search_options_give_what_the_defaults_give(cli, tmp_path):
    """The default SearchOptions give what no options give, and what the tool gives without options."""
    model, cluster = search_model(), sluice.ClusterSpec.bundled("titan-8")
    report = sluice.search(model, cluster)
    assert sluice.search(model, cluster, options=sluice.SearchOptions()).to_json() == report.to_json()
    model.save(tmp_path / "model.json")
    document = cli("search", "--model", tmp_path / "model.json", "--cluster", "titan-8")
    tool_only = ("model", "cluster", "memory_bytes", "at_sweep_limit")
    assert_close_json(json_of(report), {key: value for key, value in document.items() if key not in tool_only})
    report.validate(model, cluster, options=sluice.SearchOptions())
    report.best.validate(model, cluster, options=sluice.SearchOptions())
    assert sluice.search_base(model, cluster, options=sluice.SearchOptions()) == sluice.search_base(model, cluster)
    trace = sluice.balance_trace(model, cluster, 2, 32, 4)
    same = sluice.balance_trace(model, cluster, 2, 32, 4, options=sluice.SearchOptions())
    assert (list(same.memory_balanced), list(same.time_balanced), same.best, same.best_iteration) == (
        list(trace.memory_balanced), list(trace.time_balanced), trace.best, trace.best_iteration)


def test_each_search_option_reaches_the_search():
    model, cluster = search_model(), sluice.ClusterSpec.bundled("titan-8")
    fixed = sluice.SearchOptions(global_batch=32)
    assert sluice.search(model, cluster, options=fixed).best.global_batch == 32
    swept = sluice.search(model, cluster, options=sluice.SearchOptions(batch_step=16, max_batch=48)).best
    assert swept.global_batch in (16, 32, 48)
    budget = 4 << 30
    small = sluice.search(model, cluster, options=sluice.SearchOptions(global_batch=32, memory_bytes=budget)).best
    assert max(stage.memory_bytes for stage in small.stages) <= budget
    space = sluice.SpaceOptions(pp_degrees=[2], ckpt=False, max_tp=1)
    narrow = sluice.search(model, cluster, options=sluice.SearchOptions(global_batch=32, space=space)).best
    assert narrow.pp == 2 and all(s.tp == 1 and not s.ckpt for stage in narrow.stages for s in stage.strategies)
    # GPipe keeps every micro-batch's activations in flight, 1F1B at most pp of them.
    piped = {schedule: sluice.SearchOptions(global_batch=64, memory_bytes=budget, schedule=schedule,
                                            space=sluice.SpaceOptions(pp_degrees=[2]))
             for schedule in ("1f1b", "gpipe")}
    one_f_one_b = sluice.search(model, cluster, options=piped["1f1b"]).best
    gpipe = sluice.search(model, cluster, options=piped["gpipe"]).best
    assert one_f_one_b.micro_batches > 2 and gpipe.stages[0].memory_bytes > one_f_one_b.stages[0].memory_bytes
    with pytest.raises(sluice.InvalidPlan, match="memory"):
        one_f_one_b.validate(model, cluster, options=piped["gpipe"])
    # Checks that need the cluster stay in the search, with the library's messages.
    with pytest.raises(sluice.InvalidInput, match="memory / granularity_bytes must be <= "):
        sluice.search(model, cluster, options=sluice.SearchOptions(global_batch=32, granularity_bytes=1))
    with pytest.raises(sluice.InvalidInput, match="exceeds the device memory of cluster titan-8"):
        sluice.search(model, cluster, options=sluice.SearchOptions(memory_bytes=cluster.memory_bytes + 1))
    with pytest.raises(sluice.InvalidInput, match=r"pp degree must be a power of 2 in \[1, 8\], got 16"):
        sluice.search(model, cluster, options=sluice.SearchOptions(space=sluice.SpaceOptions(pp_degrees=[16])))
