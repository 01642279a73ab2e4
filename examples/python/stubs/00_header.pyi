from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, Optional, Sequence, Union, overload

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
PathLike = Union[str, os.PathLike[str]]
StrategyLike = Union["Strategy", str]
# What a Planner's source may yield: a sampler's Batch, a lengths array, or an (ids, lengths) pair.
BatchLike = Union["Batch", npt.ArrayLike, tuple[npt.ArrayLike, npt.ArrayLike]]

__version__: str

class InvalidInput(ValueError):
    """Input that violates a documented precondition; the message names the field and the value."""

class Infeasible(RuntimeError):
    """A well-formed problem with no solution (no strategy fits the GPUs, say)."""

class InvalidPlan(RuntimeError):
    """A plan that breaks one of its invariants, found by a validator."""
