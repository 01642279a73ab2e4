"""Schemes, strategies, length data, profiles and fits: against the command-line tool and the rules of the API."""
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

import sluice
from conftest import assert_close_json, json_of, without_header

SOURCE = Path(__file__).resolve().parents[3]


def test_scheme_and_strategy_values():
    scheme = sluice.Scheme.parse("tp4pp2")
    assert (scheme.tp, scheme.pp, scheme.gpus, scheme.name) == (4, 2, 8, "tp4pp2")
    assert scheme == sluice.Scheme(4, 2) == sluice.Scheme.parse("<4,2>")
    assert hash(scheme) == hash(sluice.Scheme(4, 2)) and pickle.loads(pickle.dumps(scheme)) == scheme
    strategy = sluice.Strategy("1*tp8pp1+2*tp2pp2")
    assert strategy.gpus == 16 and strategy.pipeline_count == 3 and not strategy.is_homogeneous
    assert strategy == sluice.Strategy([sluice.StrategyPart(sluice.Scheme(8, 1), 1),
                                        sluice.StrategyPart(sluice.Scheme(2, 2), 2)])
    assert sluice.Strategy.from_json(strategy.to_json()) == strategy
    assert pickle.loads(pickle.dumps(strategy)) == strategy
    assert sluice.Strategy.homogeneous(sluice.Scheme(4, 1), 4).name == "4*tp4pp1"


def test_schemes_with_context_parallelism_and_recomputation():
    scheme = sluice.Scheme(2, 2, cp=8, cp_kind="hybrid", ulysses=2, recompute=True)
    assert (scheme.name, scheme.gpus, scheme.cp, scheme.cp_kind, scheme.ulysses, scheme.recompute) == \
        ("tp2cp8hybrid2pp2ac", 32, 8, "hybrid", 2, True)
    assert scheme == sluice.Scheme.parse("tp2cp8hybrid2pp2ac") and sluice.Scheme(4, 2) < sluice.Scheme(4, 2, cp=2)
    assert pickle.loads(pickle.dumps(scheme)) == scheme and hash(scheme) == hash(sluice.Scheme.parse(scheme.name))
    assert sluice.Scheme(2, 1, cp=1, cp_kind="ulysses") == sluice.Scheme(2, 1)
    strategy = sluice.Strategy("1*tp2cp4ringpp1+1*tp8pp1ac")
    assert strategy.gpus == 16 and sluice.Strategy.from_json(strategy.to_json()) == strategy
    assert '"version": 2' in strategy.to_json()
    with pytest.raises(sluice.InvalidInput, match="needs a Ulysses degree"):
        sluice.Scheme(1, 1, cp=4, cp_kind="hybrid")


def test_the_scheme_space_gives_the_planners_cp_schemes():
    profile = sluice.Profile.bundled("llama2-7b")
    wide = sluice.with_scheme_space(profile, cp=[2, 4], cp_kinds=["ring", "ulysses"], recompute=True)
    names = {cost.scheme.name for cost in wide.schemes}
    assert {cost.scheme.name for cost in profile.schemes} < names
    assert {"tp1cp4ulyssespp2", "tp2cp2ringpp1ac", "tp8pp1ac"} <= names
    assert wide.at(sluice.Scheme.parse("tp1cp4ringpp2")).max_len > profile.at(sluice.Scheme(1, 2)).max_len
    with pytest.raises(sluice.InvalidInput, match="CP 3 splits the 32 heads unevenly"):
        sluice.with_scheme_space(profile, cp=[3], cp_kinds=["ulysses"])


@pytest.mark.parametrize("text", ["", "tp0pp1", "2*", "3*tp4pp", "1*tp8pp1+", "x"])
def test_bad_strategy_text_raises_invalid_input(text):
    with pytest.raises(sluice.InvalidInput):
        sluice.Strategy.parse(text)


