
# ---- option structs shared by several functions: immutable, compared by value, picklable -----------------------------

class DispatchOptions:
    """How a batch is dispatched across pipelines (Hydraulis' Alg. 1): random orders tried, worker threads, seed, local
    search, the longest-first order and whether the V step is charged. Immutable; raises InvalidInput on a bad
    value."""
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
    def seed(self) -> int:
        """Trial t orders the batch with a stream of this seed"""
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
    """How a pipeline is scheduled: kind (cyclic: DynaPipe's search over injection orders, which may keep 1F1B; or
    1f1b), the k-means seed and clusters (injection-order groups, 0 to 6; 0: 3 when there are more than 20
    micro-batches, else 4). Immutable; raises InvalidInput on a bad value."""
    def __init__(self, *, kind: str = "cyclic", seed: int = 1, clusters: int = 0) -> None: ...
    @property
    def kind(self) -> str:
        """'cyclic' or '1f1b'"""
    @property
    def seed(self) -> int:
        """The k-means seed"""
    @property
    def clusters(self) -> int:
        """Injection-order groups, 0 to 6; 0: chosen by the batch"""
    def __eq__(self, other: object) -> bool: ...

class ProblemOptions:
    """How a simulated pipeline moves activations: hidden (elements per token of a boundary tensor), element_bytes, the
    stage-to-stage link's latency (s) and bandwidth (bytes/s; inf: free) and backward_ratio (backward seconds per
    forward second). Immutable; raises InvalidInput on a bad value."""
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
    def hidden(self) -> int:
        """Elements per token of a boundary tensor"""
    @property
    def element_bytes(self) -> int:
        """Bytes per element"""
    @property
    def latency(self) -> float:
        """The stage-to-stage link's latency, seconds"""
    @property
    def bandwidth(self) -> float:
        """The stage-to-stage link's bandwidth, bytes/s; inf: free"""
    @property
    def backward_ratio(self) -> float:
        """Backward seconds per forward second"""
    def __eq__(self, other: object) -> bool: ...

class PlanOptions:
    """How the sluice plan is made: the dispatch (its v_step left at its default: `v_step` chooses), how pipelines are
    scheduled, how activations move between stages, what each candidate is charged for its parameter pull and
    gradient push (layout_moves: none, exposed or all) and whether the dispatch charges the V step (v_step: best, on
    or off). Immutable; raises InvalidInput on a bad value."""
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
    def dispatch(self) -> DispatchOptions:
        """How each candidate's dispatch is made"""
    @property
    def schedule(self) -> ScheduleOptions:
        """How pipelines are scheduled"""
    @property
    def problem(self) -> ProblemOptions:
        """How activations move between stages"""
    @property
    def layout_moves(self) -> str:
        """What a candidate is charged for its pull and push: 'none', 'exposed' or 'all'"""
    @property
    def v_step(self) -> str:
        """Whether the dispatch charges the V step: 'best', 'on' or 'off'"""
    def __eq__(self, other: object) -> bool: ...

class ProposeOptions:
    """How Hydraulis' proposal is made: gpus (default: the profile's cluster), max_len (Lmax; default: the dataset's
    longest sequence), the length grid, the GPU budget and replica steps (tenths), the relaxation, tokens per
    iteration, the cost model's terms, TP within a node and the candidates kept. A proposal's own has gpus and
    max_len resolved. Immutable; raises InvalidInput on a bad value (propose checks the rest against the dataset and
    profile)."""
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
    def gpus(self) -> Optional[int]:
        """N; None: the profile's cluster"""
    @property
    def max_len(self) -> Optional[int]:
        """Lmax; None: the dataset's longest sequence"""
    @property
    def length_step(self) -> int:
        """The length grid's step"""
    @property
    def gpu_step(self) -> int:
        """Tenths of a GPU"""
    @property
    def relaxed(self) -> bool:
        """Also run the continuous relaxation and round its solutions"""
    @property
    def replica_step(self) -> int:
        """Tenths of a pipeline"""
    @property
    def tokens_per_iteration(self) -> float:
        """Scales the dataset's counts to one iteration"""
    @property
    def sequence_constant(self) -> bool:
        """Charge c per sequence (else as Eq. 2 does)"""
    @property
    def fill_term(self) -> bool:
        """Charge (PP - 1)·T(longest) per interval"""
    @property
    def tp_within_node(self) -> bool:
        """Only schemes with TP <= the profile's gpus_per_node"""
    @property
    def max_candidates(self) -> int:
        """At most this many candidates"""
    def __eq__(self, other: object) -> bool: ...

class SampledOptions:
    """How the sampled proposal judges its pool: batches it chooses on and held-out batches it only measures (each of
    the ProposeOptions' tokens_per_iteration tokens, drawn with `seed`), the dispatch each (strategy, batch) is
    planned with, and the pool's cap (>= max_candidates). Immutable; raises InvalidInput on a bad value."""
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
    """How pipelines are placed on ranks: GPUs per node, TP within a node, the order of the pipelines' rank blocks
    ('tp_descending' or 'tp_ascending') and stage_layers (a PP degree to its layers per stage; absent degrees split
    evenly). Immutable; raises InvalidInput on a bad value (place checks the stage sums against the model's layers)."""
    def __init__(
        self,
        *,
        gpus_per_node: int = 8,
        tp_within_node: bool = True,
        order: str = "tp_descending",
        stage_layers: dict[int, Sequence[int]] = {},
    ) -> None: ...
    @property
    def gpus_per_node(self) -> int:
        """GPUs in a node"""
    @property
    def tp_within_node(self) -> bool:
        """Keep each TP group within a node"""
    @property
    def order(self) -> str:
        """'tp_descending' or 'tp_ascending'"""
    @property
    def stage_layers(self) -> dict[int, list[int]]:
        """A PP degree to its layers per stage; absent degrees split evenly"""
    def __eq__(self, other: object) -> bool: ...

class SpaceOptions:
    """Which paradigms the per-layer search may use (zero2: ZeRO-2 data parallelism, ulysses: Ulysses SP in TP's
    place); pp_degrees [] means every power of 2, max_tp and max_pp 0 no limit. Immutable; raises InvalidInput on a
    bad value (the search checks pp_degrees against the cluster)."""
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
    def dp(self) -> bool:
        """Data parallelism"""
    @property
    def sdp(self) -> bool:
        """Sharded data parallelism"""
    @property
    def tp(self) -> bool:
        """Tensor parallelism"""
    @property
    def ckpt(self) -> bool:
        """Activation checkpointing"""
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
    """How Galvatron-BMW searches: memory_bytes per device (0: the device memory), the layer DP's memory step, the
    global batch (0: the sweep batch_step, 2·batch_step, … up to max_batch), the schedule ('1f1b' or 'gpipe') and
    the space. Immutable; raises InvalidInput on a bad value (the search checks the rest against the model and
    cluster)."""
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
    def batch_step(self) -> int:
        """The sweep's step"""
    @property
    def max_batch(self) -> int:
        """The sweep's largest batch"""
    @property
    def schedule(self) -> str:
        """'1f1b' or 'gpipe'"""
    @property
    def space(self) -> SpaceOptions:
        """Which paradigms the per-layer search may use"""
    def __eq__(self, other: object) -> bool: ...
