"""search: Galvatron-BMW's hybrid-parallel search against `sluice search --json`, the space and partition helpers,
the analytic profile, validators, documents, errors and threads. A small 8-layer model keeps every search short."""
import json
import pathlib
import pickle
import threading

import numpy as np
import pytest

import sluice
from conftest import assert_close_json, json_of

TOOL_ONLY = ("model", "cluster", "memory_bytes", "at_sweep_limit")
BATCH_32 = sluice.SearchOptions(global_batch=32)


def small_model():
    """DP-friendly: every baseline finds a plan."""
    layer = sluice.LayerSpec(type="gpt", hidden=1024, heads=16, ffn=4096, sequence=1024)
    return sluice.ModelSpec("gpt-small", [layer] * 8, embedding_params=50_000_000, head_params=50_000_000)


def mid_model():
    """Under 4 GiB per device only hybrid plans fit (pipelines with sharded, checkpointed stages)."""
    layer = sluice.LayerSpec(type="gpt", hidden=2048, heads=16, ffn=8192, sequence=2048)
    return sluice.ModelSpec("gpt-mid", [layer] * 16, embedding_params=100_000_000, head_params=100_000_000)


@pytest.fixture(scope="module")
def model():
    return small_model()


@pytest.fixture(scope="module")
def cluster():
    return sluice.ClusterSpec.bundled("titan-8")


SETTINGS = [
    (small_model, BATCH_32, ["--batch", 32]),
    (small_model, sluice.SearchOptions(memory_bytes=4 << 30, granularity_bytes=64 << 20, batch_step=16, max_batch=64,
                                       schedule="gpipe"),
     ["--memory", "4GiB", "--granularity", "64MiB", "--batch-step", 16, "--max-batch", 64, "--schedule", "gpipe"]),
    (mid_model, sluice.SearchOptions(memory_bytes=4 << 30, global_batch=32), ["--memory", "4GiB", "--batch", 32]),
    (mid_model, sluice.SearchOptions(memory_bytes=8 << 30, global_batch=32), ["--memory", "8GiB", "--batch", 32]),
]


@pytest.mark.parametrize("make_model, options, args", SETTINGS)
def test_search_matches_the_tool(cli, cluster, tmp_path, make_model, options, args):
    model = make_model()
    model.save(tmp_path / "model.json")
    document = cli("search", "--model", tmp_path / "model.json", "--cluster", "titan-8", *args)
    report = sluice.search(model, cluster, options=options)
    report.validate(model, cluster, options=options)
    assert_close_json(json_of(report), {k: v for k, v in document.items() if k not in TOOL_ONLY})
    assert (document["model"], document["cluster"]) == (model.name, cluster.name)
    best = report.best
    if best.method == "bmw" and best.pp > 1:
        trace = sluice.balance_trace(model, cluster, best.pp, best.global_batch, best.micro_batches, options=options)
        assert trace.best == best.partition


