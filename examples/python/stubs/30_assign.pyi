
# ---- the per-iteration plan (Hydraulis) ------------------------------------------------------------------------

class MicroBatch:
    """A packed micro-batch: its sequences' ids, tokens, seconds."""
    def __eq__(self, other: object) -> bool: ...

class PipelinePlan:
    """One pipeline's micro-batches, in execution order."""
    @property
    def sequence_ids(self) -> list[IntArray]:
        """Per micro-batch, its sequence ids (copies; micro_batches[k].sequence_ids are views)."""
    def __eq__(self, other: object) -> bool: ...

class CandidateEstimate:
    """One candidate strategy of an iteration plan: its estimated seconds for the batch and the overhead it is charged."""

class IterationPlan:
    """One iteration: the chosen strategy and, per pipeline, its micro-batches."""
    @property
    def total(self) -> float: ...
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
    dispatch: DispatchOptions = ...,
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

# ---- CP groups per micro-batch (FlexSP, ASPLOS'25; assign/flex_cp.hpp) ----------------------------------------------

class FlexCpDegree:
    """One group size of a flex CP domain's pool."""
    def __init__(self, degree: int, latency: QuadraticLatency, capacity: int, length_multiple: int = 1,
                 last_stage: LastStageWork = ...) -> None: ...
    @property
    def degree(self) -> int:
        """Units sharing each sequence of such a group"""
    @property
    def latency(self) -> QuadraticLatency:
        """One stage's time of one sequence in such a group"""
    @property
    def capacity(self) -> int:
        """The most charged tokens one group holds"""
    @property
    def length_multiple(self) -> int:
        """Lengths are charged rounded up to this (2·R for a ring of R)"""
    @property
    def last_stage(self) -> LastStageWork:
        """The last stage's own work on a group's charged tokens; the other stages run the group's time less it"""

class FlexCpGroup:
    """One CP group of a micro-batch and its sequences."""
    def __eq__(self, other: object) -> bool: ...

class FlexCpMicroBatch:
    """One micro-batch's groups, widest first."""
    @property
    def groups(self) -> list[FlexCpGroup]: ...
    def __eq__(self, other: object) -> bool: ...

class FlexCpProblem:
    """An iteration's sequences on `units` replicas of one ⟨TP, PP⟩ pipeline, re-formed into CP groups per
    micro-batch."""
    def __init__(
        self,
        lengths: npt.ArrayLike,
        units: int,
        pp: int,
        degrees: Sequence[FlexCpDegree],
        *,
        one_degree_per_micro_batch: bool = False,
        collective_seconds: float = 0.0,
        backward_ratio: float = 2.0,
    ) -> None:
        """Raises InvalidInput unless the problem is well formed."""
    @property
    def lengths(self) -> IntArray:
        """The iteration's sequences (a read-only view)"""
    @property
    def units(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def degrees(self) -> list[FlexCpDegree]:
        """Ascending, each dividing the next and the units"""
    @property
    def one_degree_per_micro_batch(self) -> bool:
        """Megatron-LM's dynamic CP: one CP size per micro-batch"""
    @property
    def collective_seconds(self) -> float:
        """C: one collective every micro-batch runs over all units beside its compute (ZeRO-3's); 0 for none"""
    @property
    def backward_ratio(self) -> float:
        """Backward over forward compute: how a micro-batch's time splits between the passes"""
    def group_seconds(self, group: FlexCpGroup) -> float:
        """c_d + Σ a_d·l² + b_d·l."""
    def micro_batch_seconds(self, micro_batch: FlexCpMicroBatch) -> float:
        """Its slowest group's seconds T, or max(T_f, C) + max(T_b, 2·C) where the collectives outlast a pass."""
    def lower_bound(self) -> float:
        """No plan of the problem is faster (s)."""

class FlexCpPlan:
    """One iteration's micro-batches of CP groups."""
    @property
    def micro_batches(self) -> list[FlexCpMicroBatch]:
        """Slowest first"""
    @property
    def seconds(self) -> float:
        """The iteration: Σ over micro-batches + (PP − 1) × the slowest"""
    @property
    def lower_bound(self) -> float: ...
    def check(self, problem: FlexCpProblem) -> None:
        """Raises InvalidPlan naming the first broken invariant against the problem."""
    def __eq__(self, other: object) -> bool: ...

def solve_flex_cp(problem: FlexCpProblem, *, targets: int = 32, improvement_rounds: int = 8) -> FlexCpPlan:
    """The fast flex CP solver: micro-batches of CP groups minimising the iteration, with its lower bound."""

def solve_flexsp(problem: FlexCpProblem) -> FlexCpPlan | None:
    """The problem planned as FlexSP's authors plan it; None when no micro-batch count can be grouped on every unit."""

def flex_cp_problem(
    profile: Profile,
    base: Scheme,
    units: int,
    lengths: npt.ArrayLike,
    *,
    cp_kinds: Sequence[str] = ("ring", "ulysses", "hybrid"),
    powers_of_two: bool = False,
) -> FlexCpProblem:
    """The problem of `lengths` on `units` replicas of `base` (a ⟨TP, PP⟩ scheme of `profile`)."""
