
# ---- planning ahead of the trainer ----------------------------------------------------------------------------

class Planned:
    """One iteration delivered by a Planner: its index, batch and plan."""
    @property
    def iteration(self) -> int: ...
    @property
    def ids(self) -> IntArray: ...
    @property
    def lengths(self) -> IntArray: ...
    @property
    def plan(self) -> IterationPlan: ...

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
    """Plans iterations i+1 … i+lookahead on worker threads while the trainer runs iteration i."""
    def __init__(
        self,
        profile: Profile,
        candidates: Sequence[StrategyLike],
        source: Iterable[BatchLike],
        *,
        lookahead: int = 2,
        threads: int = 1,
        trials: int = 100,
        dispatch_threads: int = 1,
        seed: int = 0,
        local_search: bool = True,
        longest_first: bool = True,
        v_step: bool = True,
        candidate_overhead: Optional[npt.ArrayLike] = None,
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
