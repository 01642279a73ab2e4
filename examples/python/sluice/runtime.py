"""sluice.runtime: a PyTorch trainer runs sluice's plans across processes, one per GPU, pipelines of any ⟨TP, CP,
PP⟩ side by side, with or without recomputation, and a new strategy every step.

Each process runs its rank's instruction list of the step's plan through the library's interpreter
(``sluice.run_rank``, the code that validates and dry-runs plans), so the deadlock proof of the dry run covers what
runs: the interpreter calls back here to load a micro-batch, run a stage's forward or backward, and post or wait
for an activation or gradient sent with torch.distributed's isend/irecv. Inside a stage, its TP lanes run the
trainer's layers sharded as Megatron-LM shards a decoder (Shoeybi et al., "Megatron-LM", §3): QKV and gate|up
column-parallel, the attention output and down row-parallel, the embedding vocab-parallel and the LM head
column-parallel with a vocab-parallel cross-entropy; the norms replicated; with sequence parallelism between the
layers, as Megatron-LM runs it. A stage's CP lanes each hold their
shard of every micro-batch's tokens (``sluice.context_parallel.cp_shard``) and attend across their CP group by
ring, Ulysses or hybrid (USP) attention, as the pipeline's scheme says.

With ``adam``, the runtime is the optimizer: the masters and Adam's states stay sharded over all processes and each
step moves parameters and gradients by sluice's pull and push plans (``sluice.sharded``). Without, the trainer keeps
its whole model in every process (the parameters' masters); a step pulls each stage's shard of them, runs the plan,
and pushes every shard's gradient back into the masters' ``.grad``, summed over all processes (an idle pipeline's
ranks take part with zeros), so any optimizer then steps the masters as in one process.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence, Union

import torch
import torch.nn.functional as F
from torch import nn

from . import (FlexCpProblem, FlexDomains, FlexIteration, IterationPlan, IterationSchedule, PlacementOptions,
               Planned, Profile, flex_domain_ranks, flex_unit_plans, place, rank_placement, run_rank)
from .context_parallel import (FlexCPGroups, cp_shard, flex_cp_work, hybrid_attention, ring_attention,
                               ulysses_attention)
from .sharded import Adam, ShardedAdam, _sources
from .torch import IGNORE_INDEX, PackedMicroBatch, micro_batches, pack, process_groups, varlen_attention

__all__ = [
    "Adam",
    "FlexStep",
    "TensorParallel",
    "ColumnParallelLinear",
    "RowParallelLinear",
    "VocabParallelEmbedding",
    "vocab_parallel_cross_entropy",
    "replicated",
    "StageSpec",
    "StageBatch",
    "Runtime",
    "StepResult",
    "layer_split",
]


# ---- tensor parallelism ----------------------------------------------------------------------------------------


@dataclass
class TensorParallel:
    """A stage lane's TP group: its torch.distributed group (None when size is 1), this lane's TP rank and the
    group's size. With `sequence_parallel` (Korthikanti et al., "Reducing Activation Recomputation in Large
    Transformer Models", §4.2.2), activations between the TP layers are this lane's rows of the micro-batch's
    `rows` tokens (``row_bounds``), which the runtime sets before each pass: an all-gather brings the rows before a
    column-parallel layer and a reduce-scatter sums a row-parallel layer's (or the embedding's) partial results
    back to them; column-parallel layers fed the same input in a pass (gate and up) share one all-gather."""

    group: object = None
    rank: int = 0
    size: int = 1
    sequence_parallel: bool = False
    rows: int = 0
    _gathered: Optional[tuple] = field(default=None, repr=False, compare=False)

    def begin_pass(self, rows: int) -> None:
        """A forward or backward of a micro-batch of `rows` tokens begins: what its all-gathers bring together."""
        self.rows, self._gathered = rows, None

    def row_bounds(self, rows: int) -> list[int]:
        """Where each TP rank's rows of `rows` tokens begin, and the end: rank t holds
        [⌊t·rows/TP⌋, ⌊(t+1)·rows/TP⌋)."""
        return [t * rows // self.size for t in range(self.size + 1)]

    def share(self, extent: int, what: str) -> int:
        """Each rank's part of `extent` elements, which size must divide."""
        if extent % self.size:
            raise ValueError(f"sluice.runtime: TP {self.size} does not divide {what} ({extent})")
        return extent // self.size

    def part(self, extent: int, what: str) -> tuple[int, int]:
        """This rank's contiguous part [begin, end) of `extent` elements."""
        share = self.share(extent, what)
        return self.rank * share, (self.rank + 1) * share


