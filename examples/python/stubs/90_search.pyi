
# ---- the hybrid-parallel search (Galvatron-BMW) ------------------------------------------------------------------

class LayerSpec:
    """One Transformer layer; params 0 means the dense layer's 4h² + 2h·ffn + 9h + ffn, forward_seconds 0 means analytic
    from FLOPs; micro_batch_seconds is the forward time a micro-batch adds beyond its samples'."""
    def __init__(self, *, type: str = "encoder", hidden: int = 0, heads: int = 0, ffn: int = 0, sequence: int = 0,
                 window: int = 0, params: int = 0, decoder: bool = False, forward_seconds: float = 0.0,
                 micro_batch_seconds: float = 0.0) -> None: ...
    @property
    def type(self) -> str: ...
    @type.setter
    def type(self, value: str) -> None: ...
    @property
    def hidden(self) -> int: ...
    @hidden.setter
    def hidden(self, value: int) -> None: ...
    @property
    def heads(self) -> int: ...
    @heads.setter
    def heads(self, value: int) -> None: ...
    @property
    def ffn(self) -> int: ...
    @ffn.setter
    def ffn(self, value: int) -> None: ...
    @property
    def sequence(self) -> int: ...
    @sequence.setter
    def sequence(self, value: int) -> None: ...
    @property
    def window(self) -> int: ...
    @window.setter
    def window(self, value: int) -> None: ...
    @property
    def params(self) -> int: ...
    @params.setter
    def params(self, value: int) -> None: ...
    @property
    def decoder(self) -> bool: ...
    @decoder.setter
    def decoder(self, value: bool) -> None: ...
    @property
    def forward_seconds(self) -> float: ...
    @forward_seconds.setter
    def forward_seconds(self, value: float) -> None: ...
    @property
    def micro_batch_seconds(self) -> float: ...
    @micro_batch_seconds.setter
    def micro_batch_seconds(self, value: float) -> None: ...
    @property
    def activation_bytes(self) -> dict[int, float]:
        """Profiled activation bytes per sample by TP degree (empty: Megatron's count). A copy."""
    @activation_bytes.setter
    def activation_bytes(self, value: Mapping[int, float]) -> None: ...
    @property
    def checkpoint_bytes(self) -> dict[int, float]:
        """Profiled bytes a checkpointed layer keeps per sample by TP degree (empty: its input). A copy."""
    @checkpoint_bytes.setter
    def checkpoint_bytes(self, value: Mapping[int, float]) -> None: ...
    @property
    def attention_span(self) -> int: ...
    @property
    def parameter_count(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...

class ModelSpec:
    """The layers of one Transformer, for the search."""
    def __init__(self, name: str, layers: Sequence[LayerSpec], *, embedding_params: int = 0, head_params: int = 0,
                 dtype_bytes: int = 2, state_bytes_per_param: float = 16.0) -> None:
        """Raises InvalidInput for a bad model."""
    @staticmethod
    def bundled(name: str) -> ModelSpec:
        """A bundled model by name ('gpt-48', 'bert-huge-32', …) or a sluice.model file."""
    @property
    def name(self) -> str: ...
    @name.setter
    def name(self, value: str) -> None: ...
    @property
    def layers(self) -> list[LayerSpec]:
        """A copy: assign the whole list to change it."""
    @layers.setter
    def layers(self, value: Sequence[LayerSpec]) -> None: ...
    @property
    def embedding_params(self) -> int: ...
    @embedding_params.setter
    def embedding_params(self, value: int) -> None: ...
    @property
    def head_params(self) -> int: ...
    @head_params.setter
    def head_params(self, value: int) -> None: ...
    @property
    def dtype_bytes(self) -> int: ...
    @dtype_bytes.setter
    def dtype_bytes(self, value: int) -> None: ...
    @property
    def state_bytes_per_param(self) -> float: ...
    @state_bytes_per_param.setter
    def state_bytes_per_param(self, value: float) -> None: ...
    @property
    def vocabulary_forward_seconds(self) -> float: ...
    @vocabulary_forward_seconds.setter
    def vocabulary_forward_seconds(self, value: float) -> None: ...
    @property
    def vocabulary_micro_batch_seconds(self) -> float: ...
    @vocabulary_micro_batch_seconds.setter
    def vocabulary_micro_batch_seconds(self, value: float) -> None: ...
    @property
    def embedding_activation_bytes(self) -> float: ...
    @embedding_activation_bytes.setter
    def embedding_activation_bytes(self, value: float) -> None: ...
    @property
    def head_activation_bytes(self) -> float: ...
    @head_activation_bytes.setter
    def head_activation_bytes(self, value: float) -> None: ...
    @property
    def single_stage_vocabulary_state_bytes(self) -> float: ...
    @single_stage_vocabulary_state_bytes.setter
    def single_stage_vocabulary_state_bytes(self, value: float) -> None: ...
    @property
    def single_stage_vocabulary_activation_bytes(self) -> float: ...
    @single_stage_vocabulary_activation_bytes.setter
    def single_stage_vocabulary_activation_bytes(self, value: float) -> None: ...
    def validate(self) -> None:
        """Raises InvalidInput for a bad model."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> ModelSpec: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> ModelSpec: ...

class LinkLevel:
    """Every aligned block of `size` consecutive ranks talks at `bandwidth` bytes/s."""
    def __init__(self, size: int, bandwidth: float) -> None: ...
    @property
    def size(self) -> int: ...
    @size.setter
    def size(self, value: int) -> None: ...
    @property
    def bandwidth(self) -> float: ...
    @bandwidth.setter
    def bandwidth(self, value: float) -> None: ...
    def __eq__(self, other: object) -> bool: ...

class CollectiveTime:
    """A measured collective: `size` consecutive ranks, `bytes` on each, `seconds`."""
    def __init__(self, size: int, bytes: float, seconds: float) -> None: ...
    @property
    def size(self) -> int: ...
    @size.setter
    def size(self, value: int) -> None: ...
    @property
    def bytes(self) -> float: ...
    @bytes.setter
    def bytes(self, value: float) -> None: ...
    @property
    def seconds(self) -> float: ...
    @seconds.setter
    def seconds(self, value: float) -> None: ...
    def __eq__(self, other: object) -> bool: ...

class ClusterSpec:
    """The GPUs of the search: memory, FLOP/s and nested link levels (innermost first)."""
    def __init__(self, name: str, gpus: int, memory_bytes: int, flops: float, levels: Sequence[LinkLevel], *,
                 reserved_bytes: int = 0, efficiency: float = 0.5, overlap_slowdown: float = 1.3) -> None:
        """Raises InvalidInput for a bad cluster."""
    @staticmethod
    def bundled(name: str) -> ClusterSpec:
        """A bundled cluster by name ('titan-8', 'a100-8', 'a100-64') or a sluice.cluster file."""
    @property
    def name(self) -> str: ...
    @name.setter
    def name(self, value: str) -> None: ...
    @property
    def gpus(self) -> int: ...
    @gpus.setter
    def gpus(self, value: int) -> None: ...
    @property
    def memory_bytes(self) -> int: ...
    @memory_bytes.setter
    def memory_bytes(self, value: int) -> None: ...
    @property
    def reserved_bytes(self) -> int: ...
    @reserved_bytes.setter
    def reserved_bytes(self, value: int) -> None: ...
    @property
    def flops(self) -> float: ...
    @flops.setter
    def flops(self, value: float) -> None: ...
    @property
    def efficiency(self) -> float: ...
    @efficiency.setter
    def efficiency(self, value: float) -> None: ...
    @property
    def overlap_slowdown(self) -> float: ...
    @overlap_slowdown.setter
    def overlap_slowdown(self, value: float) -> None: ...
    @property
    def levels(self) -> list[LinkLevel]:
        """A copy: assign the whole list to change it."""
    @levels.setter
    def levels(self, value: Sequence[LinkLevel]) -> None: ...
    @property
    def strided_levels(self) -> list[LinkLevel]:
        """Measured bandwidths of groups of `size` ranks at a stride; a size not listed communicates at its span's.
        A copy: assign the whole list to change it."""
    @strided_levels.setter
    def strided_levels(self, value: Sequence[LinkLevel]) -> None: ...
    @property
    def pipeline_levels(self) -> list[LinkLevel]:
        """Measured bandwidths between pipeline stages by PP degree (`size`); a degree not listed sends at the span of
        two stages'. A copy: assign the whole list to change it."""
    @pipeline_levels.setter
    def pipeline_levels(self, value: Sequence[LinkLevel]) -> None: ...
    @property
    def all_reduce_times(self) -> list[CollectiveTime]:
        """Measured all-reduces; where a group size is listed, TP's on consecutive ranks take them. A copy: assign
        the whole list to change it."""
    @all_reduce_times.setter
    def all_reduce_times(self, value: Sequence[CollectiveTime]) -> None: ...
    @property
    def all_to_all_times(self) -> list[CollectiveTime]:
        """Measured all-to-alls, for Ulysses SP likewise. A copy: assign the whole list to change it."""
    @all_to_all_times.setter
    def all_to_all_times(self, value: Sequence[CollectiveTime]) -> None: ...
    def bandwidth(self, span: int) -> float:
        """Bandwidth of a group spanning `span` consecutive ranks."""
    def validate(self) -> None:
        """Raises InvalidInput for a bad cluster."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> ClusterSpec: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> ClusterSpec: ...

class LayerStrategy:
    """One layer's strategy inside a stage of tp·sp·dp GPUs: sdp shards model states (ZeRO-3), zero2 gradients and
    optimizer states (ZeRO-2), sp > 1 splits each sample's sequence by Ulysses SP (tp then 1), tp_inner puts TP (or SP)
    on consecutive ranks, ckpt recomputes activations."""
    def __init__(self, *, tp: int = 1, dp: int = 1, sdp: bool = False, tp_inner: bool = True,
                 ckpt: bool = False, zero2: bool = False, sp: int = 1) -> None: ...
    @property
    def tp(self) -> int: ...
    @property
    def dp(self) -> int: ...
    @property
    def sdp(self) -> bool: ...
    @property
    def tp_inner(self) -> bool: ...
    @property
    def ckpt(self) -> bool: ...
    @property
    def zero2(self) -> bool: ...
    @property
    def sp(self) -> int: ...
    @property
    def group(self) -> int: ...
    @property
    def name(self) -> str:
        """'tp2*sdp4+ckpt', 'z2dp8', 'sp4*dp2': levels outer to inner."""
    def same_layout(self, other: LayerStrategy) -> bool: ...
    def __eq__(self, other: object) -> bool: ...

def stage_strategies(group: int, space: SpaceOptions = ..., heads_gcd: int = 0) -> list[LayerStrategy]:
    """The strategies a stage of `group` GPUs may use under `space`."""

def count_strategies(gpus: int, takeaway3: bool) -> int:
    """Strategies per layer over every PP degree, with and without CKPT."""

def baseline_spaces(gpus: int) -> list[tuple[str, SpaceOptions]]:
    """The limited spaces of the baselines (dp, sdp, tp, pp, dp+tp, dp+pp)."""

class SearchStagePlan:
    """One pipeline stage of a search plan."""
    def __eq__(self, other: object) -> bool: ...

class SearchPlan:
    """A hybrid-parallel plan: PP degree, global batch, micro-batches and per-stage layer strategies; `method` names the
    search that found it."""
    @property
    def partition(self) -> list[int]:
        """Layers per stage."""
    def validate(
        self,
        model: ModelSpec,
        cluster: ClusterSpec,
        *,
        options: SearchOptions = ...,
    ) -> None:
        """Raises InvalidPlan; a baseline's plan validates with its space from baseline_spaces in the options."""
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> SearchPlan: ...
    def __eq__(self, other: object) -> bool: ...

class SearchBaseline:
    """A baseline's best plan; None when nothing in its space fits."""
    @property
    def name(self) -> str: ...
    @property
    def plan(self) -> Optional[SearchPlan]: ...

class SearchReport:
    """Galvatron-BMW's plan, Galvatron-Base's and every baseline's."""
    @property
    def best(self) -> SearchPlan:
        """BMW's plan, never below Base"""
    @property
    def base(self) -> Optional[SearchPlan]:
        """Base's plan, never below a baseline within the space"""
    @property
    def baselines(self) -> list[SearchBaseline]: ...
    def validate(
        self,
        model: ModelSpec,
        cluster: ClusterSpec,
        *,
        options: SearchOptions = ...,
    ) -> None:
        """Raises InvalidPlan: every plan against its space, and BMW >= Base >= the baselines."""
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> SearchReport: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> SearchReport: ...

def search(
    model: ModelSpec,
    cluster: ClusterSpec,
    *,
    options: SearchOptions = ...,
) -> SearchReport:
    """Galvatron-BMW with Galvatron-Base and the baselines; raises Infeasible when nothing fits."""

def search_base(
    model: ModelSpec,
    cluster: ClusterSpec,
    *,
    options: SearchOptions = ...,
) -> Optional[SearchPlan]:
    """Galvatron-Base alone over the options' space (even partitions); None when nothing fits."""

def evaluate_search_plan(
    plan: SearchPlan,
    model: ModelSpec,
    cluster: ClusterSpec,
    *,
    options: SearchOptions = ...,
) -> SearchPlan:
    """The plan (PP degree, batch, micro-batches, partition, strategies) costed by the estimator under the options'
    schedule: every stage's times and memory, the iteration time and the throughput, whoever chose it. Raises
    InvalidInput when its partition or strategies do not fit the model and cluster."""

class PartitionAdjustment:
    """One accepted BMW partition move, with Eq. 6's balance degrees."""

class BalanceTrace:
    """BMW's partition search of one (batch, pp, micro-batches): p_m, p_t, the accepted moves and the best partition
    seen."""

def balance_trace(
    model: ModelSpec,
    cluster: ClusterSpec,
    pp: int,
    batch: int,
    micro_batches: int,
    *,
    options: SearchOptions = ...,
) -> BalanceTrace:
    """The BMW partition search of one (batch, pp, micro_batches), for inspection."""

def galvatron_inputs(
    directory: PathLike,
    model: ModelSpec,
    *,
    memory_bytes: int = 25769803776,
    time_mode: Literal["fixed", "batch", "sequence"] = "batch",
    sequence_parallel: bool = True,
    model_name: str = "",
    precision: str = "",
    nodes: int = 0,
    gpus_per_node: int = 0,
) -> tuple[ModelSpec, ClusterSpec]:
    """The model (`model`'s shape with Galvatron's profiled times, parameters and activations) and the cluster of
    a directory of Galvatron's profile files (or a bundled set: 'llama2-7b'); raises InvalidInput naming a bad
    file and key."""

class GalvatronPlan:
    """A plan Galvatron's search wrote, as sluice's search expresses it."""
    @property
    def plan(self) -> SearchPlan: ...
    @property
    def schedule(self) -> Literal["1f1b", "gpipe"]:
        """'1f1b' (Galvatron's pipedream_flush) or 'gpipe'."""

def read_galvatron_plan(path: PathLike, layers: int, gpus: int) -> GalvatronPlan:
    """The plan in Galvatron's galvatron_config_*.json for a model of `layers` layers on `gpus` GPUs; raises
    InvalidInput naming a bad field or layer."""

def even_partition(layers: int, stages: int) -> list[int]:
    """Layers per stage, the remainder on the deepest stages."""

def balance_degree(values: npt.ArrayLike) -> float:
    """Eq. 6: 1 − max / sum, in [0, 1 − 1/P]."""

def analytic_profile(
    model: ModelSpec,
    cluster: ClusterSpec,
    *,
    memory_bytes: int = 0,
    min_length: int = 256,
    max_length: int = 65536,
    granularity: int = 128,
    max_tp: int = 8,
) -> Profile:
    """A Profile from the analytic estimator, for planning where nothing was measured."""

def analytic_stage_time(model: ModelSpec, cluster: ClusterSpec, scheme: Scheme, length: int) -> float:
    """Seconds of one sequence on the slowest stage of the even partition."""

def analytic_stage_memory(model: ModelSpec, cluster: ClusterSpec, scheme: Scheme, length: int) -> float:
    """First-stage bytes of one sequence, with pp sequences in flight."""