def test_report_structure(model, cluster):
    report = sluice.search(model, cluster, options=BATCH_32)
    best = report.best
    assert best.method in ("bmw", "base") or best.method in [name for name, _ in sluice.baseline_spaces(8)]
    assert sum(best.partition) == len(model.layers) and len(best.stages) == best.pp
    assert [stage.first_layer for stage in best.stages] == list(np.cumsum([0] + best.partition[:-1]))
    assert best.throughput == pytest.approx(best.global_batch / best.iteration_seconds)
    assert all(s.group == 8 // best.pp for stage in best.stages for s in stage.strategies)
    assert [b.name for b in report.baselines] == [name for name, _ in sluice.baseline_spaces(8)]
    assert report.base is not None and report.base.throughput <= best.throughput
    spaces = dict(sluice.baseline_spaces(8))
    for baseline in report.baselines:
        if baseline.plan is not None:
            in_space = sluice.SearchOptions(global_batch=32, space=spaces[baseline.name])
            baseline.plan.validate(model, cluster, options=in_space)
            assert baseline.plan.throughput <= report.base.throughput
    base_alone = sluice.search_base(model, cluster, options=BATCH_32)
    assert base_alone is not None and base_alone.method == "base"
    assert base_alone.throughput <= report.base.throughput
    base_alone.validate(model, cluster, options=BATCH_32)


def test_balance_trace(model, cluster):
    trace = sluice.balance_trace(model, cluster, 2, 32, 4)
    assert sum(trace.memory_balanced) == sum(trace.time_balanced) == len(model.layers)
    assert trace.best is not None and sum(trace.best) == len(model.layers)
    assert trace.best_iteration > 0
    for adjustment in trace.accepted:
        assert sum(adjustment.sizes) == len(model.layers) and 0 <= adjustment.alpha_time <= 0.5
    with pytest.raises(sluice.InvalidInput, match="pp"):
        sluice.balance_trace(model, cluster, 3, 32, 4)
    with pytest.raises(sluice.InvalidInput, match="batch"):
        sluice.balance_trace(model, cluster, 2, 30, 4)


def test_space_and_partition_helpers():
    assert sluice.count_strategies(8, False) == 68 and sluice.count_strategies(8, True) == 44
    strategies = sluice.stage_strategies(8)
    assert strategies and all(s.group == 8 for s in strategies)
    assert [s for s in strategies if s.ckpt] and strategies[-1].ckpt
    no_tp = sluice.stage_strategies(8, sluice.SpaceOptions(tp=False, ckpt=False))
    assert no_tp and all(s.tp == 1 and not s.ckpt for s in no_tp)
    assert all(s.tp <= 2 for s in sluice.stage_strategies(8, heads_gcd=2))
    named = sluice.LayerStrategy(tp=2, dp=4, sdp=True, tp_inner=False, ckpt=True)
    assert named.name == "tp2*sdp4+ckpt" and named in sluice.stage_strategies(8)
    assert named.same_layout(sluice.LayerStrategy(tp=2, dp=4, tp_inner=False))
    zero2 = sluice.LayerStrategy(dp=8, zero2=True)
    assert zero2.name == "z2dp8" and zero2.zero2 and zero2 not in strategies
    assert zero2 in sluice.stage_strategies(8, sluice.SpaceOptions(zero2=True))
    with pytest.raises(sluice.InvalidInput, match="exclusive"):
        sluice.LayerStrategy(dp=8, sdp=True, zero2=True)
    ulysses = sluice.LayerStrategy(dp=2, sp=4)
    assert ulysses.name == "dp2*sp4" and ulysses.sp == 4 and ulysses.group == 8 and ulysses not in strategies
    assert ulysses in sluice.stage_strategies(8, sluice.SpaceOptions(ulysses=True))
    assert not ulysses.same_layout(sluice.LayerStrategy(tp=4, dp=2))
    with pytest.raises(sluice.InvalidInput, match="exclusive"):
        sluice.LayerStrategy(tp=2, sp=2)
    with pytest.raises(sluice.InvalidInput, match=">= 1"):
        sluice.LayerStrategy(sp=0)
    assert sluice.even_partition(10, 4) == [2, 2, 3, 3]
    assert sluice.balance_degree(np.array([1.0, 1.0, 1.0, 1.0])) == pytest.approx(0.75)
    assert sluice.balance_degree([3, 1]) == pytest.approx(0.25)
    with pytest.raises(sluice.InvalidInput):
        sluice.even_partition(2, 3)
    with pytest.raises(sluice.InvalidInput):
        sluice.stage_strategies(6)
    with pytest.raises(sluice.InvalidInput):
        sluice.balance_degree(np.ones((2, 2)))
    with pytest.raises(sluice.InvalidInput, match="finite"):
        sluice.balance_degree([1.0, float("nan")])


def test_bundled_specs_and_documents(model, cluster, tmp_path):
    gpt = sluice.ModelSpec.bundled("gpt-48")
    assert len(gpt.layers) == 48 and gpt.layers[0].hidden == 4096 and gpt == sluice.ModelSpec.bundled("gpt-48")
    assert cluster.gpus == 8 and [level.size for level in cluster.levels] == [4, 8]
    assert cluster.bandwidth(4) == cluster.levels[0].bandwidth and cluster.bandwidth(8) == cluster.levels[1].bandwidth
    for value in (model, cluster, gpt):
        cls = type(value)
        assert cls.from_json(value.to_json()) == value
        assert pickle.loads(pickle.dumps(value)) == value
        value.save(tmp_path / "spec.json")
        assert cls.load(tmp_path / "spec.json") == value
    assert sluice.ModelSpec.bundled(str(tmp_path / "spec.json")) == gpt
    report = sluice.search(model, cluster, options=BATCH_32)
    text = report.to_json()
    assert sluice.SearchReport.from_json(text).to_json() == text
    assert pickle.loads(pickle.dumps(report)).to_json() == text
    report.save(tmp_path / "report.json")
    assert sluice.SearchReport.load(tmp_path / "report.json").to_json() == text
    assert sluice.SearchPlan.from_json(report.best.to_json()) == report.best
    assert pickle.loads(pickle.dumps(report.best)) == report.best


def test_validators_catch_broken_plans(model, cluster):
    report = sluice.search(model, cluster, options=BATCH_32)
    document = json.loads(report.best.to_json())
    document["throughput"] *= 1.5
    with pytest.raises(sluice.InvalidPlan, match="throughput"):
        sluice.SearchPlan.from_json(json.dumps(document)).validate(model, cluster, options=BATCH_32)
    document = json.loads(report.best.to_json())
    document["stages"][0]["memory_bytes"] += 1e6
    with pytest.raises(sluice.InvalidPlan, match="memory"):
        sluice.SearchPlan.from_json(json.dumps(document)).validate(model, cluster, options=BATCH_32)
    with pytest.raises(sluice.InvalidPlan):
        report.best.validate(model, cluster, options=sluice.SearchOptions(global_batch=32, memory_bytes=1 << 30))
    # A report whose BMW plan is a slower baseline's: Base beats it.
    slower = [b.plan for b in report.baselines if b.plan is not None and b.plan.throughput < report.base.throughput]
    assert slower
    document = json.loads(report.to_json())
    document["best"] = json.loads(slower[0].to_json())
    with pytest.raises(sluice.InvalidPlan, match="Base beats BMW"):
        sluice.SearchReport.from_json(json.dumps(document)).validate(model, cluster, options=BATCH_32)


def test_bad_inputs(model, cluster):
    with pytest.raises(sluice.InvalidInput, match="schedule"):
        sluice.SearchOptions(global_batch=32, schedule="zigzag")
    with pytest.raises(sluice.InvalidInput, match="memory_bytes"):
        sluice.search(model, cluster, options=sluice.SearchOptions(global_batch=32,
                                                                   memory_bytes=cluster.memory_bytes + 1))
    with pytest.raises(sluice.InvalidInput, match="granularity"):
        sluice.SearchOptions(global_batch=32, granularity_bytes=0)
    with pytest.raises(sluice.InvalidInput, match="pp degree"):
        sluice.search(model, cluster, options=sluice.SearchOptions(global_batch=32,
                                                                   space=sluice.SpaceOptions(pp_degrees=[3])))
    with pytest.raises(sluice.Infeasible, match="no strategy fits"):
        sluice.search(model, cluster, options=sluice.SearchOptions(global_batch=32,
                                                                   memory_bytes=(1 << 30) + (64 << 20)))
    with pytest.raises(sluice.InvalidInput, match="heads"):
        sluice.ModelSpec("bad", [sluice.LayerSpec(hidden=1000, heads=16, ffn=4000, sequence=128)])
    with pytest.raises(sluice.InvalidInput, match="no layers"):
        sluice.ModelSpec("empty", [])
    with pytest.raises(sluice.InvalidInput, match="power of 2"):
        sluice.ClusterSpec("six", 6, 1 << 34, 1e14, [sluice.LinkLevel(8, 1e10)])
    with pytest.raises(sluice.InvalidInput, match="efficiency"):
        sluice.ClusterSpec("c", 8, 1 << 34, 1e14, [sluice.LinkLevel(8, 1e10)], efficiency=float("nan"))
    broken = sluice.ModelSpec.from_json(model.to_json())
    broken.dtype_bytes = 0
    with pytest.raises(sluice.InvalidInput, match="dtype_bytes"):
        sluice.search(broken, cluster, options=BATCH_32)


def test_analytic_profile(model, cluster):
    profile = sluice.analytic_profile(model, cluster, max_length=16384)
    assert profile.gpus == 8 and profile.model == model.name and profile.gpus_per_node == 4
    budget = cluster.memory_bytes
    for scheme_cost in profile.schemes:
        scheme = scheme_cost.scheme
        assert scheme.tp <= 8 and scheme.gpus <= 8
        for length in (512, 4096):
            assert scheme_cost.latency(length) == pytest.approx(
                sluice.analytic_stage_time(model, cluster, scheme, length), rel=1e-3)
        if scheme_cost.max_len > 0:
            assert sluice.analytic_stage_memory(model, cluster, scheme, scheme_cost.max_len) <= budget
        if scheme_cost.max_len + 128 <= 16384:
            assert sluice.analytic_stage_memory(model, cluster, scheme, scheme_cost.max_len + 128) > budget
    assert sluice.Profile.from_json(profile.to_json()).to_json() == profile.to_json()
    assert sluice.analytic_profile(model, cluster, max_length=16384).to_json() == profile.to_json()
    plan = sluice.plan_iteration([1000, 3000, 500, 2500], ["8*tp1pp1", "2*tp4pp1"], profile)
    plan.validate([1000, 3000, 500, 2500], profile)
    with pytest.raises(sluice.InvalidInput, match="max_length"):
        sluice.analytic_profile(model, cluster, min_length=256, max_length=512)
    with pytest.raises(sluice.InvalidInput):
        sluice.analytic_stage_time(model, cluster, sluice.Scheme(1, 16), 512)
    with pytest.raises(sluice.InvalidInput, match="sequence"):
        sluice.analytic_stage_memory(model, cluster, sluice.Scheme(1, 1), 0)


def test_deterministic_across_python_threads(model, cluster):
    options = sluice.SearchOptions(global_batch=32, schedule="gpipe")
    reference = sluice.search(model, cluster, options=options).to_json()
    assert sluice.search(model, cluster, options=options).to_json() == reference
    results = [None] * 3

    def run(slot):
        results[slot] = sluice.search(model, cluster, options=options).to_json()

    workers = [threading.Thread(target=run, args=(slot,)) for slot in range(len(results))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert results == [reference] * len(results)


def test_galvatron_profiles_and_profiled_terms(tmp_path):
    """Galvatron's own LLaMA2-7B profiles: the model carries the profiled terms, they travel through JSON and pickle,
    the search validates its plans on them, and bad input raises InvalidInput naming the file."""
    directory = "llama2-7b"  # the bundled set; a path to a directory reads the same
    model, cluster = sluice.galvatron_inputs(directory, sluice.ModelSpec.bundled("llama2-7b"), memory_bytes=36 << 30)
    layer = model.layers[0]
    assert layer.forward_seconds == pytest.approx(3.8590168994623464e-3, rel=1e-9)
    assert layer.micro_batch_seconds == pytest.approx(0.8329851396156087e-3, rel=1e-9)
    assert layer.activation_bytes[1] == 514.5634765625 * 2**20 and layer.checkpoint_bytes[8] == 4 * 2**20
    assert model.vocabulary_forward_seconds == pytest.approx(2.6803283231241726e-3, rel=1e-9)
    assert model.head_activation_bytes == 717.560302734375 * 2**20
    assert cluster.gpus == 8 and cluster.name == "galvatron-1x8" and cluster.memory_bytes == 36 << 30
    assert {entry.size for entry in cluster.all_to_all_times} == {2, 4, 8} and cluster.all_reduce_times
    assert [level.size for level in cluster.pipeline_levels] == [2, 4, 8]
    assert sluice.ClusterSpec.from_json(cluster.to_json()) == cluster
    edited = sluice.ClusterSpec.from_json(cluster.to_json())
    edited.all_to_all_times = [sluice.CollectiveTime(2, 1e6, 0)]
    with pytest.raises(sluice.InvalidInput, match="all_to_all_times 0"):
        edited.validate()
    assert sluice.ModelSpec.from_json(model.to_json()) == model
    assert pickle.loads(pickle.dumps(model)) == model
    options = sluice.SearchOptions(memory_bytes=36 << 30, granularity_bytes=64 << 20, global_batch=16)
    report = sluice.search(model, cluster, options=options)
    report.validate(model, cluster, options=options)
    again = sluice.evaluate_search_plan(report.best, model, cluster, options=options)
    assert again.throughput == pytest.approx(report.best.throughput, rel=1e-12)
    assert again.stages[0].memory_bytes == pytest.approx(report.best.stages[0].memory_bytes, rel=1e-12)
    # Galvatron's own plan file, read and costed.
    plan_file = (pathlib.Path(__file__).resolve().parents[3] / "data" / "galvatron" / "llama2-7b" /
                 "galvatron_config_llama2-7b_1nodes_8gpus_per_node_36GB_bf16.json")
    read = sluice.read_galvatron_plan(plan_file, 32, 8)
    assert read.schedule == "1f1b" and read.plan.vocabulary == sluice.LayerStrategy(dp=4, sdp=True, sp=2)
    assert report.best.vocabulary is not None and not report.best.vocabulary.ckpt
    assert read.plan.pp == 1 and read.plan.global_batch == 16
    assert sluice.evaluate_search_plan(read.plan, model, cluster, options=options).throughput == pytest.approx(
        13.660, rel=1e-3)
    with pytest.raises(sluice.InvalidInput, match="tp_sizes_enc: expected 48 entries"):
        sluice.read_galvatron_plan(plan_file, 48, 8)
    # A plan from elsewhere, as JSON: every layer on SDP 8, the first 20 checkpointed (Galvatron's own choice here).
    document = json.loads(report.best.to_json())
    for index, strategy in enumerate(document["stages"][0]["strategies"]):
        strategy.update(tp=1, dp=8, sdp=True, tp_inner=True, ckpt=index < 20)
    costed = sluice.evaluate_search_plan(sluice.SearchPlan.from_json(json.dumps(document)), model, cluster,
                                         options=options)
    # With the search's vocabulary strategy (SDP 4 x TP 2), 13.68 samples/s: above the 13.60 that 64 MiB memory steps
    # let the layer DP find, below its 13.82 at 16 MiB.
    assert costed.throughput == pytest.approx(13.683, rel=1e-3)
    document["stages"][0]["strategies"].pop()
    with pytest.raises(sluice.InvalidInput, match="the stages hold 31 of the model's 32 layers"):
        sluice.evaluate_search_plan(sluice.SearchPlan.from_json(json.dumps(document)), model, cluster)
    fixed, _ = sluice.galvatron_inputs(directory, sluice.ModelSpec.bundled("llama2-7b"), time_mode="fixed")
    assert fixed.layers[0].micro_batch_seconds == 0
    with pytest.raises(sluice.InvalidInput, match="time mode must be fixed, batch or sequence"):
        sluice.galvatron_inputs(directory, model, time_mode="hybrid")
    with pytest.raises(sluice.InvalidInput, match="not a directory of Galvatron profiles"):
        sluice.galvatron_inputs(tmp_path / "none", model)
    (tmp_path / "computation_profiling_bf16_x_all.json").write_text('{"layertype_0_bsz1_seq2048": -1}')
    wanted = "computation_profiling_bf16_x_all.json: key 'layertype_0_bsz1_seq2048'"
    with pytest.raises(sluice.InvalidInput, match=wanted):
        sluice.galvatron_inputs(tmp_path, model)
