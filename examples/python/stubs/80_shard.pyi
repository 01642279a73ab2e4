
# ---- optimization–propagation disaggregation: placements, layouts, pull and push plans, their cost, ranks --------

# The structured dtypes of PullPlan/PushPlan.pieces and .sends/.local_moves:
#   pieces:   (block: int32, begin: int64, end: int64)
#   messages: (src: int32, dst: int32, first_piece: uint32, piece_count: uint32, bytes: int64); messages of one
#   source with equal pieces share them
StructArray = npt.NDArray[np.void]

class ShardTensor:
    """One parameter tensor of a layer: its elements per layer."""
    def __init__(self, name: str, elements: int) -> None: ...
    @property
    def name(self) -> str: ...
    @name.setter
    def name(self, value: str) -> None: ...
    @property
    def elements(self) -> int: ...
    @elements.setter
    def elements(self, value: int) -> None: ...
    def __eq__(self, other: object) -> bool: ...

class ShardModel:
    """The parameters pull and push move: `layers` identical layers of `tensors`."""
    def __init__(self, name: str, layers: int, tensors: Sequence[ShardTensor], *, param_bytes: int = 2,
                 grad_bytes: int = 2) -> None:
        """Raises InvalidInput for a bad model."""
    @staticmethod
    def llama_like(profile: Profile) -> ShardModel:
        """The profile's model as LLaMA-style layers (fused QKV, attention output, gate+up, down)."""
    @property
    def name(self) -> str: ...
    @name.setter
    def name(self, value: str) -> None: ...
    @property
    def layers(self) -> int: ...
    @layers.setter
    def layers(self, value: int) -> None: ...
    @property
    def tensors(self) -> list[ShardTensor]:
        """A copy: assign the whole list to change it."""
    @tensors.setter
    def tensors(self, value: Sequence[ShardTensor]) -> None: ...
    @property
    def param_bytes(self) -> int: ...
    @param_bytes.setter
    def param_bytes(self, value: int) -> None: ...
    @property
    def grad_bytes(self) -> int: ...
    @grad_bytes.setter
    def grad_bytes(self, value: int) -> None: ...
    @property
    def layer_elements(self) -> int: ...
    @property
    def max_tensor_elements(self) -> int: ...
    def validate(self) -> None:
        """Raises InvalidInput for a bad model."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> ShardModel: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> ShardModel: ...

class ShardCluster:
    """Nodes of gpus_per_node GPUs; local, intra-node and inter-node links (default: A800 nodes with one 200 Gb/s NIC
    per GPU)."""
    def __init__(self, *, gpus_per_node: int = 8, local: Link = ..., intra_node: Link = ...,
                 inter_node: Link = ...) -> None: ...
    @property
    def gpus_per_node(self) -> int: ...
    @gpus_per_node.setter
    def gpus_per_node(self, value: int) -> None: ...
    @property
    def local(self) -> Link: ...
    @local.setter
    def local(self, value: Link) -> None: ...
    @property
    def intra_node(self) -> Link: ...
    @intra_node.setter
    def intra_node(self, value: Link) -> None: ...
    @property
    def inter_node(self) -> Link: ...
    @inter_node.setter
    def inter_node(self, value: Link) -> None: ...
    def validate(self) -> None: ...
    def to_json(self, indent: int = 2) -> str:
        """As `sluice shard --json` writes it under 'cluster'."""
    @staticmethod
    def from_json(text: str) -> ShardCluster: ...
    def __eq__(self, other: object) -> bool: ...

class PlacementStage:
    """Layers [layer_begin, layer_end); CP rank c's TP rank t is GPU ranks[c*TP + t] and holds the fraction [t/TP,
    (t+1)/TP) of every parameter."""
    @property
    def layer_begin(self) -> int: ...
    @property
    def layer_end(self) -> int: ...
    @property
    def ranks(self) -> list[int]: ...
    def __eq__(self, other: object) -> bool: ...

class PipelinePlacement:
    """One pipeline: its scheme and pp stages."""
    def __eq__(self, other: object) -> bool: ...

class Placement:
    """Where a strategy runs: per pipeline, per stage, the GPU of every (CP rank, TP rank)."""
    def validate(self) -> None:
        """Raises InvalidPlan."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> Placement: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> Placement: ...

class OwnerGroup:
    """For layers [layer_begin, layer_end), segment r of every parameter lives on owners[r]."""
    def __init__(self, layer_begin: int, layer_end: int, owners: Sequence[int]) -> None: ...
    def __eq__(self, other: object) -> bool: ...