def test_dataset_and_profile_match_inspect(cli):
    document = cli("inspect", "--profile", "llama2-13b", "--gpus", "32", "--lengths", "cpython-stdlib",
                   "--context", "32768", "--bin-width", "512")
    dataset = sluice.LengthDataset.bundled("cpython-stdlib").truncated(32768)
    stats = dataset.stats()
    expected = document["dataset"]["stats"]
    assert {key: getattr(stats, key) for key in expected} == pytest.approx(expected, rel=1e-12)
    histogram = dataset.histogram(512)
    bins = document["dataset"]["histogram"]["bins"]
    assert histogram.lower.tolist() == [b["lower"] for b in bins]
    assert histogram.upper.tolist() == [b["upper"] for b in bins]
    assert histogram.counts.tolist() == [b["count"] for b in bins]

    profile = sluice.Profile.bundled("llama2-13b", gpus=32)
    assert profile.gpus == document["profile"]["gpus"] and profile.name == document["profile"]["name"]
    assert len(profile.schemes) == len(document["profile"]["schemes"])
    for bound, shown in zip(profile.schemes, document["profile"]["schemes"]):
        assert (bound.scheme.tp, bound.scheme.pp, bound.max_len, bound.util_len) == (
            shown["tp"], shown["pp"], shown["max_len"], shown["util_len"])
        assert (bound.latency.a, bound.latency.b, bound.latency.c) == pytest.approx(
            (shown["latency"]["a"], shown["latency"]["b"], shown["latency"]["c"]), rel=1e-12)
        lengths = np.array([time["length"] for time in shown["times"]])
        assert bound.latency(lengths) == pytest.approx([time["seconds"] for time in shown["times"]], rel=1e-12)
        assert profile.max_len(bound.scheme) == bound.max_len and profile.at(bound.scheme).max_len == bound.max_len


def test_dataset_lengths_are_a_read_only_view():
    dataset = sluice.LengthDataset(np.array([5, 9, 3], dtype=np.int32), "three")
    lengths = dataset.lengths
    assert lengths.dtype == np.int64 and lengths.tolist() == [5, 9, 3] and not lengths.flags.writeable
    assert lengths.base is not None  # a view of the C++ vector, which it keeps alive
    del dataset
    assert lengths.tolist() == [5, 9, 3]
    with pytest.raises(ValueError):
        lengths[0] = 1


@pytest.mark.parametrize("values, message", [
    (np.array([1.0, 2.0]), "integer array"),
    (np.array([1.0, np.nan]), "NaN"),
    (np.array([[1, 2], [3, 4]]), "1-D"),
    (np.arange(10)[::2], "contiguous"),
    (np.array([2**63], dtype=np.uint64), "int64 range"),
    (np.array([True, False]), "integer array"),
    (np.array([4, 0, 7]), "lengths"),
    (np.array([4, -3]), "lengths"),
    ([], "lengths"),
])
def test_bad_lengths_raise_invalid_input(values, message):
    with pytest.raises(sluice.InvalidInput, match=message):
        sluice.LengthDataset(values)
    with pytest.raises(sluice.InvalidInput):
        sluice.plan_iteration(values, ["1*tp16pp1"], sluice.Profile.bundled())


def test_sampler_is_seeded_and_never_ends():
    dataset = sluice.LengthDataset.bundled("man-pages").truncated(32768)
    first = [batch for _, batch in zip(range(3), sluice.BatchSampler(dataset, tokens_per_batch=50_000, seed=7))]
    again = [batch for _, batch in zip(range(3), sluice.BatchSampler(dataset, tokens_per_batch=50_000, seed=7))]
    assert first == again and first[0] != first[1]
    for batch in first:
        assert batch.tokens == batch.lengths.sum() <= 50_000 and len(batch) == len(batch.ids)
        assert np.array_equal(dataset.lengths[batch.ids], batch.lengths)
    with pytest.raises(sluice.InvalidInput):
        sluice.BatchSampler(dataset, tokens_per_batch=0)