def _all_reduce(tensor: torch.Tensor, tp: TensorParallel, op=None) -> torch.Tensor:
    """In place over the TP group; nothing for TP 1, whose group None would otherwise mean the whole world."""
    import torch.distributed as dist

    if tp.size > 1:
        dist.all_reduce(tensor, op=op or dist.ReduceOp.SUM, group=tp.group)
    return tensor


class _CopyToTensorParallel(torch.autograd.Function):
    """Identity forward; the backward sums the input's gradient over the TP group (every lane used the input)."""

    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad.contiguous().clone(), ctx.tp), None


class _ReduceFromTensorParallel(torch.autograd.Function):
    """Sums the lanes' partial results forward; the gradient passes to each lane unchanged."""

    @staticmethod
    def forward(ctx, x, tp):
        return _all_reduce(x.contiguous().clone(), tp)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _gather_rows(x: torch.Tensor, tp: TensorParallel, rows: int) -> torch.Tensor:
    """Every lane's rows, in order: all_gather needs equal parts, so each is padded to the largest."""
    import torch.distributed as dist

    if rows == 0:  # a CP rank without tokens of the micro-batch: every lane of its TP group has none
        return x
    bounds = tp.row_bounds(rows)
    width = max(end - begin for begin, end in zip(bounds, bounds[1:]))
    padded = x.new_zeros((width, *x.shape[1:]))
    padded[: len(x)] = x
    parts = [torch.empty_like(padded) for _ in range(tp.size)]
    dist.all_gather(parts, padded.contiguous(), group=tp.group)
    return torch.cat([part[: bounds[t + 1] - bounds[t]] for t, part in enumerate(parts)])


def _scatter_rows(x: torch.Tensor, tp: TensorParallel) -> torch.Tensor:
    """The lanes' sum, this lane's rows of it (an all-reduce then a slice: gloo has no reduce-scatter)."""
    bounds = tp.row_bounds(len(x))
    return _all_reduce(x.contiguous().clone(), tp)[bounds[tp.rank] : bounds[tp.rank + 1]]


class _GatherRows(torch.autograd.Function):
    """Sequence parallelism's all-gather of the lanes' rows; its backward sums the gradient and keeps this lane's."""

    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        return _gather_rows(x, tp, tp.rows)

    @staticmethod
    def backward(ctx, grad):
        return _scatter_rows(grad, ctx.tp), None


class _ScatterRows(torch.autograd.Function):
    """Sequence parallelism's reduce-scatter of partial results; its backward gathers the rows' gradients."""

    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp, ctx.rows = tp, len(x)
        return _scatter_rows(x, tp)

    @staticmethod
    def backward(ctx, grad):
        return _gather_rows(grad.contiguous(), ctx.tp, ctx.rows), None


def _copy_to(x, tp: TensorParallel):
    """The input of a column-parallel layer: whole on every lane."""
    if tp.size == 1:
        return x
    if not tp.sequence_parallel:
        return _CopyToTensorParallel.apply(x, tp)
    if tp._gathered is None or tp._gathered[0] is not x:  # the same input gathered once; autograd sums its uses
        tp._gathered = (x, _GatherRows.apply(x, tp))
    return tp._gathered[1]


def _reduce_from(x, tp: TensorParallel):
    """The lanes' partial results summed: whole on every lane, or this lane's rows under sequence parallelism."""
    if tp.size == 1:
        return x
    return _ScatterRows.apply(x, tp) if tp.sequence_parallel else _ReduceFromTensorParallel.apply(x, tp)


@dataclass(frozen=True)
class _Slice:
    """Where a stage's parameter comes from: master's elements `index` along `dim`, a TP split of `blocks` equal
    blocks each split alike (dim None: the whole master, replicated)."""

    master: nn.Parameter
    dim: Optional[int] = None
    index: Optional[torch.Tensor] = None
    blocks: int = 1


def _shard(source: nn.Parameter, dim: int, index: torch.Tensor, blocks: int = 1) -> nn.Parameter:
    """A parameter holding source's elements `index` along `dim`, linked to source for the pull and the push."""
    index = index.to(source.device)
    shard = nn.Parameter(source.detach().index_select(dim, index).clone())
    shard._sluice_source = _Slice(source, dim, index, blocks)
    return shard


def _block_rows(rows: int, blocks: int, tp: TensorParallel, what: str) -> torch.Tensor:
    """Rows of this TP rank when `rows` are `blocks` equal blocks (q|k|v, or one) each split over the TP ranks."""
    if rows % blocks:
        raise ValueError(f"sluice.runtime: {what} has {rows} rows, not {blocks} equal blocks")
    size = rows // blocks
    begin, end = tp.part(size, what)
    return torch.cat([torch.arange(b * size + begin, b * size + end) for b in range(blocks)])


