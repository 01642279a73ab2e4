"""Shared fixtures: the command-line tool the bindings are checked against, and the bundled inputs."""
import json
import os
import subprocess

import numpy as np
import pytest

import sluice


@pytest.fixture
def cli():
    """Runs `sluice ARGS... --json` (the tool at $SLUICE_CLI) and returns its parsed JSON document."""
    tool = os.environ.get("SLUICE_CLI")
    if not tool:
        pytest.skip("SLUICE_CLI is not set: no command-line tool to compare with")

    def run(*args, cwd=None):
        output = subprocess.run([tool, *map(str, args), "--json"], check=True, capture_output=True, cwd=cwd)
        return json.loads(output.stdout)

    return run


@pytest.fixture(scope="session")
def profile_64():
    return sluice.Profile.bundled("llama2-32b", gpus=64)


@pytest.fixture(scope="session")
def batch_64():
    """A 200K-token batch of the bundled cpython-stdlib lengths, within what llama2-32b's schemes hold."""
    dataset = sluice.LengthDataset.bundled("cpython-stdlib").truncated(32768)
    return sluice.BatchSampler(dataset, tokens_per_batch=200_000, seed=5).next()


CANDIDATES_64 = ["4*tp16pp1", "1*tp16pp1+6*tp8pp1", "8*tp8pp1", "2*tp16pp1+4*tp4pp2"]


def without_header(document):
    """A JSON document without its format and version fields, as the tool embeds it in a larger one."""
    return {key: value for key, value in document.items() if key not in ("format", "version")}


def json_of(result):
    return json.loads(result.to_json())


def assert_close_json(actual, expected, rel=1e-9, path="$"):
    """Equal JSON trees, integers and strings exactly, floats within `rel`."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), f"{path}: keys differ"
        for key in expected:
            assert_close_json(actual[key], expected[key], rel, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{path}: lengths differ"
        for index, (a, e) in enumerate(zip(actual, expected)):
            assert_close_json(a, e, rel, f"{path}[{index}]")
    elif isinstance(expected, float) or isinstance(actual, float):
        assert np.isclose(actual, expected, rtol=rel, atol=0), f"{path}: {actual} != {expected}"
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"
