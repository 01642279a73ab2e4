
# ---- option structs shared by several functions: immutable, compared by value, picklable -----------------------------

class DispatchOptions:
    """How a batch is dispatched across pipelines: orders tried, threads, seed, local search, LPT order, V step."""
    def __init__(
        self,
        *,
        trials: int = 100,
        threads: int = 1,
        seed: int = 0,
        local_search: bool = True,
        longest_first: bool = True,
        v_step: bool = True,
    ) -> None: ...
    @property
    def trials(self) -> int:
        """Random orders tried by the greedy; >= 1"""
    @property
    def threads(self) -> int:
        """Workers sharing the trials; the result does not depend on it"""
    @property
    def seed(self) -> int: ...
    @property
    def local_search(self) -> bool:
        """Improve the best trial with moves and swaps"""
    @property
    def longest_first(self) -> bool:
        """Also try the longest-first order"""
    @property
    def v_step(self) -> bool:
        """Charge the V step (Eq. 2's second term)"""
    def __eq__(self, other: object) -> bool: ...

class ScheduleOptions:
    """How a pipeline is scheduled: kind ('cyclic' or '1f1b'), the k-means seed and clusters (0 to 6; 0: auto)."""
    def __init__(self, *, kind: str = "cyclic", seed: int = 1, clusters: int = 0) -> None: ...
    @property
    def kind(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def clusters(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...

class ProblemOptions:
    """How a simulated pipeline moves activations: hidden, element bytes, the link, the backward ratio."""
    def __init__(
        self,
        *,
        hidden: int = 1,
        element_bytes: int = 2,
        latency: float = 0.0,
        bandwidth: float = ...,
        backward_ratio: float = 2.0,
    ) -> None: ...
    @property
    def hidden(self) -> int: ...
    @property
    def element_bytes(self) -> int: ...
    @property
    def latency(self) -> float: ...
    @property
    def bandwidth(self) -> float: ...
    @property
    def backward_ratio(self) -> float: ...
    def __eq__(self, other: object) -> bool: ...

class PlanOptions:
    """How the sluice plan is made: dispatch, schedule, problem, layout moves charged and V step."""
    def __init__(
        self,
        *,
        dispatch: DispatchOptions = ...,
        schedule: ScheduleOptions = ...,
        problem: ProblemOptions = ...,
        layout_moves: str = "exposed",
        v_step: str = "best",
    ) -> None: ...
    @property
    def dispatch(self) -> DispatchOptions: ...
    @property
    def schedule(self) -> ScheduleOptions: ...
    @property
    def problem(self) -> ProblemOptions: ...
    @property
    def layout_moves(self) -> str: ...
    @property
    def v_step(self) -> str: ...
    def __eq__(self, other: object) -> bool: ...

class ProposeOptions:
    """How the proposal is made: gpus, max_len (None: resolved by propose), grid and steps (tenths), cost terms."""
    def __init__(
        self,
        *,
        gpus: Optional[int] = None,
        max_len: Optional[int] = None,
        length_step: int = 128,
        gpu_step: int = 10,
        relaxed: bool = False,
        replica_step: int = 1,
        tokens_per_iteration: float = 100000.0,
        sequence_constant: bool = True,
        fill_term: bool = True,
        tp_within_node: bool = True,
        max_candidates: int = 8,
    ) -> None: ...
    @property
    def gpus(self) -> Optional[int]: ...
    @property
    def max_len(self) -> Optional[int]: ...
    @property
    def length_step(self) -> int: ...
    @property
    def gpu_step(self) -> int:
        """Tenths of a GPU."""
    @property
    def relaxed(self) -> bool: ...
    @property
    def replica_step(self) -> int:
        """Tenths of a pipeline."""
    @property
    def tokens_per_iteration(self) -> float: ...
    @property
    def sequence_constant(self) -> bool: ...
    @property
    def fill_term(self) -> bool: ...
    @property
    def tp_within_node(self) -> bool: ...
    @property
    def max_candidates(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...

class SampledOptions:
    """How the sampled proposal judges its pool: choosing and held-out batches, seed, dispatch, pool cap."""
    def __init__(
        self,
        *,
        choosing_batches: int = 48,
        held_out_batches: int = 32,
        seed: int = 0,
        dispatch: DispatchOptions = ...,
        max_pool: int = 256,
    ) -> None: ...
    @property
    def choosing_batches(self) -> int:
        """Batches the set is chosen on"""
    @property
    def held_out_batches(self) -> int:
        """The next batches, which only measure"""
    @property
    def seed(self) -> int:
        """The batch sampler's"""
    @property
    def dispatch(self) -> DispatchOptions:
        """How every (strategy, batch) is planned"""
    @property
    def max_pool(self) -> int:
        """Pool cap, >= max_candidates"""
    def __eq__(self, other: object) -> bool: ...

class PlacementOptions:
    """How pipelines are placed on ranks: GPUs per node, TP within a node, block order, layers per stage."""
    def __init__(
        self,
        *,
        gpus_per_node: int = 8,
        tp_within_node: bool = True,
        order: str = "tp_descending",
        stage_layers: Optional[dict[int, Sequence[int]]] = None,
    ) -> None: ...
    @property
    def gpus_per_node(self) -> int: ...
    @property
    def tp_within_node(self) -> bool: ...
    @property
    def order(self) -> str:
        """'tp_descending' or 'tp_ascending'."""
    @property
    def stage_layers(self) -> dict[int, list[int]]: ...
    def __eq__(self, other: object) -> bool: ...
