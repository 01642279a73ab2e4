"""compare: the systems against `sluice simulate`, the result's arrays, options, determinism and the example script."""
import importlib.util
import json
import os
import pathlib
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


def run(profile, dataset, **options):
    """The scenario with the links and boundary tensors `sluice simulate` assumes by default."""
    settings = dict(tokens=TOKENS, iterations=ITERATIONS, seed=SEED, trials=TRIALS, latency=1e-5, bandwidth=100e9,
                    hidden=json.loads(profile.to_json())["model"]["hidden"])
    settings.update(options)
    return sluice.compare(profile, dataset, **settings)


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
                        "imbalance": o.imbalance, "idle": o.idle, "strategy": o.strategy} for o in run.iterations],
    }
    if summary is not None:
        document["summary"] = {
            "mean_seconds": summary.seconds, "stddev_seconds": summary.seconds_stddev,
            "mean_tokens_per_second": summary.tokens_per_second,
            "stddev_tokens_per_second": summary.tokens_per_second_stddev,
            "speedup": summary.speedup, "speedup_stddev": summary.speedup_stddev,
            "imbalance": summary.imbalance, "idle": summary.idle,
            "switching_seconds": summary.switching, "layout_move_seconds": summary.layout_move}
    return document


def document_of(comparison):
    """The parts of `sluice simulate --json` that the comparison holds."""
    summaries = comparison.summarize()
    return {
        "batches": [{"sequences": int(n), "tokens": int(t)}
                    for n, t in zip(comparison.batch_sequences, comparison.batch_tokens)],
        "length_ranges": comparison.bounds.tolist(),
        "candidates": {"strategies": [without_header(json.loads(s.to_json())) for s in comparison.candidates]},
        "systems": [run_document(run, summaries.get(run.name)) for run in comparison.systems],
    }


def test_matches_the_tool(cli, comparison):
    document = cli("simulate", "--profile", PROFILE, "--gpus", GPUS, "--lengths", LENGTHS, "--tokens", TOKENS,
                   "--iterations", ITERATIONS, "--seed", SEED, "--trials", TRIALS)
    assert comparison.bounds[-1] == document["context"]
    assert_close_json(document_of(comparison), {key: document[key] for key in document_of(comparison)})


def test_given_batches_are_the_sampled_ones(profile, dataset, comparison):
    sampler = sluice.BatchSampler(dataset.truncated(int(comparison.bounds[-1])), tokens_per_batch=TOKENS, seed=SEED)
    batches = [sampler.next() for _ in range(ITERATIONS)]
    given = run(profile, dataset, iterations=None, batches=[(b.ids, b.lengths) for b in batches])
    assert document_of(given) == document_of(comparison)
    assert comparison.batch_tokens.tolist() == [b.tokens for b in batches]


def test_result_structure(comparison):
    assert sluice.system_names() == ["megatron", "hotspa", "dynapipe", "sluice"]
    assert [run.name for run in comparison.systems] == sluice.system_names()
    assert comparison.any_ran and all(run.failure is None for run in comparison.systems)
    assert comparison["sluice"].name == "sluice"
    with pytest.raises(KeyError):
        comparison["deepspeed"]
    summaries = comparison.summarize()
    assert summaries["sluice"].speedup == pytest.approx(1.0)
    for run in comparison.systems:
        seconds = run.seconds
        assert seconds.dtype == np.float64 and seconds.flags.writeable  # a fresh array
        assert seconds.tolist() == [outcome.seconds for outcome in run.iterations]
        assert run.imbalance.tolist() == [outcome.imbalance for outcome in run.iterations]
        assert np.all(run.switching <= run.layout_move)
        assert summaries[run.name].seconds == pytest.approx(seconds.mean())
        assert summaries[run.name].speedup == pytest.approx(np.mean(seconds / comparison["sluice"].seconds))
        for plan in run.plans:
            assert isinstance(plan, sluice.IterationPlan)
            assert sluice.IterationPlan.from_json(plan.to_json()) == plan
    moves = comparison["sluice"].layout_moves
    assert len(moves) == len(comparison["sluice"].strategies) and not moves.flags.writeable
    assert not comparison.bounds.flags.writeable and comparison.bounds.dtype == np.int64
    assert comparison.batch_tokens.sum() <= TOKENS * ITERATIONS


def test_a_context_no_system_holds(profile, dataset):
    comparison = run(profile, dataset, iterations=1, context=1_000_000)
    assert not comparison.any_ran and comparison.summarize() == {} and comparison.candidates == []
    assert all("holds 1000000 tokens" in run.failure for run in comparison.systems)
    assert all(len(run.seconds) == 0 for run in comparison.systems)


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
    rows = finished.stdout.splitlines()[2:6]
    assert [row.split()[0] for row in rows] == sluice.system_names()
    if importlib.util.find_spec("matplotlib") is not None:
        assert out.is_file() and out.stat().st_size > 0
    else:
        assert "matplotlib is not installed" in finished.stdout and not out.exists()