def test_synthetic_lengths_are_seeded():
    a = sluice.synthetic_lengths(count=1000, seed=3)
    assert np.array_equal(a, sluice.synthetic_lengths(count=1000, seed=3))
    assert not np.array_equal(a, sluice.synthetic_lengths(count=1000, seed=4))
    assert a.min() >= 16 and a.max() <= 131072 and len(a) == 1000
    with pytest.raises(sluice.InvalidInput):
        sluice.synthetic_lengths(count=-1)
    assert "llama2-7b" in sluice.bundled_names("profiles") and "man-pages" in sluice.bundled_names("lengths")


def test_profile_documents_round_trip(tmp_path):
    profile = sluice.Profile.bundled("llama2-32b", gpus=64)
    text = profile.to_json()
    assert sluice.Profile.from_json(text).to_json() == text
    assert pickle.loads(pickle.dumps(profile)).to_json() == text
    profile.save(tmp_path / "p.json")
    loaded = sluice.Profile.load(tmp_path / "p.json").to_json()
    assert loaded == text == sluice.Profile.read(tmp_path / "p.json").to_json()
    assert profile.with_gpus(32).gpus == 32
    assert [p.max_len for p in profile.pipelines("1*tp16pp1+6*tp8pp1")] == sorted(
        (p.max_len for p in profile.pipelines("1*tp16pp1+6*tp8pp1")), reverse=True)
    with pytest.raises(sluice.InvalidInput):
        sluice.Profile.bundled("no-such-profile")
    with pytest.raises(sluice.InvalidInput):
        sluice.Profile.from_json('{"format": "sluice.profile", "version": 1')
    with pytest.raises(sluice.InvalidInput):
        profile.save(tmp_path / "missing-dir" / "p.json")
    assert not (tmp_path / "missing-dir").exists()


def test_fit_matches_the_tool(cli):
    samples_file = SOURCE / "data" / "samples" / "example.samples.csv"
    document = cli("fit", "--samples", samples_file, "--base", "llama2-7b")
    samples = sluice.read_profile_samples(samples_file)
    fit = sluice.fit_profile(**samples, base=sluice.Profile.bundled("llama2-7b"), name="example.samples",
                             source=document["profile"].get("source", ""))
    assert_close_json(without_header(json_of(fit.profile)), without_header(document["profile"]), rel=1e-9)
    by_scheme = {(s["tp"], s["pp"]): s for s in document["schemes"]}
    for scheme_fit in fit.schemes:
        shown = by_scheme[(scheme_fit.scheme.tp, scheme_fit.scheme.pp)]
        assert scheme_fit.latency.samples == shown["samples"]
        assert scheme_fit.latency.relative_rms_error == pytest.approx(shown["latency_error"], rel=1e-6, abs=1e-12)
        if shown.get("memory"):
            assert scheme_fit.memory.bytes_per_token == pytest.approx(shown["memory"]["bytes_per_token"], rel=1e-9)
        else:  # measured without peak memory: MaxLen from the base profile's memory model
            assert scheme_fit.memory is None


def test_fit_takes_packed_micro_batches(tmp_path):
    # k packed sequences of l tokens cost k·(a·l² + b·l) + c: the executor profiler's packed shapes.
    a, b, c = 2e-10, 2e-6, 4.5e-3
    lengths = [256, 512, 1024, 2048, 4096, 8192, 256, 256, 256, 256, 256]
    sequences = [1, 1, 1, 1, 1, 1, 2, 4, 8, 16, 32]
    seconds = [k * (a * n * n + b * n) + c for n, k in zip(lengths, sequences)]
    rows = "".join(f"tp1pp1,{n},{t!r},{k}\n" for n, t, k in zip(lengths, seconds, sequences))
    (tmp_path / "packed.csv").write_text("scheme,tokens,seconds,sequences\n" + rows)
    samples = sluice.read_profile_samples(tmp_path / "packed.csv")
    assert samples["sequences"].tolist() == sequences and samples["peak_bytes"] is None
    latency = sluice.fit_profile(**samples, base=sluice.Profile.bundled("llama2-7b")).schemes[0].latency
    assert latency.model.b == pytest.approx(b, rel=1e-6) and latency.model.a == pytest.approx(a, rel=1e-6)
    single = sluice.fit_profile(["tp1pp1"] * len(lengths), lengths, seconds, base=sluice.Profile.bundled("llama2-7b"),
                                max_error=1.0)
    assert single.schemes[0].latency.relative_rms_error > 0.2  # read as one sequence each, no quadratic fits them
    with pytest.raises(sluice.InvalidInput, match="sequences must be in"):
        sluice.fit_profile(**{**samples, "sequences": [0] * len(lengths)}, base=sluice.Profile.bundled("llama2-7b"))
    with pytest.raises(sluice.InvalidInput, match="sequences"):
        sluice.fit_profile(**{**samples, "sequences": [1, 2]}, base=sluice.Profile.bundled("llama2-7b"))


