
# ---- the per-iteration plan (Hydraulis) ------------------------------------------------------------------------

class MicroBatch:
    """A packed micro-batch: its sequences' ids, tokens, seconds."""
    @property
    def sequence_ids(self) -> IntArray:
        """A read-only view into the plan (no copy)."""
    @property
    def tokens(self) -> int: ...
    @property
    def seconds(self) -> float: ...
    def __eq__(self, other: object) -> bool: ...

class PipelinePlan:
    """One pipeline's micro-batches, in execution order."""
    @property
    def index(self) -> int: ...
    @property
    def scheme(self) -> Scheme: ...
    @property
    def max_len(self) -> int: ...
    @property
    def micro_batches(self) -> list[MicroBatch]: ...
    @property
    def sequence_ids(self) -> list[IntArray]:
        """Per micro-batch, its sequence ids (copies; micro_batches[k].sequence_ids are views)."""
    @property
    def estimate(self) -> float: ...
    def __eq__(self, other: object) -> bool: ...

class CandidateEstimate:
    @property
    def strategy(self) -> Strategy: ...
    @property
    def estimate(self) -> Optional[float]:
        """None: cannot hold the batch's longest sequence."""
    @property
    def overhead(self) -> float: ...

class IterationPlan:
    """One iteration: the chosen strategy and, per pipeline, its micro-batches."""
    @property
    def strategy(self) -> Strategy: ...
    @property
    def pipelines(self) -> list[PipelinePlan]: ...
    @property
    def estimate(self) -> float:
        """Propagation time of the slowest pipeline (s)."""
    @property
    def overhead(self) -> float: ...
    @property
    def total(self) -> float: ...
    @property
    def dispatch_objective(self) -> float: ...
    @property
    def dispatch_lower_bound(self) -> float: ...
    @property
    def chosen(self) -> int: ...
    @property
    def candidates(self) -> list[CandidateEstimate]: ...
    def validate(self, lengths: npt.ArrayLike, profile: Profile, *, ids: Optional[npt.ArrayLike] = None) -> None:
        """Raises InvalidPlan naming the first broken invariant against the batch and profile."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> IterationPlan: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> IterationPlan: ...

def plan_iteration(
    lengths: npt.ArrayLike,
    candidates: Sequence[StrategyLike],
    profile: Profile,
    *,
    ids: Optional[npt.ArrayLike] = None,
    trials: int = 100,
    threads: int = 1,
    seed: int = 0,
    local_search: bool = True,
    longest_first: bool = True,
    v_step: bool = True,
    candidate_overhead: Optional[npt.ArrayLike] = None,
) -> IterationPlan:
    """Hydraulis' per-iteration routine: dispatch across each candidate's pipelines, pack, choose the best."""

def plan_fixed_length(
    lengths: npt.ArrayLike,
    strategy: StrategyLike,
    profile: Profile,
    *,
    capacity_tokens: int,
    ids: Optional[npt.ArrayLike] = None,
) -> IterationPlan:
    """The Megatron-LM-style baseline: fixed-length bins packed best-fit-decreasing, dealt round-robin."""