class ColumnParallelLinear(nn.Module):
    """y = x·Wᵀ with W's output rows split over the TP group (each of `blocks` equal blocks of rows split alike, as
    a fused q|k|v projection's heads are); x is whole on every lane, y this lane's columns."""

    def __init__(self, weight: nn.Parameter, tp: TensorParallel, *, blocks: int = 1):
        super().__init__()
        self.tp = tp
        self.weight = _shard(weight, 0, _block_rows(weight.shape[0], blocks, tp, "a column-parallel weight"), blocks)

    def forward(self, x):
        return F.linear(_copy_to(x, self.tp), self.weight)


class RowParallelLinear(nn.Module):
    """y = x·Wᵀ with W's input columns split over the TP group: x is this lane's part of the features, y the sum
    over the lanes, whole on each."""

    def __init__(self, weight: nn.Parameter, tp: TensorParallel):
        super().__init__()
        self.tp = tp
        begin, end = tp.part(weight.shape[1], "a row-parallel weight's input")
        self.weight = _shard(weight, 1, torch.arange(begin, end))

    def forward(self, x):
        return _reduce_from(F.linear(x, self.weight), self.tp)


class VocabParallelEmbedding(nn.Module):
    """The embedding's rows split over the TP group: each lane looks up the tokens in its rows, zeros elsewhere,
    and the lanes' lookups are summed."""

    def __init__(self, weight: nn.Parameter, tp: TensorParallel):
        super().__init__()
        self.tp = tp
        self.begin, self.end = tp.part(weight.shape[0], "the vocabulary")
        self.weight = _shard(weight, 0, torch.arange(self.begin, self.end))

    def forward(self, tokens):
        if self.tp.size == 1:
            return F.embedding(tokens, self.weight)
        mine = (tokens >= self.begin) & (tokens < self.end)
        local = torch.where(mine, tokens - self.begin, torch.zeros_like(tokens))
        looked_up = F.embedding(local, self.weight) * mine.unsqueeze(-1).to(self.weight.dtype)
        return _reduce_from(looked_up, self.tp)


class _VocabParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, labels, begin, tp):
        import torch.distributed as dist

        # Each row's maximum, exp-sum and target logit reduced over the lanes; the full logits are never gathered.
        maximum = _all_reduce(logits.detach().max(dim=-1).values, tp, dist.ReduceOp.MAX)
        shifted = logits - maximum.unsqueeze(-1)
        exp = shifted.exp()
        exp_sum = _all_reduce(exp.sum(dim=-1), tp)
        valid = labels != IGNORE_INDEX
        local = labels - begin
        mine = valid & (local >= 0) & (local < logits.shape[-1])
        local = torch.where(mine, local, torch.zeros_like(local))
        target = _all_reduce(shifted.gather(-1, local.unsqueeze(-1)).squeeze(-1) * mine.to(logits.dtype), tp)
        loss = (exp_sum.log() - target) * valid.to(logits.dtype)
        ctx.save_for_backward(exp, exp_sum, local, mine, valid)
        return loss

    @staticmethod
    def backward(ctx, grad):
        exp, exp_sum, local, mine, valid = ctx.saved_tensors
        softmax = exp / exp_sum.unsqueeze(-1)
        softmax.scatter_add_(-1, local.unsqueeze(-1), -mine.to(softmax.dtype).unsqueeze(-1))
        return softmax * (grad * valid.to(grad.dtype)).unsqueeze(-1), None, None, None


def vocab_parallel_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, tp: TensorParallel,
                                 vocab_begin: int = 0) -> torch.Tensor:
    """Per-token cross-entropy of logits whose vocabulary columns [vocab_begin, vocab_begin + logits.shape[-1]) are
    this lane's (a column-parallel LM head's); 0 where labels are IGNORE_INDEX."""
    return _VocabParallelCrossEntropy.apply(logits, labels, vocab_begin, tp)


def replicated(module: nn.Module) -> nn.Module:
    """A copy of `module` whose every parameter is whole on each lane (a norm): its gradient is pushed once per TP
    group, since every lane computes the same one, or from every lane under sequence parallelism, where each lane's
    is the part of its rows."""
    copied = copy.deepcopy(module)
    for (_, source), (_, parameter) in zip(module.named_parameters(), copied.named_parameters()):
        parameter._sluice_source = _Slice(source)
    return copied


# ---- stages ------------------------------------------------------------------------------------------------------