def test_fit_rejects_bad_samples():
    base = sluice.Profile.bundled("llama2-7b")
    with pytest.raises(sluice.InvalidInput):
        sluice.fit_profile(["tp1pp1"] * 3, [1024, 2048, 4096], [0.1, float("nan"), 0.3], base=base)
    with pytest.raises(sluice.InvalidInput):
        sluice.fit_profile(["tp1pp1"] * 2, [1024, 2048, 4096], [0.1, 0.2, 0.3], base=base)
    with pytest.raises(sluice.InvalidInput):
        sluice.fit_profile(["tp1pp1"] * 3, [1024, -2048, 4096], [0.1, 0.2, 0.3], base=base)


def test_context_parallel_matches_the_tool(cli):
    document = cli("inspect", "--cp", "4", "--heads", "32", "--kv-heads", "8", "--cp-kind", "hybrid", "--ulysses", "2",
                   "--recompute")
    derived = sluice.derive_context_parallel(sluice.Profile.bundled("llama2-7b"), 4, heads=32, kv_heads=8,
                                             kind="hybrid", ulysses=2, recompute=True)
    shown = document["context_parallel"]["schemes"]
    assert [scheme.name for scheme in derived] == [scheme["scheme"] for scheme in shown]
    for scheme, expected in zip(derived, shown):
        assert scheme.gpus == expected["gpus"] and scheme.max_len == expected["max_len"]
        assert scheme.fit.model.a == pytest.approx(expected["fit"]["a"], rel=1e-12)
        for time in expected["times"]:
            assert scheme.seconds(time["length"]) == pytest.approx(time["seconds"], rel=1e-12)
        assert scheme.base.gpus * 4 == scheme.gpus
        assert scheme.last_stage == sluice.LastStageWork()  # the bundled fits state no last-stage work


def test_context_parallel_shares_the_last_stage_work():
    document = json.loads(sluice.Profile.bundled("llama2-7b").to_json())
    for scheme in document["schemes"]:
        if (scheme["tp"], scheme["pp"]) == (1, 2):
            scheme["last_stage"] = {"b": scheme["latency"]["b"] / 4, "c": scheme["latency"]["c"] / 2}
            head = scheme["last_stage"]
    derived = {scheme.name: scheme for scheme in
               sluice.derive_context_parallel(sluice.Profile.from_json(json.dumps(document)), 2, heads=32)}
    work = derived["tp1cp2ringpp2"].last_stage
    assert work.b == pytest.approx(head["b"] / 2, rel=1e-12) and work.c == pytest.approx(head["c"], rel=1e-12)
    assert derived["tp2cp2ringpp1"].last_stage == sluice.LastStageWork()


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(heads=32, kind="stripe"), "kind: expected ulysses, ring or hybrid"),
        (dict(heads=32, ulysses=2), "ulysses is for kind 'hybrid'"),
        (dict(heads=32, kind="hybrid"), "needs a Ulysses degree that divides it"),
        (dict(heads=32, kind="hybrid", ulysses=3), "needs a Ulysses degree that divides it"),
        (dict(heads=32, kv_heads=5), "a multiple of the KV heads"),
    ],
)
def test_context_parallel_refuses_bad_input(arguments, message):
    with pytest.raises(sluice.InvalidInput, match=message):
        sluice.derive_context_parallel(sluice.Profile.bundled("llama2-7b"), 4, **arguments)
