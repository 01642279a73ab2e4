"""The optimization–propagation disaggregation of Hydraulis (Wang et al., "Hydraulis: Balancing Large Transformer
Model Training via Co-designing Parallel Strategies and Data Assignment", §5.2–5.3) on torch.distributed: the
master parameters and Adam's states of every tensor stay sharded over all processes in one fixed layout
(``sharded_layout``: segment r of every tensor on rank r), whatever strategy a step runs; each step *pulls* the
parameters into that strategy's stages by executing ``plan_pull``'s messages, and *pushes* the gradients back by
executing ``plan_push`` (the reduce-scatter across the replicas, then the link phase's messages to the owners), after
which every rank steps Adam on the segments it owns.

shard:: plans a stack of identical layers whose tensors split over TP. A trainer's model also has tensors only one
stage holds and tensors every TP lane holds whole, so its parameters move as up to six groups, each one shard::
problem on ``holder_placement``: the layers' TP-split tensors and their replicated ones (the norms), and the first
stage's and the last stage's split and replicated ones (the embedding; the final norm and the LM head). Every tensor is
moved as its *view*, a 1-D order along its TP split axis in which TP rank t of any TP degree holds the contiguous
fraction [⌊t·E/TP⌋, ⌊(t+1)·E/TP⌋).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch
from torch import nn

from . import ShardModel, ShardTensor, holder_placement, plan_pull, plan_push, sharded_layout

__all__ = ["Adam"]


@dataclass(frozen=True)
class Adam:
    """Adam (Kingma and Ba, Algorithm 1) with decoupled weight decay (Loshchilov and Hutter, "Decoupled Weight Decay
    Regularization"), as torch.optim.AdamW computes it, on each rank's owned segments; with `max_grad_norm`, the
    gradients are first scaled so that their global 2-norm is at most that, as torch.nn.utils.clip_grad_norm_ does."""

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    max_grad_norm: Optional[float] = None

    def __post_init__(self):
        def finite(value, low, what):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= low):
                raise ValueError(f"sluice.runtime.Adam: {what} must be a finite number >= {low}, got {value!r}")

        finite(self.lr, 0, "lr")
        finite(self.eps, 0, "eps")
        finite(self.weight_decay, 0, "weight_decay")
        if self.max_grad_norm is not None:
            finite(self.max_grad_norm, 0, "max_grad_norm")
        if len(self.betas) != 2 or not all(isinstance(b, (int, float)) and 0 <= b < 1 for b in self.betas):
            raise ValueError(f"sluice.runtime.Adam: betas must be two numbers in [0, 1), got {self.betas!r}")


# ---- the model's tensors as the plans see them -----------------------------------------------------------------


@dataclass
class _Tensor:
    """One master tensor: its group, its TP split (dim None: replicated) and the global coordinate of its view's
    first element."""

    master: nn.Parameter
    name: str
    group: int
    dim: Optional[int]
    blocks: int
    base: int

    def view(self) -> torch.Tensor:
        """View position -> row-major index, made when needed: kept, it would cost 8 bytes per parameter."""
        return _view(self.master, self.dim, self.blocks)


@dataclass
class _Group:
    held_by: str  # "every_stage", "first_stage" or "last_stage"
    replicated: bool
    layers: int
    names: list
    elements: list  # per tensor of a layer
    bases: list = None  # bases[layer][k]


def _view(master: torch.Tensor, dim: Optional[int], blocks: int) -> torch.Tensor:
    """Row-major indices of `master` in view order: the split axis outermost, within each of its `blocks` blocks
    the same row of every block next to each other, so that every TP rank's rows are one contiguous range."""
    index = torch.arange(master.numel()).view(master.shape)
    if dim is None:
        return index.flatten()
    index = index.movedim(dim, 0)
    return index.reshape(blocks, index.shape[0] // blocks, -1).transpose(0, 1).flatten()


def _sources(stage: nn.Module, what: str) -> list:
    """The stage's parameters' slices of the model; TypeError for a parameter that is not one."""
    pieces = []
    for name, parameter in stage.named_parameters():
        piece = getattr(parameter, "_sluice_source", None)
        if piece is None:
            raise TypeError(f"sluice.runtime: {what}'s parameter {name} is not a slice of the model's: build stages "
                            "from sluice.runtime's TP layers and replicated()")
        pieces.append(piece)
    return pieces


class _Structure:
    """The model's parameters as groups of identical layers, learnt by building every layer alone at TP 1, and the
    first and last stages (whose extra parameters are the embedding, and the final norm and LM head)."""

    def __init__(self, model: nn.Module, build_stage: Callable, layers: int, spec_type, tp_type):
        names = {id(p): name for name, p in model.named_parameters()}
        tp = tp_type()
        per_layer = [_sources(build_stage(model, spec_type(layer, layer + 1, False, False, tp)), f"layer {layer}")
                     for layer in range(layers)]
        first = _sources(build_stage(model, spec_type(0, 1, True, False, tp)), "the first stage")
        last = _sources(build_stage(model, spec_type(layers - 1, layers, False, True, tp)), "the last stage")
        self.groups: list[_Group] = []
        self.tensors: list[_Tensor] = []
        self.by_master: dict[int, _Tensor] = {}
        for held_by, stack in (("every_stage", per_layer),
                               ("first_stage", [_extra(first, per_layer[0])]),
                               ("last_stage", [_extra(last, per_layer[-1])])):
            for replicated in (False, True):
                chosen = [[piece for piece in pieces if (piece.dim is None) == replicated] for pieces in stack]
                if chosen[0]:
                    self._add_group(held_by, replicated, chosen, names)
        missing = [name for name, p in model.named_parameters() if p.requires_grad and id(p) not in self.by_master]
        if not self.tensors:
            raise ValueError("sluice.runtime: the stages build_stage builds hold no parameters")
        if missing:
            raise ValueError(f"sluice.runtime: the model's parameter {missing[0]} is in no stage build_stage builds")
        self.elements = self.tensors[-1].base + self.tensors[-1].master.numel()

    def _add_group(self, held_by, replicated, stack, names):
        signature = [(tuple(p.master.shape), p.dim, p.blocks) for p in stack[0]]
        for layer, pieces in enumerate(stack):
            if [(tuple(p.master.shape), p.dim, p.blocks) for p in pieces] != signature:
                raise ValueError(f"sluice.runtime: layer {layer}'s parameters differ from layer 0's in shape or TP "
                                 "split; the sharded optimizer needs identical layers")
        g = len(self.groups)
        group = _Group(held_by, replicated, len(stack), [names.get(id(p.master), "?") for p in stack[0]],
                       [p.master.numel() for p in stack[0]], [])
        base = self.tensors[-1].base + self.tensors[-1].master.numel() if self.tensors else 0
        for layer, pieces in enumerate(stack):
            group.bases.append([])
            for piece in pieces:
                if id(piece.master) in self.by_master:
                    raise ValueError(f"sluice.runtime: the model's parameter {names.get(id(piece.master), '?')} is "
                                     "used twice (tied weights); the sharded optimizer needs each in one place")
                tensor = _Tensor(piece.master, names.get(id(piece.master), "?"), g, piece.dim, piece.blocks, base)
                self.tensors.append(tensor)
                self.by_master[id(piece.master)] = tensor
                group.bases[layer].append(base)
                base += piece.master.numel()
        self.groups.append(group)

    def shard_model(self, g: int, element_bytes: int):
        group = self.groups[g]
        return ShardModel(f"group {g}", group.layers,
                          [ShardTensor(f"{k}:{name}", e) for k, (name, e) in enumerate(zip(group.names,
                                                                                            group.elements))],
                          param_bytes=element_bytes, grad_bytes=element_bytes)


def _extra(stage_pieces, layer_pieces):
    """The first or last stage's parameters that its layer does not have."""
    inside = {id(p.master) for p in layer_pieces}
    return [p for p in stage_pieces if id(p.master) not in inside]


# ---- elements at global coordinates, and flat buffers of them ---------------------------------------------------


def _expand(begins: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Every coordinate of runs [begins[i], ends[i]), in order."""
    lengths = ends - begins
    if lengths.sum() == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    return np.repeat(begins - starts, lengths) + np.arange(lengths.sum(), dtype=np.int64)


class _Flat:
    """Elements at global coordinates held in one flat tensor: runs laid out one after another in ascending order."""

    def __init__(self, begins, ends, what: str):
        begins, ends = np.asarray(begins, dtype=np.int64), np.asarray(ends, dtype=np.int64)
        begins, ends = begins[ends > begins], ends[ends > begins]
        order = np.argsort(begins, kind="stable")
        self.begins, self.ends = begins[order], ends[order]
        lengths = self.ends - self.begins
        self.offsets = np.cumsum(lengths) - lengths
        self.size = int(lengths.sum())
        self.what = what

    def positions(self, coordinates: np.ndarray) -> np.ndarray:
        run = np.searchsorted(self.begins, coordinates, side="right") - 1
        held = (run >= 0) & (coordinates < self.ends[np.maximum(run, 0)]) if len(self.begins) else run >= 0
        if not held.all():
            raise RuntimeError(f"sluice.runtime: a layout move reads or writes element "
                               f"{int(coordinates[~held][0])} outside this rank's {self.what}")
        return self.offsets[run] + coordinates - self.begins[run]


def _piece_runs(group: _Group, blocks, block: int, begin: int, end: int, begins: list, ends: list):
    """Global runs of mutual slices [begin, end) of every tensor of every layer of a block, in a message's order."""
    slice_block = blocks[block]
    granularity = slice_block.granularity
    for layer in range(slice_block.layer_begin, slice_block.layer_end):
        for k, elements in enumerate(group.elements):
            base = group.bases[layer][k]
            begins.append(base + begin * elements // granularity)
            ends.append(base + end * elements // granularity)


def _message_coordinates(group: _Group, blocks, pieces, message) -> np.ndarray:
    begins, ends = [], []
    first = int(message["first_piece"])
    for piece in pieces[first : first + int(message["piece_count"])]:
        _piece_runs(group, blocks, int(piece["block"]), int(piece["begin"]), int(piece["end"]), begins, ends)
    return _expand(np.asarray(begins, dtype=np.int64), np.asarray(ends, dtype=np.int64))


class _Routes:
    """One phase's element moves for this rank: per peer, the positions it sends from its source buffer and those it
    receives into its destination buffer (both sides list a message's elements in the same order); this rank's moves
    to itself are one more peer."""

    def __init__(self, rank: int):
        self.rank = rank
        self.sends: dict = {}
        self.receives: dict = {}

    def add(self, src: int, dst: int, coordinates: np.ndarray, source: Optional[_Flat], destination: Optional[_Flat]):
        if src == self.rank:
            self.sends.setdefault(dst, []).append(source.positions(coordinates))
        if dst == self.rank:
            self.receives.setdefault(src, []).append(destination.positions(coordinates))

    def finish(self, device):
        """One index tensor per peer each way, peers in ascending order."""
        def joined(parts):
            return torch.from_numpy(np.concatenate(parts)).to(device)

        self.sends = {peer: joined(parts) for peer, parts in sorted(self.sends.items())}
        self.receives = {peer: joined(parts) for peer, parts in sorted(self.receives.items())}
        return self

    def exchange(self, source: torch.Tensor) -> list:
        """Sends every peer its elements of `source`; returns (positions, values) received from every peer, this
        rank included, in ascending peer order."""
        import torch.distributed as dist

        received = {peer: torch.empty(len(index), dtype=source.dtype, device=source.device)
                    for peer, index in self.receives.items() if peer != self.rank}
        operations = [dist.P2POp(dist.isend, source[index].contiguous(), peer)
                      for peer, index in self.sends.items() if peer != self.rank]
        operations += [dist.P2POp(dist.irecv, buffer, peer) for peer, buffer in received.items()]
        if operations:
            for request in dist.batch_isend_irecv(operations):
                request.wait()
        if self.rank in self.receives:
            received[self.rank] = source[self.sends[self.rank]]
        return [(self.receives[peer], received[peer]) for peer in sorted(received)]


def _fraction_in_shard(tensor: _Tensor, parameter: nn.Parameter, begin: int, end: int) -> torch.Tensor:
    """Where each element of the view fraction [begin, end) of the master sits in the stage parameter's row-major
    order; raises when the parameter holds other elements than that fraction."""
    wanted = tensor.view()[begin:end]
    piece = parameter._sluice_source
    if piece.dim is None:
        held = torch.arange(tensor.master.numel())
    else:
        held = torch.arange(tensor.master.numel()).view(tensor.master.shape)
        held = held.index_select(piece.dim, piece.index.cpu()).flatten()
    inverse = torch.full((tensor.master.numel(),), -1, dtype=torch.long)
    inverse[held] = torch.arange(len(held))
    local = inverse[wanted]
    if len(held) != end - begin or bool((local < 0).any()):
        raise RuntimeError(f"sluice.runtime: a stage's slice of {tensor.name} holds other elements than its TP "
                           "fraction; the sharded optimizer moves what the plan's TP degree gives each lane")
    return local


# ---- the optimizer ------------------------------------------------------------------------------------------------


@dataclass
class _Held:
    """A stage parameter: the positions of its fraction in the held buffer and of each fraction element in the
    parameter's row-major order; whether its gradient is pushed (a replicated one's only from TP rank 0 without
    sequence parallelism, where every lane of the group has the same)."""

    parameter: nn.Parameter
    held: torch.Tensor
    local: torch.Tensor
    pushes: bool


@dataclass
class _Move:
    held_size: int
    parameters: list
    pull: _Routes
    reduce_scatter: _Routes
    reduced_size: int
    link: _Routes


class ShardedAdam:
    """This rank's segments of every master (its ``sharded_layout`` share), Adam's moments of them, and the layout
    moves to each strategy's placement, planned once per strategy."""

    def __init__(self, model: nn.Module, build_stage: Callable, layers: int, adam: Adam, spec_type, tp_type):
        import torch.distributed as dist

        self.adam = adam
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.structure = _Structure(model, build_stage, layers, spec_type, tp_type)
        first = self.structure.tensors[0].master
        self.dtype, self.device = first.dtype, first.device
        self.layouts = [sharded_layout(self.world, group.layers) for group in self.structure.groups]
        begins, ends = [], []
        for group, layout in zip(self.structure.groups, self.layouts):
            for owners in layout.groups:
                count = len(owners.owners)
                mine = [i for i, owner in enumerate(owners.owners) if owner == self.rank]
                for layer in range(owners.layer_begin, owners.layer_end):
                    for k, elements in enumerate(group.elements):
                        for i in mine:
                            begins.append(group.bases[layer][k] + i * elements // count)
                            ends.append(group.bases[layer][k] + (i + 1) * elements // count)
        self.owned = _Flat(begins, ends, "optimizer segments")
        self.coordinates = torch.from_numpy(_expand(self.owned.begins, self.owned.ends)).to(self.device)
        with torch.no_grad():
            whole = torch.cat([t.master.detach().flatten()[t.view().to(self.device)] for t in self.structure.tensors])
            self.master = whole[self.coordinates].clone()
        self.m = torch.zeros_like(self.master)
        self.v = torch.zeros_like(self.master)
        self.gradient = torch.zeros_like(self.master)
        self.steps = 0
        self._moves = {}

    def move(self, name: str, placement, stage: Optional[nn.Module], tp_rank: int, tp: int,
             sequence_parallel: bool) -> _Move:
        """The layout move to strategy `name`'s placement (a shard Placement over the model's layers) for this rank,
        whose lane runs `stage` as TP rank tp_rank of tp (stage None: idle)."""
        if name not in self._moves:
            self._moves[name] = self._plan(placement, stage, tp_rank, tp, sequence_parallel)
        return self._moves[name]

    def _plan(self, placement, stage, tp_rank, tp, sequence_parallel) -> _Move:
        structure, rank = self.structure, self.rank
        parameters = []
        for parameter in stage.parameters() if stage is not None else ():
            tensor = structure.by_master.get(id(parameter._sluice_source.master))
            if tensor is None:
                raise RuntimeError("sluice.runtime: a stage parameter's master is not one of the model's parameters")
            replicated = structure.groups[tensor.group].replicated
            share, part = (1, 0) if replicated else (tp, tp_rank)
            elements = tensor.master.numel()
            parameters.append((parameter, tensor, part * elements // share, (part + 1) * elements // share,
                               not replicated or sequence_parallel or tp_rank == 0))
        wheres = [holder_placement(placement, group.held_by, replicated=group.replicated)
                  for group in structure.groups]
        holds = set()  # the plans' view: what this rank's lane holds, (begin, end) in global coordinates
        for group, where in zip(structure.groups, wheres):
            for pipeline in where.pipelines:
                for stage_placed in pipeline.stages:
                    ranks = list(stage_placed.ranks)
                    if rank in ranks:
                        t, share = ranks.index(rank) % pipeline.scheme.tp, pipeline.scheme.tp
                        for layer in range(stage_placed.layer_begin, stage_placed.layer_end):
                            for k, elements in enumerate(group.elements):
                                base = group.bases[layer][k]
                                holds.add((base + t * elements // share, base + (t + 1) * elements // share))
        # An idle pipeline's ranks (no stage) receive their part of the pull and push zeros.
        if stage is not None and holds != {(t.base + b, t.base + e) for _, t, b, e, _ in parameters}:
            raise RuntimeError(f"sluice.runtime: rank {rank}'s stage holds other parameters than the plan's placement "
                               "gives it: build_stage must build exactly its StageSpec's layers")
        held = _Flat([b for b, _ in holds], [e for _, e in holds], "stage parameters")
        element_bytes = torch.empty((), dtype=self.dtype).element_size()
        pulls, reduce_scatters, links, reduced_begins, reduced_ends = [], [], [], [], []
        for g, (group, where) in enumerate(zip(structure.groups, wheres)):
            model = structure.shard_model(g, element_bytes)
            pulled = plan_pull(where, self.layouts[g], model)
            for message in (*pulled.sends, *pulled.local_moves):
                if rank in (message["src"], message["dst"]):
                    pulls.append((int(message["src"]), int(message["dst"]),
                                  _message_coordinates(group, pulled.blocks, pulled.pieces, message)))
            pushed = plan_push(where, self.layouts[g], model)
            replicas = pushed.pipelines
            for rs_group in pushed.rs_groups:
                members = list(rs_group.members)
                if rank not in members:
                    continue
                step = pushed.blocks[rs_group.block].granularity // (replicas * pushed.grid)
                for i, keeper in enumerate(members):
                    piece = rs_group.segment * replicas + i
                    begins, ends = [], []
                    _piece_runs(group, pushed.blocks, rs_group.block, piece * step, (piece + 1) * step, begins, ends)
                    coordinates = _expand(np.asarray(begins, dtype=np.int64), np.asarray(ends, dtype=np.int64))
                    if keeper != rank:
                        reduce_scatters.append((rank, keeper, coordinates))
                        continue
                    reduced_begins += begins
                    reduced_ends += ends
                    reduce_scatters += [(member, rank, coordinates) for member in members]
            for message in (*pushed.sends, *pushed.local_moves):
                if rank in (message["src"], message["dst"]):
                    links.append((int(message["src"]), int(message["dst"]),
                                  _message_coordinates(group, pushed.blocks, pushed.pieces, message)))
        reduced = _Flat(reduced_begins, reduced_ends, "reduce-scatter pieces")
        phases = []
        for moves, source, destination in ((pulls, self.owned, held), (reduce_scatters, held, reduced),
                                           (links, reduced, self.owned)):
            routes = _Routes(rank)
            for src, dst, coordinates in moves:
                routes.add(src, dst, coordinates, source, destination)
            phases.append(routes.finish(self.device))
        held_parameters = []
        for parameter, tensor, begin, end in ((p, t, b, e) for p, t, b, e, _ in parameters):
            coordinates = tensor.base + np.arange(begin, end, dtype=np.int64)
            held_parameters.append((parameter, torch.from_numpy(held.positions(coordinates)).to(self.device),
                                    _fraction_in_shard(tensor, parameter, begin, end).to(self.device)))
        return _Move(held.size, [_Held(p, h, l, pushes) for (p, h, l), (*_, pushes) in
                                 zip(held_parameters, parameters)], *phases[:2], reduced.size, phases[2])

    def pull(self, move: _Move):
        """The masters' current values into the stage's parameters."""
        with torch.no_grad():
            held = torch.empty(move.held_size, dtype=self.dtype, device=self.device)
            for positions, values in move.pull.exchange(self.master):
                held[positions] = values
            for entry in move.parameters:
                entry.parameter.view(-1)[entry.local] = held[entry.held].to(entry.parameter.dtype)
                entry.parameter.grad = None

    def push_and_step(self, move: _Move):
        """The stage's gradients summed over the replicas into their owners' segments, then Adam there."""
        with torch.no_grad():
            held = torch.zeros(move.held_size, dtype=self.dtype, device=self.device)
            for entry in move.parameters:
                if entry.pushes and entry.parameter.grad is not None:
                    held[entry.held] = entry.parameter.grad.view(-1)[entry.local].to(self.dtype)
            reduced = torch.zeros(move.reduced_size, dtype=self.dtype, device=self.device)
            for positions, values in move.reduce_scatter.exchange(held):  # summed in rank order: deterministic
                reduced[positions] += values
            self.gradient.zero_()
            for positions, values in move.link.exchange(reduced):
                self.gradient[positions] = values
            self._adam()

    def _adam(self):
        import torch.distributed as dist

        adam, gradient = self.adam, self.gradient
        if adam.max_grad_norm is not None:
            squares = gradient.double().square().sum()
            dist.all_reduce(squares)
            coefficient = adam.max_grad_norm / (float(squares.sqrt()) + 1e-6)
            if coefficient < 1:
                gradient.mul_(coefficient)
        self.steps += 1
        beta1, beta2 = adam.betas
        if adam.weight_decay:
            self.master.mul_(1 - adam.lr * adam.weight_decay)
        self.m.mul_(beta1).add_(gradient, alpha=1 - beta1)
        self.v.mul_(beta2).addcmul_(gradient, gradient, value=1 - beta2)
        denominator = (self.v.sqrt() / math.sqrt(1 - beta2**self.steps)).add_(adam.eps)
        self.master.addcdiv_(self.m, denominator, value=-adam.lr / (1 - beta1**self.steps))

    def gather(self):
        """Every master whole into the model's parameters, in every process (a collective)."""
        import torch.distributed as dist

        whole = torch.zeros(self.structure.elements, dtype=self.dtype, device=self.device)
        whole[self.coordinates] = self.master
        dist.all_reduce(whole)
        with torch.no_grad():
            for tensor in self.structure.tensors:
                values = whole[tensor.base : tensor.base + tensor.master.numel()]
                tensor.master.view(-1)[tensor.view().to(self.device)] = values