class OptimizerLayout:
    """Where the optimizer states live: owner groups tiling the layers."""
    def __init__(self, gpus: int, layers: int, groups: Sequence[OwnerGroup]) -> None: ...
    def validate(self) -> None:
        """Raises InvalidPlan."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> OptimizerLayout: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> OptimizerLayout: ...

def place(
    strategy: StrategyLike,
    gpus: int,
    layers: int,
    *,
    options: PlacementOptions = ...,
) -> Placement:
    """Pipelines on contiguous rank blocks in options.order; raises Infeasible if it does not fit."""

def sharded_layout(gpus: int, layers: int) -> OptimizerLayout:
    """Hydraulis' layout: every parameter sharded over all GPUs, segment r on GPU r."""

def aligned_layout(placement: Placement) -> OptimizerLayout:
    """The layout a push under `placement` leaves behind."""

def holder_placement(placement: Placement, held_by: Literal["every_stage", "first_stage", "last_stage"], *,
                     replicated: bool) -> Placement:
    """Where a group of tensors other than the layers' TP-split weights is held: one layer on every pipeline's first
    or last stage, or the layers'; replicated, every lane a replica of TP 1. Raises InvalidInput for another held_by."""

class SliceBlock:
    """Layers [layer_begin, layer_end), every tensor cut into `granularity` mutual slices."""
    def __eq__(self, other: object) -> bool: ...

class RsGroup:
    """The reduce-scatter of one TP-grid segment of a block over one rank per pipeline and CP rank."""
    def __eq__(self, other: object) -> bool: ...

class PullPlan:
    """16-bit parameters from the optimizer layout into the propagation placement."""
    @property
    def gpus(self) -> int: ...
    @property
    def blocks(self) -> list[SliceBlock]: ...
    @property
    def pieces(self) -> StructArray:
        """Structured view (block, begin, end): mutual slices [begin, end) of block `block`."""
    @property
    def sends(self) -> StructArray:
        """Structured view (src, dst, first_piece, piece_count, bytes): pieces[first_piece:first_piece + piece_count]
        from src to dst; messages of one source with equal pieces share them."""
    @property
    def local_moves(self) -> StructArray:
        """Structured view (src, dst, first_piece, piece_count, bytes): pieces[first_piece:first_piece + piece_count]
        from src to dst; messages of one source with equal pieces share them."""
    @property
    def send_bytes(self) -> int: ...
    @property
    def local_bytes(self) -> int: ...
    def validate(self, placement: Placement, layout: OptimizerLayout, model: ShardModel) -> None:
        """Raises InvalidPlan naming the first broken invariant."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> PullPlan: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> PullPlan: ...

class PushPlan:
    """Gradients reduce-scattered across the pipelines, then sent to their optimizer owners."""
    @property
    def gpus(self) -> int: ...
    @property
    def grid(self) -> int:
        """G: the LCM of the TP degrees"""
    @property
    def pipelines(self) -> int: ...
    @property
    def blocks(self) -> list[SliceBlock]: ...
    @property
    def rs_groups(self) -> list[RsGroup]: ...
    @property
    def pieces(self) -> StructArray:
        """Structured view (block, begin, end): mutual slices [begin, end) of block `block`."""
    @property
    def sends(self) -> StructArray:
        """Structured view (src, dst, first_piece, piece_count, bytes): pieces[first_piece:first_piece + piece_count]
        from src to dst; messages of one source with equal pieces share them."""
    @property
    def local_moves(self) -> StructArray:
        """Structured view (src, dst, first_piece, piece_count, bytes): pieces[first_piece:first_piece + piece_count]
        from src to dst; messages of one source with equal pieces share them."""
    @property
    def send_bytes(self) -> int: ...
    @property
    def local_bytes(self) -> int: ...
    def validate(self, placement: Placement, layout: OptimizerLayout, model: ShardModel) -> None:
        """Raises InvalidPlan naming the first broken invariant."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> PushPlan: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> PushPlan: ...

def plan_pull(placement: Placement, layout: OptimizerLayout, model: ShardModel) -> PullPlan:
    """The pull: per block, mutual slices from their optimizer owners to the TP ranks that hold them."""

def plan_push(placement: Placement, layout: OptimizerLayout, model: ShardModel, *,
              match_owners: bool = True) -> PushPlan:
    """The push: reduce-scatter across the pipelines, then every summed piece to its optimizer owner."""

def check_pull(plan: PullPlan, placement: Placement, layout: OptimizerLayout, model: ShardModel, *,
               seed: int = 0) -> None:
    """Runs the pull on host buffers; tiny models only (about 27 · gpus · layers · layer_elements bytes)."""

