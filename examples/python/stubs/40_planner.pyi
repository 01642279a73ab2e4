
# ---- the sluice plan, and planning ahead of the trainer ---------------------------------------------------------

class FlexAlternative:
    """A domain offered to the sluice plan beside its candidates."""

class FlexDomain(FlexAlternative):
    """Replicas of one ⟨TP, PP⟩ scheme whose CP groups re-form per micro-batch, offered to IterationPlanner beside its
    candidates; each batch solved by the flex CP solver."""
    def __init__(self, schemes: Sequence[Scheme], problem: FlexCpProblem, *, overhead: float = 0.0) -> None: ...
    @property
    def strategy(self) -> Strategy: ...
    @property
    def overhead(self) -> float: ...
    @property
    def schemes(self) -> list[Scheme]: ...
    def problem_of(self, lengths: npt.ArrayLike) -> FlexCpProblem:
        """The flex CP problem of the batch on this domain."""

class FlexDomains(FlexAlternative):
    """Several flex CP domains: each batch planned on every one that holds it, the fastest kept."""
    def __init__(self, domains: Sequence[FlexDomain]) -> None: ...
    @property
    def domains(self) -> list[FlexDomain]: ...

class IterationPlanner:
    """The sluice plan of one iteration, the one `sluice plan`, `sluice trace`, `sluice simulate` and Planner give:
    every candidate that holds the batch is dispatched and packed (two-stage assignment), its pipelines scheduled and it
    is charged its layout move; the lowest simulated makespan plus that charge is kept. The candidates' layout moves are
    computed once, when it is made."""
    def __init__(
        self,
        profile: Profile,
        candidates: Sequence[StrategyLike],
        options: PlanOptions = ...,
        *,
        flex: Optional[FlexAlternative] = None,
    ) -> None: ...
    def plan(self, lengths: npt.ArrayLike, *, ids: Optional[npt.ArrayLike] = None) -> SimulatedIteration: ...
    def validate(
        self, iteration: SimulatedIteration, lengths: npt.ArrayLike, *, ids: Optional[npt.ArrayLike] = None
    ) -> None:
        """Raises InvalidPlan unless `iteration` is this planner's valid plan of the batch."""
    @property
    def profile(self) -> Profile: ...
    @property
    def candidates(self) -> list[Strategy]: ...
    @property
    def options(self) -> PlanOptions: ...
    @property
    def layout_moves(self) -> FloatArray:
        """Per candidate, the seconds of its parameter pull and gradient push beyond its own layout's all-gather, before
        overlap (empty for none)."""
    @property
    def charged(self) -> FloatArray:
        """Per candidate, what its plans are charged for its layout move (empty for none)."""

class Planned:
    """One iteration delivered by a Planner: its index, batch and plan."""
    @property
    def iteration(self) -> int: ...
    @property
    def ids(self) -> IntArray: ...
    @property
    def lengths(self) -> IntArray: ...
    @property
    def plan(self) -> IterationPlan:
        """The kept candidate's plan: its pipelines' micro-batches."""
    @property
    def simulated(self) -> SimulatedIteration:
        """The whole SimulatedIteration: the plan, its schedule and every candidate's makespan."""

class PlannerWaits:
    """How long the consumer waited for plans."""
    @property
    def calls(self) -> int: ...
    @property
    def waited(self) -> int: ...
    @property
    def seconds(self) -> float: ...
    @property
    def last_seconds(self) -> float: ...
    @property
    def max_seconds(self) -> float: ...

class Planner(Iterator[Planned]):
    """Plans iterations i+1 … i+lookahead on worker threads while the trainer runs iteration i. Iterating yields Planned
    items in the source's order, each the sluice plan IterationPlanner(profile, candidates, options, flex=flex) gives
    its batch; a batch's planning error is raised at its iteration. `source` is an iterable of sluice.Batch, lengths
    arrays or (ids, lengths) pairs; it is called from a planner thread, one item at a time. close() (or leaving a `with`
    block) stops the threads at any point."""
    def __init__(
        self,
        profile: Profile,
        candidates: Sequence[StrategyLike],
        source: Iterable[BatchLike],
        options: PlanOptions = ...,
        *,
        lookahead: int = 2,
        threads: int = 1,
        flex: Optional[FlexAlternative] = None,
    ) -> None: ...
    def __iter__(self) -> Planner: ...
    def __next__(self) -> Planned: ...
    def close(self) -> None:
        """Stops the threads; idempotent."""
    @property
    def closed(self) -> bool: ...
    @property
    def waits(self) -> PlannerWaits: ...
    def __enter__(self) -> Planner: ...
    def __exit__(self, *args: object) -> None: ...

class SluiceFlexDomains:
    """The flex CP domains `sluice plan` and the comparison offer the sluice plan."""
    @property
    def domains(self) -> Optional[FlexDomains]:
        """FlexDomains for IterationPlanner(flex=) or Planner(flex=); None where no domain holds the context"""
    @property
    def names(self) -> list[str]:
        """Per domain, its name in the comparison (SimulatedIteration.flex.domain indexes it)"""
    @property
    def layout_moves(self) -> npt.NDArray[np.float64]:
        """Per domain, its layout move's seconds beyond its base's own all-gather, before overlap (a read-only view)"""
    @property
    def flexsp(self) -> bool:
        """Whether the first domain is FlexSP's (ZeRO-3, Ulysses)"""

def sluice_flex_domains(
    profile: Profile, *, context: int, planning: PlanOptions = ..., cross_node_tp: bool = False
) -> SluiceFlexDomains:
    """The flex CP domains `sluice plan` offers beside its candidates on `profile` for sequences up to `context`.

    FlexSP's ZeRO-3 domain, and on every ⟨TP, PP⟩ base Megatron-LM's dynamic CP domain and sluice's mixed-degree
    one, charged their layout move under `planning`'s policy. Pass `.domains` to IterationPlanner(flex=) with the
    same `planning` for the plan the tool makes."""