def layer_split(layers: int, stages: int) -> list[int]:
    """Stage boundaries of `layers` layers over `stages` stages, the first ones one layer more where they do not
    divide (the C++ executor's split)."""
    if stages < 1 or layers < stages:
        raise ValueError(f"sluice.runtime: {layers} layers cannot fill {stages} pipeline stages")
    bounds = [0]
    for j in range(stages):
        bounds.append(bounds[-1] + layers // stages + (j < layers % stages))
    return bounds


@dataclass(frozen=True)
class StageSpec:
    """What one lane of one stage runs: layers [layer_begin, layer_end) of the trainer's stack, the embedding when
    first, the final norm and LM head when last, sharded over `tp`; with `recompute`, each layer keeps only its
    input for the backward, which runs its forward again (full activation recomputation)."""

    layer_begin: int
    layer_end: int
    first: bool
    last: bool
    tp: TensorParallel
    recompute: bool = False


@dataclass
class StageBatch:
    """A lane's part of one micro-batch: its tokens (its CP rank's shard of them, or all), their positions within
    their sequences and next-token labels, and ``attend(q, k, v)``: causal attention within each sequence of the
    whole micro-batch, for this lane's rows of q, k and v (varlen attention, or ring, Ulysses or hybrid attention
    across the stage's CP group)."""

    tokens: torch.Tensor
    positions: torch.Tensor
    labels: torch.Tensor
    loss_normaliser: int
    attend: Callable


@dataclass
class StepResult:
    """One step: its loss (the iteration's, summed over all processes), the strategy it ran, and this rank's
    instruction timings ((start, end) seconds; empty on an idle rank)."""

    loss: float
    strategy: str
    timings: list[tuple[float, float]] = field(default_factory=list)


@dataclass
class _CpLane:
    """How a lane shares a micro-batch's tokens: CP degree, its CP rank, the kind and the groups (the hybrid's
    Ulysses degree and its Ulysses and ring groups)."""

    degree: int = 1
    rank: int = 0
    kind: str = "ring"
    group: object = None
    ulysses: int = 1
    ulysses_group: object = None
    ring_group: object = None


@dataclass
class _Role:
    pipeline: int  # the plan's pipeline, or the flex domain's unit
    stage: int
    spec: StageSpec
    cp: _CpLane = field(default_factory=_CpLane)


@dataclass(frozen=True)
class FlexStep:
    """A flex CP domain's iteration to run: the FlexIteration (``SimulatedIteration.flex``), the batch's
    FlexCpProblem on that domain (``FlexDomain.problem_of(lengths)``) and the ids of the problem's sequences, in its
    order."""

    iteration: FlexIteration
    problem: FlexCpProblem
    ids: Sequence[int]


@dataclass
class _Work:
    """What one step runs: the strategy's name (the caches' key), its shard placement over the model's layers, this
    rank's role (None: in no stage), whether it computes, run_rank's pipelines and compute groups, and this lane's
    micro-batches (made once the stage is known to compute)."""

    name: str
    placement: object
    role: Optional[_Role]
    busy: bool
    pipelines: list
    compute_groups: list
    batches: Callable[[], list]


class Runtime:
    """Runs each step's plan in this process, one of torch.distributed's world, one per GPU of the plan.

    model: the trainer's whole model, the masters every step pulls from and pushes gradients to.
    build_stage(model, spec) -> nn.Module: one lane of a stage (StageSpec), built from the model's parameters with
    this module's TP layers, ``replicated`` copies for the norms. Its forward(x, batch) takes the lane's tokens
    (first stage) or the previous stage's activations, and the lane's StageBatch (positions, ``attend``), and
    returns activations (n, hidden) or, on the last stage, this lane's logits (n, vocab/TP).
    layers, hidden: the model's layer count and width. profile: the cluster the plans are for (its GPUs are the
    processes). sequence_parallel: TP lanes hold their rows of the activations between layers and send only those
    to the next stage, so that activations divide by TP as the planners' memory model assumes (Hydraulis App. B.1).
    adam: with it, the runtime is the optimizer: the masters and Adam's states stay sharded over all processes
    (sluice.sharded), each step pulls the stages' parameters from them and pushes the gradients back by executing
    sluice's pull and push plans, then steps Adam on each process's segments; ``gather_parameters`` writes the
    masters back into the model. Without it, each step leaves the gradients summed in the model's ``.grad`` for any
    optimizer. build_stage must then build any layer alone, and the first and last stages of one layer (at TP 1), from
    which the runtime learns which of the model's parameters each stage holds. flex: the flex CP domains the Planner
    was given (Planner(flex=)), for the steps whose plan runs one.
    """

    def __init__(self, model: nn.Module, build_stage: Callable[[nn.Module, StageSpec], nn.Module], *, layers: int,
                 hidden: int, profile: Profile, sequence_parallel: bool = True, timeout=None,
                 adam: Optional[Adam] = None, flex: Optional[FlexDomains] = None):
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("sluice.runtime: torch.distributed is not initialised (init_process_group)")
        self.model = model
        self.build_stage = build_stage
        self.layers = layers
        self.hidden = hidden
        self.profile = profile
        self.timeout = timeout
        self.sequence_parallel = sequence_parallel
        self.flex = flex
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self._groups = {}  # strategy or flex domain name -> its placement and this process's groups
        self._stages = {}  # (name, pipeline or unit, stage) -> this lane's stage module
        self._sharded = ShardedAdam(model, build_stage, layers, adam, StageSpec, TensorParallel) if adam else None

    # -- one step ---------------------------------------------------------------------------------------------------

    def step(self, plan: Union[Planned, IterationPlan, FlexStep], sequences,
             schedule: Optional[IterationSchedule] = None, device=None) -> StepResult:
        """Runs one iteration's plan on `sequences` (token tensors by sequence id): a Planner's item (its pipelines,
        or the flex CP domain it runs, of the Runtime's `flex`), an IterationPlan with its IterationSchedule, or a
        FlexStep. With `adam`, it then steps Adam; without, it leaves the summed gradients in the model's .grad."""
        import torch.distributed as dist

        if isinstance(plan, Planned) and plan.simulated.runs_flex:
            plan = self._flex_step(plan)
        if isinstance(plan, FlexStep):
            work = self._flex_work(plan, sequences, device)
        else:
            if isinstance(plan, Planned):
                plan, schedule = plan.simulated.plan, plan.simulated.schedule
            if schedule is None:
                raise ValueError("sluice.runtime: an IterationPlan needs its IterationSchedule")
            work = self._pipeline_work(plan, schedule, sequences, device)
        role = work.role
        loss = torch.zeros((), dtype=torch.float64)
        timings, stage, move = [], None, None
        if work.busy:
            stage = self._stage(work.name, role)
        tp = role.spec.tp if role is not None else TensorParallel()
        if self._sharded is not None:
            move = self._sharded.move(work.name, work.placement, stage, tp.rank, tp.size, tp.sequence_parallel)
            try:
                self._sharded.pull(move)
            except RuntimeError as error:
                raise RuntimeError(f"sluice.runtime: rank {self.rank}: the parameter pull failed: {error}") from error
        if work.busy:
            runner = _Runner(stage, role.spec, work.batches(), self.hidden)
            timings = run_rank(work.pipelines, work.compute_groups, self.rank, runner)
            loss += runner.loss
        try:
            if move is not None:
                self._sharded.push_and_step(move)
            else:
                self._push(stage, tp)
            dist.all_reduce(loss)
        except RuntimeError as error:  # a peer gone: said once, with this rank
            raise RuntimeError(f"sluice.runtime: rank {self.rank}: the gradient push failed: {error}") from error
        return StepResult(float(loss), work.name, timings)

    @property
    def optimizer_elements(self) -> int:
        """With `adam`: the master elements this process keeps (and as many of each Adam moment), its
        ``sharded_layout`` share of the model; without: 0, the trainer's optimizer keeps them."""
        return self._sharded.master.numel() if self._sharded is not None else 0

    def gather_parameters(self):
        """With `adam`: every master whole into the model's parameters, in every process (each process must call
        it). Without: nothing to do, the model's parameters are the masters."""
        if self._sharded is not None:
            self._sharded.gather()

    def _stage_layers(self, pp: int) -> list[int]:
        bounds = layer_split(self.layers, pp)
        return [end - begin for begin, end in zip(bounds, bounds[1:])]

    def _stage(self, name: str, role: _Role) -> nn.Module:
        key = (name, role.pipeline, role.stage)
        if key not in self._stages:
            built = self.build_stage(self.model, role.spec)
            _sources(built, "the stage")  # every parameter a slice of the model's, or TypeError
            self._stages[key] = built
        stage = self._stages[key]
        if self._sharded is not None:  # the pull is a layout move
            return stage
        with torch.no_grad():  # the pull: this lane's shard of the masters as they are now
            for parameter in stage.parameters():
                piece = parameter._sluice_source
                whole = piece.dim is None
                parameter.copy_(piece.master if whole else piece.master.index_select(piece.dim, piece.index))
                parameter.grad = None
        return stage

    # -- pipelines --------------------------------------------------------------------------------------------------

    def _pipeline_work(self, iteration: IterationPlan, schedule: IterationSchedule, sequences, device) -> _Work:
        name = iteration.strategy.name
        if name not in self._groups:
            if iteration.strategy.gpus != self.world:
                raise ValueError(f"sluice.runtime: strategy {name} needs {iteration.strategy.gpus} processes, "
                                 f"torch.distributed has {self.world}")
            placement = rank_placement(iteration.strategy, self.profile)
            self._groups[name] = (placement, process_groups(placement, timeout=self.timeout),
                                  self._shard_placement(iteration, placement))
        placement, groups, layers_placement = self._groups[name]
        role = self._role(iteration, placement, groups)
        pipelines, compute_groups = [], []
        for p, scheduled in enumerate(schedule.pipelines):
            if scheduled is None:
                continue
            placed = placement.placement.pipelines[placement.plan_order[p]]
            table = [list(stage.ranks) for stage in placed.stages]
            pipelines.append((scheduled.schedule.plan, table))
            for lanes in table:
                if len(lanes) > 1:
                    compute_groups += [[(rank, m) for rank in lanes]
                                       for m in range(scheduled.schedule.plan.micro_batches)]
        busy = role is not None and schedule.pipelines[role.pipeline] is not None

        def batches():
            packed = micro_batches(iteration, sequences, pipeline=role.pipeline, device=device)
            return [_lane_batch(batch, role.cp) for batch in packed]

        return _Work(name, layers_placement, role, busy, pipelines, compute_groups, batches)

    def _role(self, plan: IterationPlan, placement, groups) -> Optional[_Role]:
        import torch.distributed as dist

        for p, pipeline in enumerate(plan.pipelines):
            placed = placement.placement.pipelines[placement.plan_order[p]]
            for j, stage in enumerate(placed.stages):
                if self.rank not in stage.ranks:
                    continue
                scheme = pipeline.scheme
                lane = list(stage.ranks).index(self.rank)
                tp = TensorParallel(groups.tp if scheme.tp > 1 else None, lane % scheme.tp, scheme.tp,
                                    self.sequence_parallel and scheme.tp > 1)
                bounds = layer_split(self.layers, scheme.pp)
                spec = StageSpec(bounds[j], bounds[j + 1], j == 0, j + 1 == scheme.pp, tp, scheme.recompute)
                role = _Role(p, j, spec)
                if scheme.cp > 1:
                    # Lane l of every stage must hold the same tokens: CP rank l / TP is the ring's rank l / TP.
                    cp_rank = lane // scheme.tp
                    kind = {1: "ring", scheme.cp: "ulysses"}.get(scheme.ulysses, "hybrid")
                    role.cp = _CpLane(scheme.cp, cp_rank, kind, groups.cp)
                    placed_ranks = [(groups.cp, cp_rank)]
                    if kind == "hybrid":
                        role.cp.ulysses, role.cp.ulysses_group, role.cp.ring_group = (scheme.ulysses, groups.ulysses,
                                                                                      groups.ring)
                        placed_ranks += [(groups.ulysses, cp_rank % scheme.ulysses),
                                         (groups.ring, cp_rank // scheme.ulysses)]
                    for group, expected in placed_ranks:
                        if dist.get_rank(group) != expected:
                            raise RuntimeError(f"sluice.runtime: rank {self.rank} is CP rank {cp_rank} of its "
                                               f"stage, rank {dist.get_rank(group)} of a group where it should be "
                                               f"{expected}")
                return role
        return None

    def _shard_placement(self, plan: IterationPlan, placement):
        """The strategy's placement over the model's layers, stages split as layer_split splits them, on the ranks
        rank_placement gave it."""
        parts = {pipeline.scheme.pp for pipeline in placement.placement.pipelines}
        options = PlacementOptions(gpus_per_node=placement.gpus_per_node, tp_within_node=placement.tp_within_node,
                                   stage_layers={pp: self._stage_layers(pp) for pp in parts})
        layers = place(plan.strategy, self.world, self.layers, options=options)
        ranks = [[list(stage.ranks) for stage in pipeline.stages] for pipeline in layers.pipelines]
        if ranks != [[list(stage.ranks) for stage in pipeline.stages] for pipeline in placement.placement.pipelines]:
            raise RuntimeError(f"sluice.runtime: strategy {plan.strategy.name} places differently over the model's "
                               f"{self.layers} layers than over the profile's")
        return layers

    # -- flex CP domains --------------------------------------------------------------------------------------------

    def _flex_step(self, planned: Planned) -> FlexStep:
        flex = planned.simulated.flex
        if self.flex is None:
            raise ValueError("sluice.runtime: this step's plan runs a flex CP domain: give the Runtime the Planner's "
                             "FlexDomains (flex=)")
        if flex.domain >= len(self.flex.domains):
            raise ValueError(f"sluice.runtime: the plan runs flex CP domain {flex.domain} of "
                             f"{len(self.flex.domains)}")
        problem = self.flex.domains[flex.domain].problem_of(planned.lengths)
        return FlexStep(flex, problem, planned.ids.tolist())

    def _flex_work(self, step: FlexStep, sequences, device) -> _Work:
        """Every unit of the domain a pipeline of the base ⟨TP, PP⟩ scheme on the plan's micro-batches it takes part
        in (flex_unit_plans); each micro-batch's CP groups formed from the domain's pool (FlexCPGroups)."""
        iteration, problem = step.iteration, step.problem
        domain = iteration.strategy
        part = domain.parts[0]
        base, units = part.scheme, part.pipelines
        degrees = [degree.degree for degree in problem.degrees]
        name = f"{domain.name} flex"
        key = (name, tuple(degrees))
        if key not in self._groups:
            if domain.gpus != self.world:
                raise ValueError(f"sluice.runtime: flex CP domain {domain.name} needs {domain.gpus} processes, "
                                 f"torch.distributed has {self.world}")
            placement = flex_domain_ranks(domain, self.profile, layers=self.layers,
                                          stage_layers=self._stage_layers(base.pp))
            groups = process_groups(placement, timeout=self.timeout)
            pool = None
            for ranks in placement.groups.cp:  # one pool per (stage, TP shard); every process makes every one
                made = FlexCPGroups(units, degrees, ranks=list(ranks), timeout=self.timeout)
                pool = made if self.rank in ranks else pool
            self._groups[key] = (placement, groups, pool)
        placement, groups, pool = self._groups[key]
        tp_degree = base.tp
        stages = placement.placement.pipelines[0].stages

        def rank_of(unit, stage, shard):
            return stages[stage].ranks[unit * tp_degree + shard]

        role, unit = None, None
        bounds = layer_split(self.layers, base.pp)
        for j, stage in enumerate(stages):
            if self.rank in stage.ranks:
                lane = list(stage.ranks).index(self.rank)
                unit = lane // tp_degree
                tp = TensorParallel(groups.tp if tp_degree > 1 else None, lane % tp_degree, tp_degree,
                                    self.sequence_parallel and tp_degree > 1)
                role = _Role(unit, j, StageSpec(bounds[j], bounds[j + 1], j == 0, j + 1 == base.pp, tp,
                                                base.recompute))
        unit_plans = flex_unit_plans(iteration, problem)
        pipelines, compute_groups = [], []
        for u, (kept, plan) in enumerate(unit_plans):
            if plan is not None:
                pipelines.append((plan, [[rank_of(u, j, t) for t in range(tp_degree)] for j in range(base.pp)]))
        for m, micro_batch in enumerate(iteration.plan.micro_batches):
            for group in micro_batch.groups:  # its units' lanes compute the micro-batch together, stage by stage
                members = range(group.first_unit, group.first_unit + iteration.schemes[group.degree_index].cp)
                for j in range(base.pp):
                    together = [(rank_of(u, j, t), unit_plans[u][0].index(m)) for u in members
                                for t in range(tp_degree)]
                    if len(together) > 1:
                        compute_groups.append(together)
        busy = role is not None and unit_plans[unit][1] is not None

        def batches():
            kinds = {degree.degree: scheme for degree, scheme in zip(problem.degrees, iteration.schemes)}
            normaliser = int(problem.lengths.sum()) - len(problem.lengths)
            lanes = []
            for work in flex_cp_work(problem, iteration.plan, unit):
                if work is None:
                    continue
                scheme = kinds[work.degree]
                kind = {1: "ring", scheme.cp: "ulysses"}.get(scheme.ulysses, "hybrid")
                if kind == "hybrid":
                    raise ValueError(f"sluice.runtime: a flex CP group runs {scheme.name}; its pool forms ring and "
                                     "Ulysses groups, not the hybrid's")
                packed = pack(sequences, [step.ids[s] for s in work.sequences], loss_normaliser=normaliser,
                              device=device)
                lanes.append(_lane_batch(packed, _CpLane(work.degree, work.rank, kind, pool.group(work))))
            return lanes

        return _Work(name, placement.placement, role, busy, pipelines, compute_groups, batches)

    def _push(self, stage: Optional[nn.Module], tp: TensorParallel):
        """Every stage gradient into its master's .grad, summed over all processes in the model's order."""
        import torch.distributed as dist

        masters = list(self.model.parameters())
        sums = {id(p): torch.zeros_like(p) for p in masters}
        for parameter in stage.parameters() if stage is not None else ():
            if parameter.grad is None:
                continue
            piece = parameter._sluice_source
            if piece.dim is not None:
                sums[id(piece.master)].index_add_(piece.dim, piece.index, parameter.grad)
            elif tp.rank == 0 or tp.sequence_parallel:  # else every TP lane holds the same gradient
                sums[id(piece.master)] += parameter.grad
        # One all-reduce per dtype and device, not one per tensor: dozens of small collectives a step otherwise.
        buckets = {}
        for p in masters:
            buckets.setdefault((p.dtype, p.device), []).append(p)
        for bucket in buckets.values():
            flat = torch.cat([sums[id(p)].flatten() for p in bucket])
            dist.all_reduce(flat)
            for p, part in zip(bucket, flat.split([p.numel() for p in bucket])):
                p.grad = part.view_as(p)


def _lane_batch(packed: PackedMicroBatch, cp: _CpLane) -> StageBatch:
    if cp.degree == 1:
        def attend(q, k, v):
            return varlen_attention(q, k, v, packed.cu_seqlens, packed.max_seqlen)

        return StageBatch(packed.tokens, packed.positions, packed.labels, packed.loss_normaliser, attend)
    cu_seqlens = packed.cu_seqlens.cpu()
    shard = cp_shard(cu_seqlens, cp.degree, cp.rank, ulysses=cp.ulysses)

    def attend(q, k, v):
        if cp.kind == "hybrid":
            return hybrid_attention(q, k, v, cu_seqlens, ulysses_group=cp.ulysses_group, ring_group=cp.ring_group)
        attention = ulysses_attention if cp.kind == "ulysses" else ring_attention
        return attention(q, k, v, cu_seqlens, group=cp.group)

    tokens, positions, labels = (shard.select(t) for t in (packed.tokens, packed.positions, packed.labels))
    return StageBatch(tokens, positions, labels, packed.loss_normaliser, attend)


class _Runner:
    """The interpreter's callbacks for one lane: slots hold tensors; a forward keeps its input and output for the
    backward."""

    def __init__(self, stage, spec: StageSpec, batches: Sequence[StageBatch], hidden: int):
        self.stage, self.spec, self.hidden = stage, spec, hidden
        self.batches = batches
        parameter = next(stage.parameters())
        self.dtype, self.device = parameter.dtype, parameter.device
        self.slots = {}
        self.saved = {}
        self.works = {}
        self.loss = torch.zeros((), dtype=torch.float64)

    def load_input(self, micro_batch, slot):
        self.slots[slot] = self.batches[micro_batch].tokens

    def _rows(self, micro_batch) -> tuple[int, int]:
        """This lane's rows of the micro-batch's activations between stages: all of them, or its TP rank's."""
        tp, rows = self.spec.tp, len(self.batches[micro_batch].tokens)
        if not tp.sequence_parallel:
            return 0, rows
        bounds = tp.row_bounds(rows)
        return bounds[tp.rank], bounds[tp.rank + 1]

    def forward(self, micro_batch, input_slot, output_slot):
        batch = self.batches[micro_batch]
        self.spec.tp.begin_pass(len(batch.tokens))
        x = self.slots[input_slot]
        if not self.spec.first:
            x = x.detach().requires_grad_()
        y = self.stage(x, batch)
        if self.spec.last:
            tp = self.spec.tp
            begin = tp.rank * y.shape[-1]
            losses = vocab_parallel_cross_entropy(y, batch.labels, tp, begin)
            y = losses.sum() / batch.loss_normaliser
            if tp.rank == 0:  # every lane of the TP group holds the same loss
                self.loss += y.detach().double()
        else:
            self.slots[output_slot] = y.detach()
        self.saved[micro_batch] = (x, y)

    def backward(self, micro_batch, gradient_slot, output_slot):
        self.spec.tp.begin_pass(len(self.batches[micro_batch].tokens))  # a recomputed forward gathers again
        x, y = self.saved.pop(micro_batch)
        y.backward() if gradient_slot < 0 else y.backward(self.slots[gradient_slot])
        if output_slot >= 0:
            self.slots[output_slot] = x.grad

    def post(self, transfer):
        import torch.distributed as dist

        if transfer.send:
            self.works[transfer.index] = dist.isend(self.slots[transfer.slot].contiguous(), transfer.peer)
        else:
            begin, end = self._rows(transfer.micro_batch)  # this lane's rows, as its peer lane's
            self.slots[transfer.slot] = torch.empty(end - begin, self.hidden, dtype=self.dtype, device=self.device)
            self.works[transfer.index] = dist.irecv(self.slots[transfer.slot], transfer.peer)

    def wait(self, transfer):
        self.works.pop(transfer.index).wait()