def check_push(plan: PushPlan, placement: Placement, layout: OptimizerLayout, model: ShardModel, *,
               seed: int = 0) -> None:
    """Runs the push on host buffers; tiny models only (about 45 · gpus · layers · layer_elements bytes)."""

class LinkBytes:
    """Bytes moved per link class."""
    @property
    def total(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...

class PhaseCost:
    """One phase: bytes per link class, messages, α–β seconds."""
    def __eq__(self, other: object) -> bool: ...

class ShardCost:
    """The pull, the push's reduce-scatter and the push's LNK."""
    @property
    def pull(self) -> PhaseCost: ...
    @property
    def reduce_scatter(self) -> PhaseCost: ...
    @property
    def push(self) -> PhaseCost: ...
    @property
    def seconds(self) -> float:
        """The three phases back to back: what the LNK adds when none of it overlaps computation."""
    def to_json(self, indent: int = 2) -> str:
        """As `sluice shard --json` writes it under 'cost'."""
    def __eq__(self, other: object) -> bool: ...

def plan_cost(pull: PullPlan, push: PushPlan, cluster: ShardCluster = ...) -> ShardCost:
    """Bytes per link class and α–β time of each phase."""

def iteration_cost(
    layout: OptimizerLayout,
    candidate: StrategyLike,
    model: ShardModel,
    cluster: ShardCluster = ...,
    *,
    options: PlacementOptions = ...,
) -> ShardCost:
    """plan_cost of the candidate's pull and push against `layout`, without storing the pull's messages."""

def iteration_costs(
    layout: OptimizerLayout,
    candidates: Sequence[StrategyLike],
    model: ShardModel,
    cluster: ShardCluster = ...,
    *,
    options: PlacementOptions = ...,
) -> FloatArray:
    """Per candidate, iteration_cost(...).seconds: plan_iteration's candidate_overhead."""

def switching_cost(
    previous: StrategyLike,
    candidate: StrategyLike,
    gpus: int,
    model: ShardModel,
    cluster: ShardCluster = ...,
    *,
    options: PlacementOptions = ...,
) -> ShardCost:
    """iteration_cost when the optimizer states follow `previous`'s aligned layout."""

class ProcessGroups:
    """The groups every rank joins, as lists of global ranks; pipelines in plan order."""
    @property
    def tp(self) -> list[list[int]]:
        """Per (plan pipeline, stage, CP rank): its TP group, shard 0 first."""
    @property
    def pp(self) -> list[list[int]]:
        """Per (plan pipeline, CP rank, TP shard): its ranks, stage 0 first (the send/recv neighbours)."""
    @property
    def dp(self) -> list[list[int]]:
        """Per (scheme, stage, TP shard): the ranks of that shard in every pipeline and CP rank of the scheme."""
    @property
    def cp(self) -> list[list[int]]:
        """Per (plan pipeline with CP, stage, TP shard): the ranks sharing its sequences; empty without CP."""
    def __eq__(self, other: object) -> bool: ...

class RankPlacement:
    """The global rank of every (pipeline, stage, CP rank, TP shard) and the process groups."""
    @property
    def placement(self) -> Placement:
        """shard placement: pipelines in canonical order"""
    @property
    def gpus_per_node(self) -> int: ...
    @property
    def tp_within_node(self) -> bool: ...
    @property
    def plan_order(self) -> list[int]:
        """plan_order[j]: the placement pipeline that runs pipeline j of an IterationPlan."""
    @property
    def groups(self) -> ProcessGroups: ...
    def validate(self, strategy: StrategyLike, profile: Profile) -> None:
        """Raises InvalidPlan naming the first broken invariant."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> RankPlacement: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> RankPlacement: ...

def rank_placement(strategy: StrategyLike, profile: Profile, *, tp_within_node: bool = True) -> RankPlacement:
    """The strategy's ranks on the profile's cluster and the process groups, as `sluice plan --json` gives them."""

def flex_domain_ranks(domain: StrategyLike, profile: Profile, *, tp_within_node: bool = True,
                      layers: Optional[int] = None, stage_layers: Optional[Sequence[int]] = None) -> RankPlacement:
    """The ranks of a flex CP domain, placed as the one CP pipeline ⟨TP, CP = units, PP⟩ its groups re-form within;
    over `layers` (default: the profile model's), `stage_layers` per PP stage (default: even).

    groups.cp: per (stage, TP shard), every unit's rank in unit order, the `ranks` of that pool's FlexCPGroups;
    groups.tp and groups.pp: each unit's."""
