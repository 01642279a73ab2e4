"""compare: the systems against `sluice simulate`, the result's arrays, options, determinism and the example script."""
import importlib.util
import json
import os
import pathlib
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest

import sluice
from conftest import assert_close_json, without_header

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "compare_systems.py"

# A small scenario: the tool's default data on 16 GPUs, three batches of 100K tokens (30 to 60 sequences each).
PROFILE, GPUS, LENGTHS, TOKENS, ITERATIONS, SEED, TRIALS = "llama2-7b", 16, "man-pages", 100_000, 3, 3, 20


@pytest.fixture(scope="module")
def profile():
    return sluice.Profile.bundled(PROFILE, gpus=GPUS)


@pytest.fixture(scope="module")
def dataset():
    return sluice.LengthDataset.bundled(LENGTHS)


def run(profile, dataset, trials=TRIALS, threads=1, bandwidth=100e9, **options):
    """The scenario with the links and boundary tensors `sluice simulate` assumes by default, its dispatch seeded
    with the seed as `sluice simulate --seed` seeds it."""
    problem = sluice.ProblemOptions(hidden=json.loads(profile.to_json())["model"]["hidden"], latency=1e-5,
                                    bandwidth=bandwidth)
    settings = dict(tokens=TOKENS, iterations=ITERATIONS, seed=SEED, problem=problem,
                    dispatch=sluice.DispatchOptions(trials=trials, threads=threads, seed=SEED))
    settings.update(options)
    return sluice.compare_systems(profile, dataset, **settings)


@pytest.fixture(scope="module")
def comparison(profile, dataset):
    return run(profile, dataset)


def run_document(run, summary):
    """A SystemRun as the tool's JSON writes it."""
    document = {
        "name": run.name,
        "failure": run.failure,
        "configuration": run.configuration,
        "strategies": [without_header(json.loads(strategy.to_json())) for strategy in run.strategies],
        "iterations": [{"seconds": o.seconds, "switching": o.switching, "layout_move": o.layout_move,
                        "imbalance": o.imbalance, "idle": o.idle,
                        "micro_batch_imbalance": o.micro_batch_imbalance, "strategy": o.strategy}
                       for o in run.iterations],
    }
    if summary is not None:
        document["summary"] = {
            "mean_seconds": summary.seconds, "stddev_seconds": summary.seconds_stddev,
            "mean_tokens_per_second": summary.tokens_per_second,
            "stddev_tokens_per_second": summary.tokens_per_second_stddev,
            "speedup": summary.speedup, "speedup_stddev": summary.speedup_stddev,
            "imbalance": summary.imbalance, "idle": summary.idle,
            "micro_batch_imbalance": summary.micro_batch_imbalance,
            "switching_seconds": summary.switching, "layout_move_seconds": summary.layout_move,
            "over_bound": summary.over_bound}
    return document


MEASURED = ("planning_seconds", "mean_planning_seconds")


def without_measured(tree):
    """A JSON tree without its measured wall-clock times, which differ from run to run."""
    if isinstance(tree, dict):
        return {key: without_measured(value) for key, value in tree.items() if key not in MEASURED}
    if isinstance(tree, list):
        return [without_measured(value) for value in tree]
    return tree


def bound_document(bound):
    return None if bound is None else {"seconds": bound.seconds, "area_seconds": bound.area_seconds,
                                       "critical_path_seconds": bound.critical_path_seconds}


def document_of(comparison):
    """The parts of `sluice simulate --json` that the comparison holds."""
    summaries = comparison.summarize()
    return {
        "batches": [{"sequences": int(n), "tokens": int(t), "lower_bound": bound_document(b)}
                    for n, t, b in zip(comparison.batch_sequences, comparison.batch_tokens, comparison.lower_bounds)],
        "length_ranges": comparison.bounds.tolist(),
        "candidates": {"strategies": [without_header(json.loads(s.to_json())) for s in comparison.candidates]},
        "systems": [run_document(run, summaries.get(run.name)) for run in comparison.systems],
    }


def compute_events(simulation):
    """A pipeline's compute ops as `sluice simulate --trace` writes them: (thread, label, start µs, duration µs)."""
    return [(2 * j, ("F" if op.kind == "forward" else "B") + str(op.micro_batch), op.start * 1e6,
             (op.end - op.start) * 1e6) for j, stage in enumerate(simulation.stages) for op in stage]


