
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

class SpaceOptions:
    """Which paradigms the per-layer search may use (zero2: ZeRO-2 data parallelism, ulysses: Ulysses SP in TP's
    place); pp_degrees [] means every power of 2, max_tp and max_pp 0 no limit."""
    def __init__(
        self,
        *,
        dp: bool = True,
        sdp: bool = True,
        tp: bool = True,
        ckpt: bool = True,
        tp_outer: bool = True,
        pp_degrees: Sequence[int] = [],
        max_tp: int = 0,
        zero2: bool = False,
        max_pp: int = 0,
        ulysses: bool = False,
    ) -> None: ...
    @property
    def dp(self) -> bool: ...
    @property
    def sdp(self) -> bool: ...
    @property
    def tp(self) -> bool: ...
    @property
    def ckpt(self) -> bool: ...
    @property
    def tp_outer(self) -> bool:
        """Allow TP (or SP) on the strided (outer) ranks"""
    @property
    def pp_degrees(self) -> list[int]:
        """[]: every power of 2 up to min(GPUs, layers)"""
    @property
    def max_tp(self) -> int:
        """0: no limit; TP (or SP) must also divide every layer's heads"""
    @property
    def zero2(self) -> bool:
        """ZeRO-2 data parallelism"""
    @property
    def max_pp(self) -> int:
        """0: no limit"""
    @property
    def ulysses(self) -> bool:
        """Ulysses sequence parallelism in TP's place"""
    def __eq__(self, other: object) -> bool: ...

class SearchOptions:
    """How Galvatron-BMW searches: memory per device, DP memory step, global batch or sweep, schedule, space."""
    def __init__(
        self,
        *,
        memory_bytes: int = 0,
        granularity_bytes: int = 16777216,
        global_batch: int = 0,
        batch_step: int = 8,
        max_batch: int = 1024,
        schedule: str = "1f1b",
        space: SpaceOptions = ...,
    ) -> None: ...
    @property
    def memory_bytes(self) -> int:
        """Per-device budget; 0: the cluster's device memory"""
    @property
    def granularity_bytes(self) -> int:
        """Memory step of the layer DP"""
    @property
    def global_batch(self) -> int:
        """0: sweep batch_step, 2·batch_step, … up to max_batch"""
    @property
    def batch_step(self) -> int: ...
    @property
    def max_batch(self) -> int: ...
    @property
    def schedule(self) -> str:
        """'1f1b' or 'gpipe'."""
    @property
    def space(self) -> SpaceOptions: ...
    def __eq__(self, other: object) -> bool: ...
