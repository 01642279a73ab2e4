"""propose and propose_sampled: against `sluice propose`, their validators, documents, errors and threads."""
import json
import pickle
import threading

import numpy as np
import pytest

import sluice
from conftest import json_of


@pytest.fixture(scope="module")
def profile_7b():
    return sluice.Profile.bundled("llama2-7b")


@pytest.fixture(scope="module")
def man_pages(profile_7b):
    """The bundled man-pages lengths truncated as `sluice propose` truncates them by default."""
    loaded = sluice.LengthDataset.bundled("man-pages")
    return loaded.truncated(sluice.default_max_len(loaded, profile_7b))


SAMPLED_PAPER = sluice.ProposeOptions(tokens_per_iteration=50_000, max_candidates=4)
SAMPLED = sluice.SampledOptions(choosing_batches=6, held_out_batches=3, seed=3,
                                dispatch=sluice.DispatchOptions(trials=2, seed=3))
SAMPLED_FLAGS = ["--sampled", "--tokens", 50_000, "--candidates", 4, "--batches", 6, "--held-out", 3, "--trials", 2,
                 "--seed", 3]


def sampled(dataset, profile, sampling=SAMPLED, overhead=None):
    return sluice.propose_sampled(dataset, profile, options=SAMPLED_PAPER, sampled=sampling, overhead=overhead)


@pytest.fixture(scope="module")
def sampled_7b(man_pages, profile_7b):
    return sampled(man_pages, profile_7b)


def test_proposal_matches_the_tool(cli, man_pages, profile_7b):
    document = cli("propose", "--profile", "llama2-7b", "--lengths", "man-pages")
    proposal = sluice.propose(man_pages, profile_7b)
    proposal.validate(profile_7b)
    assert json_of(proposal) == document
    assert proposal.options.max_len == man_pages.stats().max and proposal.options.gpus == profile_7b.gpus
    assert [c.strategy for c in proposal.candidates] == proposal.strategies()
    assert [c.origin for c in proposal.candidates] == [c["origin"] for c in document["candidates"]]
    assert all(point.relaxed is None for point in proposal.by_length)


def test_relaxed_proposal_on_other_gpus_matches_the_tool(cli):
    document = cli("propose", "--profile", "llama2-32b", "--gpus", 64, "--lengths", "cpython-stdlib", "--context",
                   32768, "--relaxed", "--candidates", 5, "--tokens", 200_000, "--length-step", 256, "--cross-node-tp")
    profile = sluice.Profile.bundled("llama2-32b", gpus=64)
    dataset = sluice.LengthDataset.bundled("cpython-stdlib").truncated(32768)
    proposal = sluice.propose(dataset, profile, options=sluice.ProposeOptions(
        max_len=32768, relaxed=True, gpu_step=1, max_candidates=5, tokens_per_iteration=200_000, length_step=256,
        tp_within_node=False))
    proposal.validate(profile)
    assert json_of(proposal) == document
    assert proposal.relaxed_optimum is not None and proposal.relaxed_optimum <= proposal.integer_optimum
    assert len(proposal.candidates) <= 5 and proposal.candidates[0].max_len == 32768


def test_sampled_proposal_matches_the_tool(cli, sampled_7b, profile_7b):
    document = cli("propose", "--profile", "llama2-7b", "--lengths", "man-pages", *SAMPLED_FLAGS)
    sampled_7b.validate(profile_7b)
    assert json_of(sampled_7b) == document
    assert sum(c.wins for c in sampled_7b.candidates) == sampled_7b.choosing_batches == 6
    assert sampled_7b.strategies() == [c.strategy for c in sampled_7b.candidates]
    assert {c.source for c in sampled_7b.candidates} <= {"proposal_dp", "homogeneous", "neighbour"}
    assert sampled_7b.paper.options.max_candidates == 4


def test_homogeneous_strategies(profile_7b):
    every = sluice.homogeneous_strategies(profile_7b)
    assert every and all(s.is_homogeneous and s.gpus == profile_7b.gpus for s in every)
    longest = max(profile_7b.max_len(s.parts[0].scheme) for s in every)
    holding = sluice.homogeneous_strategies(profile_7b, holds=longest)
    assert holding and all(profile_7b.max_len(s.parts[0].scheme) >= longest for s in holding)