def test_matches_the_tool(cli, comparison, tmp_path):
    trace = tmp_path / "trace.json"
    document = cli("simulate", "--profile", PROFILE, "--gpus", GPUS, "--lengths", LENGTHS, "--tokens", TOKENS,
                   "--iterations", ITERATIONS, "--seed", SEED, "--trials", TRIALS, "--trace", trace)
    assert comparison.bounds[-1] == document["context"]
    for system in document["systems"]:
        assert all(iteration["planning_seconds"] >= 0 for iteration in system["iterations"])
    document = without_measured(document)
    assert_close_json(document_of(comparison), {key: document[key] for key in document_of(comparison)})
    # The comparison's own document holds the same batches and runs as the tool's.
    own = without_measured(json.loads(comparison.to_json()))
    assert own["batches"] == document["batches"] and own["bounds"] == document["length_ranges"]
    for mine, theirs in zip(own["systems"], document["systems"]):
        assert_close_json({key: mine[key] for key in ("name", "failure", "configuration", "strategies",
                                                      "iterations")},
                          {key: value for key, value in theirs.items() if key != "summary"})
    # Iteration 0's pipelines are those of the tool's Chrome trace, op by op, in the same order.
    pipelines = [(f"{run.name}: {name}", simulation) for run in comparison.systems for name, simulation in run.first]
    events = json.loads(trace.read_text())
    names = {event["pid"]: event["args"]["name"] for event in events["traceEvents"] if event["name"] == "process_name"}
    assert [names[pid] for pid in sorted(names)] == [name for name, _ in pipelines]
    for pid, (_, simulation) in enumerate(pipelines):
        traced = [(event["tid"], event["name"], event["ts"], event["dur"]) for event in events["traceEvents"]
                  if event["pid"] == pid and event["ph"] == "X" and event["cat"] in ("forward", "backward")]
        assert sorted(traced) == pytest.approx(sorted(compute_events(simulation)), rel=1e-9)
    assert events["otherData"]["makespan_s"] == pytest.approx(max(s.makespan for _, s in pipelines), rel=1e-9)


def test_given_batches_are_the_sampled_ones(profile, dataset, comparison):
    sampler = sluice.BatchSampler(dataset.truncated(int(comparison.bounds[-1])), tokens_per_batch=TOKENS, seed=SEED)
    batches = [sampler.next() for _ in range(ITERATIONS)]
    given = run(profile, dataset, iterations=None, batches=[(b.ids, b.lengths) for b in batches])
    assert document_of(given) == document_of(comparison)
    assert comparison.batch_tokens.tolist() == [b.tokens for b in batches]
    for batch, bound in zip(batches, comparison.lower_bounds):
        for given_as in (batch, batch.lengths, (batch.ids, batch.lengths)):
            assert bound_document(sluice.lower_bound(profile, given_as)) == bound_document(bound)


def test_lower_bound_of_what_no_scheme_holds_and_bad_batches(profile):
    assert sluice.lower_bound(profile, np.array([1000, 10_000_000])) is None
    wider = sluice.lower_bound(profile, np.array([4000] * 30 + [60_000]), cross_node_tp=True)
    narrower = sluice.lower_bound(profile, np.array([4000] * 30 + [60_000]))
    assert wider.seconds <= narrower.seconds  # more schemes, no higher a bound
    with pytest.raises(ValueError, match="empty batch"):
        sluice.lower_bound(profile, np.array([], dtype=np.int64))
    with pytest.raises(ValueError):
        sluice.lower_bound(profile, np.array([0, 5]))


