"""Thousands of generated bad inputs at every function that takes arrays or documents: each one returns or raises
sluice.InvalidInput / sluice.Infeasible / TypeError (a wrong Python type), never anything else and never a crash
(a crash would end this process, and the test run with it)."""
import json
import warnings

import numpy as np
import pytest

import sluice

ALLOWED = (sluice.InvalidInput, sluice.Infeasible, TypeError)
PROFILE = sluice.Profile.bundled("llama2-7b", gpus=8)
CANDIDATES = ["2*tp4pp1", "1*tp8pp1", "1*tp4pp2"]
TWO_TRIALS = sluice.DispatchOptions(trials=2)


def bad_arrays(seed, count):
    """Arrays of every dtype, shape and layout, with values a length array must not hold, and some valid ones."""
    rng = np.random.default_rng(seed)
    dtypes = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64, np.float16, np.float32,
              np.float64, np.bool_, np.complex64, object]
    specials = [0, -1, -(2**31), 2**31, 2**62, np.iinfo(np.int64).max, np.nan, np.inf, -np.inf, 1e300, 1e-300, 0.5]
    for _ in range(count):
        size = int(rng.choice([0, 1, 2, 5, 17]))
        dtype = dtypes[rng.integers(len(dtypes))]
        values = rng.integers(1, 40_000, size=size).astype(object)
        for index in range(size):
            if rng.random() < 0.3:
                values[index] = specials[rng.integers(len(specials))]
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the casts wrap and truncate on purpose
            try:
                array = np.array(values.tolist(), dtype=object).astype(dtype)
            except (OverflowError, ValueError, TypeError):
                array = np.array(values.tolist(), dtype=object)
        layout = rng.integers(4)
        if layout == 1 and array.size >= 2:
            array = np.repeat(array, 2)[::2]  # a strided view
        elif layout == 2:
            array = array.reshape(1, -1)
        elif layout == 3:
            array = array.tolist()  # a plain list
        yield array


def calls_on(array):
    yield lambda: sluice.LengthDataset(array)
    yield lambda: sluice.plan_iteration(array, CANDIDATES, PROFILE, dispatch=TWO_TRIALS)
    yield lambda: sluice.plan_iteration([1000, 2000], CANDIDATES, PROFILE, ids=array, dispatch=TWO_TRIALS)
    yield lambda: sluice.plan_fixed_length(array, "2*tp4pp1", PROFILE, capacity_tokens=8192)
    yield lambda: sluice.balance_kk(array, 2)
    yield lambda: sluice.one_f_one_b_order(array, 2)
    yield lambda: sluice.balance_degree(array)
    yield lambda: sluice.plan_iteration([1000, 2000], CANDIDATES, PROFILE, dispatch=TWO_TRIALS,
                                        candidate_overhead=array)


@pytest.mark.filterwarnings("error")  # a silent cast (complex to real, say) is a bug too
@pytest.mark.parametrize("seed", range(4))
def test_generated_arrays_raise_clear_errors(seed):
    outcomes = {"returned": 0, "raised": 0}
    for array in bad_arrays(seed, 300):
        for call in calls_on(array):
            try:
                call()
                outcomes["returned"] += 1
            except ALLOWED as error:
                assert str(error), "an error without a message"
                outcomes["raised"] += 1
    assert outcomes["raised"] > 1000 and outcomes["returned"] > 50, outcomes


def mutations(text, rng, count):
    """Truncations, deleted or replaced characters, numbers past their type's range, deep nesting."""
    for _ in range(count):
        kind = rng.integers(5)
        position = int(rng.integers(len(text)))
        if kind == 0:
            yield text[:position]
        elif kind == 1:
            yield text[:position] + text[position + 1:]
        elif kind == 2:
            yield text[:position] + chr(int(rng.choice([ord(c) for c in '{}[]":,-0e9.ntf ']))) + text[position + 1:]
        elif kind == 3:
            yield text.replace(": 1", ": 1e400", 1).replace(": 2", ": -99999999999999999999", 1)
        else:
            depth = int(rng.choice([10, 1000, 100_000]))
            yield text[:position] + "[" * depth + "]" * depth + text[position:]


def documents():
    lengths = np.array([31000, 9000, 4200, 2048, 700, 64])
    plan = sluice.plan_iteration(lengths, CANDIDATES, PROFILE, dispatch=sluice.DispatchOptions(seed=1))
    dataset = sluice.LengthDataset.bundled("man-pages").truncated(8192)
    yield sluice.IterationPlan, plan.to_json()
    yield sluice.Profile, PROFILE.to_json()
    yield sluice.Proposal, sluice.propose(dataset, PROFILE).to_json()
    stage = sluice.stage_cost(PROFILE.at(sluice.Scheme(1, 4)))
    run = sluice.plan_pipeline(lengths.clip(max=8192), stage.model, stages=4, micro_batch_memory=stage.memory_limit)
    yield sluice.ExecutionPlan, run.replicas[0].schedule.plan.to_json()
    yield sluice.MicroBatchPartition, run.partition.to_json()


@pytest.mark.parametrize("cls, text", list(documents()), ids=lambda value: getattr(value, "__name__", ""))
def test_mutated_documents_raise_invalid_input(cls, text):
    json.loads(text)
    rng = np.random.default_rng(len(text))
    raised = 0
    for mutated in mutations(text, rng, 400):
        try:
            document = cls.from_json(mutated)
        except sluice.InvalidInput as error:
            assert str(error)
            raised += 1
        else:  # a harmless edit (a space, a digit): what was read is a whole document
            assert cls.from_json(document.to_json()).to_json() == document.to_json()
    assert raised > 200
