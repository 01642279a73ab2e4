
# ---- option structs shared by several functions: immutable, compared by value, picklable -----------------------------

class DispatchOptions:
    """How a batch is dispatched across pipelines (Hydraulis' Alg. 1): random orders tried, worker threads, seed, local
    search, the longest-first order and whether the V step is charged. Immutable; raises InvalidInput on a bad
    value."""
    def __eq__(self, other: object) -> bool: ...

class ScheduleOptions:
    """How a pipeline is scheduled: kind (cyclic: DynaPipe's search over injection orders, which may keep 1F1B; or
    1f1b), the k-means seed and clusters (injection-order groups, 0 to 6; 0: 3 when there are more than 20
    micro-batches, else 4). Immutable; raises InvalidInput on a bad value."""
    def __eq__(self, other: object) -> bool: ...

class ProblemOptions:
    """How a simulated pipeline moves activations: hidden (elements per token of a boundary tensor), element_bytes, the
    stage-to-stage link's latency (s) and bandwidth (bytes/s; inf: free) and backward_ratio (backward seconds per
    forward second). Immutable; raises InvalidInput on a bad value."""
    def __eq__(self, other: object) -> bool: ...

class PlanOptions:
    """How the sluice plan is made: the dispatch (its v_step left at its default: `v_step` chooses), how pipelines are
    scheduled, how activations move between stages, what each candidate is charged for its parameter pull and
    gradient push (layout_moves: none, exposed or all) and whether the dispatch charges the V step (v_step: best, on
    or off). Immutable; raises InvalidInput on a bad value."""
    def __eq__(self, other: object) -> bool: ...

class ProposeOptions:
    """How Hydraulis' proposal is made: gpus (default: the profile's cluster), max_len (Lmax; default: the dataset's
    longest sequence), the length grid, the GPU budget and replica steps (tenths), the relaxation, tokens per
    iteration, the cost model's terms, TP within a node and the candidates kept. A proposal's own has gpus and
    max_len resolved. Immutable; raises InvalidInput on a bad value (propose checks the rest against the dataset and
    profile)."""
    def __eq__(self, other: object) -> bool: ...

class SampledOptions:
    """How the sampled proposal judges its pool: batches it chooses on and held-out batches it only measures (each of
    the ProposeOptions' tokens_per_iteration tokens, drawn with `seed`), the dispatch each (strategy, batch) is
    planned with, and the pool's cap (>= max_candidates). Immutable; raises InvalidInput on a bad value."""
    def __eq__(self, other: object) -> bool: ...

class PlacementOptions:
    """How pipelines are placed on ranks: GPUs per node, TP within a node, the order of the pipelines' rank blocks
    ('tp_descending' or 'tp_ascending') and stage_layers (a PP degree to its layers per stage; absent degrees split
    evenly). Immutable; raises InvalidInput on a bad value (place checks the stage sums against the model's layers)."""
    def __eq__(self, other: object) -> bool: ...

class SpaceOptions:
    """Which paradigms the per-layer search may use (zero2: ZeRO-2 data parallelism, ulysses: Ulysses SP in TP's
    place); pp_degrees [] means every power of 2, max_tp and max_pp 0 no limit. Immutable; raises InvalidInput on a
    bad value (the search checks pp_degrees against the cluster)."""
    def __eq__(self, other: object) -> bool: ...

class SearchOptions:
    """How Galvatron-BMW searches: memory_bytes per device (0: the device memory), the layer DP's memory step, the
    global batch (0: the sweep batch_step, 2·batch_step, … up to max_batch), the schedule ('1f1b' or 'gpipe'), the
    space and the sweep's threads. Immutable; raises InvalidInput on a bad value (the search checks the rest against
    the model and cluster)."""
    def __eq__(self, other: object) -> bool: ...