def test_documents_round_trip(man_pages, profile_7b, sampled_7b, tmp_path):
    proposal = sluice.propose(man_pages, profile_7b, options=sluice.ProposeOptions(relaxed=True, gpu_step=5))
    for value, cls in ((proposal, sluice.Proposal), (sampled_7b, sluice.SampledProposal)):
        assert cls.from_json(value.to_json()) == value
        assert pickle.loads(pickle.dumps(value)) == value
        value.save(tmp_path / "proposal.json")
        assert cls.load(tmp_path / "proposal.json") == value


def test_validators_catch_tampered_documents(man_pages, profile_7b, sampled_7b):
    document = json_of(sluice.propose(man_pages, profile_7b))
    document["candidates"][0]["max_len"] = document["options"]["max_len"] + 1
    with pytest.raises(sluice.InvalidPlan, match="length range"):
        sluice.Proposal.from_json(json.dumps(document)).validate(profile_7b)
    document = json_of(sampled_7b)
    document["candidates"][0]["wins"] += 1
    with pytest.raises(sluice.InvalidPlan, match="choosing batches"):
        sluice.SampledProposal.from_json(json.dumps(document)).validate(profile_7b)
    with pytest.raises(sluice.InvalidInput):
        sluice.Proposal.from_json('{"format": "sluice.proposal", "version": 2}')


def test_bad_inputs(man_pages, profile_7b):
    # The options' own fields are checked when they are made (test_options.py); these need the dataset or profile.
    with pytest.raises(sluice.InvalidInput, match="longer than max_len = 1024"):
        sluice.propose(man_pages, profile_7b, options=sluice.ProposeOptions(max_len=1024))
    with pytest.raises(sluice.InvalidInput, match="gpus"):
        sluice.propose(man_pages, profile_7b, options=sluice.ProposeOptions(gpus=profile_7b.gpus + 1))
    with pytest.raises(sluice.InvalidInput, match="max_pool must be >= max_candidates"):
        sampled(man_pages, profile_7b, sluice.SampledOptions(max_pool=3))
    for lengths in (np.array([100, -5]), np.array([100.0, np.nan]), np.array([], dtype=np.int64)):
        with pytest.raises(sluice.InvalidInput):
            sluice.propose(sluice.LengthDataset(lengths), profile_7b)
    with pytest.raises(TypeError):
        sluice.propose(man_pages.lengths, profile_7b)


def test_sampled_overhead_is_called_with_strategies(man_pages, profile_7b, sampled_7b):
    seen = []

    def free(strategy):
        seen.append(strategy)
        return 0.0

    assert sampled(man_pages, profile_7b, overhead=free) == sampled_7b
    assert seen and all(isinstance(s, sluice.Strategy) for s in seen)
    with pytest.raises(sluice.InvalidInput, match="overhead"):
        sampled(man_pages, profile_7b, overhead=lambda strategy: -1.0)
    with pytest.raises(ZeroDivisionError):
        sampled(man_pages, profile_7b, overhead=lambda strategy: 1 / 0)
    with pytest.raises(sluice.InvalidInput, match="callable"):
        sampled(man_pages, profile_7b, overhead=3)
    # An overhead favouring one candidate strictly is reflected in the chosen set's means.
    charged = sampled(man_pages, profile_7b, overhead=lambda strategy: 0.0 if strategy.is_homogeneous else 10.0)
    charged.validate(profile_7b)
    assert charged.choosing_mean >= sampled_7b.choosing_mean


def test_deterministic_and_thread_safe(man_pages, profile_7b, sampled_7b):
    assert sampled(man_pages, profile_7b) == sampled_7b
    proposal = sluice.propose(man_pages, profile_7b)
    results = {}

    def run(key):
        # The overhead callback runs on the planning thread, which takes the GIL back to call it.
        results[key] = (sampled(man_pages, profile_7b, overhead=lambda strategy: 0.0) if key == "sampled"
                        else sluice.propose(man_pages, profile_7b))

    threads = [threading.Thread(target=run, args=(key,)) for key in ("sampled", "dp")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {"sampled": sampled_7b, "dp": proposal}