def test_result_structure(comparison):
    assert sluice.system_names() == ["megatron", "megatron_cp", "deepspeed", "dynamic_cp", "flexsp", "hotspa",
                                    "dynapipe", "sluice"]
    assert [run.name for run in comparison.systems] == sluice.system_names()
    # Without CP schemes, Megatron-LM's CP has none to run, and ZeRO-3 alone holds no sequence this long.
    assert comparison["megatron_cp"].failure.startswith("the scheme space has no ring context-parallel scheme")
    assert comparison["deepspeed"].failure.startswith("no ZeRO-3 × Ulysses strategy")
    assert comparison["dynamic_cp"].failure.startswith("no ⟨TP, PP⟩ × ring CP domain")
    assert comparison["flexsp"].failure.startswith("no ZeRO-3 × Ulysses domain")
    ran = [run for run in comparison.systems if run.failure is None]
    assert comparison.any_ran and [run.name for run in ran] == ["megatron", "hotspa", "dynapipe", "sluice"]
    assert comparison["sluice"].name == "sluice"
    with pytest.raises(KeyError):
        comparison["galvatron"]
    summaries = comparison.summarize()
    assert summaries["sluice"].speedup == pytest.approx(1.0)
    for run in ran:
        seconds = run.seconds
        assert seconds.dtype == np.float64 and seconds.flags.writeable  # a fresh array
        assert seconds.tolist() == [outcome.seconds for outcome in run.iterations]
        assert run.imbalance.tolist() == [outcome.imbalance for outcome in run.iterations]
        assert run.micro_batch_imbalance.tolist() == [outcome.micro_batch_imbalance for outcome in run.iterations]
        assert np.all(run.micro_batch_imbalance >= 1.0)
        assert np.all(run.switching <= run.layout_move)
        assert summaries[run.name].seconds == pytest.approx(seconds.mean())
        # Measured, so only their bookkeeping is exact: every iteration timed, the summary their mean.
        assert run.planning_seconds.tolist() == [outcome.planning_seconds for outcome in run.iterations]
        assert np.all(run.planning_seconds > 0)
        assert summaries[run.name].planning_seconds == pytest.approx(run.planning_seconds.mean(), rel=1e-12)
        assert summaries[run.name].speedup == pytest.approx(np.mean(seconds / comparison["sluice"].seconds))
        for plan in run.plans:
            assert isinstance(plan, sluice.IterationPlan)
            assert sluice.IterationPlan.from_json(plan.to_json()) == plan
    # No system beats the lower bound of any batch; the bound of a batch is sluice.lower_bound's.
    bounds = comparison.lower_bounds
    assert len(bounds) == ITERATIONS and all(isinstance(bound, sluice.IterationBound) for bound in bounds)
    for run in ran:
        assert np.all(run.seconds >= [bound.seconds for bound in bounds])
        assert summaries[run.name].over_bound == pytest.approx(
            run.seconds.mean() / np.mean([bound.seconds for bound in bounds]), rel=1e-12)
    for bound in bounds:
        assert bound.seconds >= max(bound.area_seconds, bound.critical_path_seconds) > 0
    moves = comparison["sluice"].layout_moves
    assert len(moves) == len(comparison["sluice"].strategies) and not moves.flags.writeable
    assert not comparison.bounds.flags.writeable and comparison.bounds.dtype == np.int64
    assert comparison.batch_tokens.sum() <= TOKENS * ITERATIONS


def test_first_iteration_pipelines(comparison):
    for run in (run for run in comparison.systems if run.failure is None):
        assert run.first and all(isinstance(simulation, sluice.ScheduleSimulation) for _, simulation in run.first)
        makespans = [simulation.makespan for _, simulation in run.first]
        assert all(makespan > 0 for makespan in makespans)
        first = run.iterations[0]
        if run.name == "hotspa":  # the length range holding most of iteration 0's time
            assert max(makespans) < first.seconds
        else:  # the slowest pipeline, plus sluice's exposed pull and push
            assert max(makespans) == pytest.approx(first.seconds - first.switching, rel=1e-12)
        for _, simulation in run.first:
            assert simulation.idle.tolist() == pytest.approx(
                [simulation.makespan - sum(op.end - op.start for op in stage) for stage in simulation.stages])


def test_json_round_trip_pickle_and_files(comparison, tmp_path):
    text = comparison.to_json()
    document = json.loads(text)
    assert document["format"] == "sluice.comparison" and document["version"] == 11
    back = sluice.Comparison.from_json(text)
    assert back == comparison and back.to_json() == text
    assert [[name for name, _ in run.first] for run in back.systems] == \
        [[name for name, _ in run.first] for run in comparison.systems]
    assert pickle.loads(pickle.dumps(comparison)) == comparison
    path = tmp_path / "comparison.json"
    comparison.save(path)
    assert sluice.Comparison.load(path) == comparison
    # A change anywhere, down to one op of iteration 0, makes another comparison.
    document["systems"][5]["first"]["pipelines"][0]["stages"][0][0]["arrival"] += 1.0
    assert sluice.Comparison.from_json(json.dumps(document)) != comparison
    with pytest.raises(sluice.InvalidInput, match="not valid JSON"):
        sluice.Comparison.from_json(text[:len(text) // 2])


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["systems"][5]["iterations"][0].pop("imbalance"), "missing field 'imbalance'"),
    (lambda d: d["systems"][0]["first"]["pipelines"][0]["stages"][0][0].update({"pass": "sideways"}),
     "op timing: field 'pass'"),
    (lambda d: d["systems"].reverse(), "expected system 'megatron'"),
    (lambda d: d.pop("bounds"), "missing field 'bounds'"),
    (lambda d: d["batches"][0].update(tokens=1.5), "field 'tokens': expected an integer"),
])
def test_broken_documents(comparison, edit, message):
    document = json.loads(comparison.to_json())
    edit(document)
    with pytest.raises(sluice.InvalidInput, match=message):
        sluice.Comparison.from_json(json.dumps(document))


def test_a_context_no_system_holds(profile, dataset):
    comparison = run(profile, dataset, iterations=1, context=1_000_000)
    assert not comparison.any_ran and comparison.summarize() == {} and comparison.candidates == []
    assert all("holds 1000000 tokens" in run.failure for run in comparison.systems if run.name != "megatron_cp")
    assert comparison["megatron_cp"].failure.startswith("the scheme space has no ring context-parallel scheme")
    assert all(len(run.seconds) == 0 and run.first == [] for run in comparison.systems)
    assert sluice.Comparison.from_json(comparison.to_json()) == comparison


def test_views_outlive_their_comparison(profile, dataset):
    comparison = run(profile, dataset, iterations=1)
    bounds, moves = comparison.bounds, comparison["sluice"].layout_moves
    expected = bounds.copy(), moves.copy()
    del comparison
    assert np.array_equal(bounds, expected[0]) and np.array_equal(moves, expected[1])


@pytest.mark.parametrize("options, message", [
    (dict(iterations=0), "iterations must be > 0"),
    (dict(iterations=1, batches=[[1000]]), "cannot be combined"),
    (dict(iterations=None, batches=[]), "no iterations"),
    (dict(iterations=None, batches=[[1000, -5]]), "a length must be > 0"),
    (dict(iterations=None, batches=[[1000.5]]), "expected an integer array"),
    (dict(iterations=None, batches=[[200_000, 5]]), "above the capacity"),
    (dict(tokens=0), "tokens_per_batch must be >= 1"),
    (dict(context=0), "context must be >= 1"),
    (dict(iterations=1, bandwidth=1.0), "bandwidth"),
    (dict(iterations=1, trials=0), "trials"),
])
def test_bad_options(profile, dataset, options, message):
    with pytest.raises(sluice.InvalidInput, match=message):
        run(profile, dataset, **options)


def test_deterministic_across_calls_and_python_threads(profile, dataset, comparison):
    reference = document_of(comparison)
    assert document_of(run(profile, dataset, threads=2)) == reference
    results = [None] * 4

    def compare(slot):
        results[slot] = document_of(run(profile, dataset))

    workers = [threading.Thread(target=compare, args=(slot,)) for slot in range(len(results))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert results == [reference] * len(results)


def test_the_example_script_runs(tmp_path):
    out = tmp_path / "systems.png"
    env = dict(os.environ)  # absolute, since the script runs from its own directory
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)
    finished = subprocess.run(
        [sys.executable, str(SCRIPT), "--iterations", "2", "--gpus", "8", "--tokens", "50000", "--out", str(out)],
        capture_output=True, text=True, cwd=SCRIPT.parent, env=env, timeout=120)
    assert finished.returncode == 0, finished.stderr
    rows = finished.stdout.splitlines()[2:10]
    assert [row.split()[0] for row in rows] == sluice.system_names()
    if importlib.util.find_spec("matplotlib") is not None:
        assert out.is_file() and out.stat().st_size > 0
    else:
        assert "matplotlib is not installed" in finished.stdout and not out.exists()
