
# ---- the comparison of systems (Hydraulis §8) ---------------------------------------------------------------------

class IterationOutcome:
    """One system's simulated iteration."""

class BatchSize:
    """What a compared batch held, and how fast any plan of it could run."""
    def __eq__(self, other: object) -> bool: ...

class SystemRun:
    """One system over the comparison's iterations, or why it cannot run the scenario."""
    @property
    def seconds(self) -> FloatArray:
        """Per iteration, its simulated time"""
    @property
    def switching(self) -> FloatArray:
        """Per iteration, the seconds charged for layout moves"""
    @property
    def layout_move(self) -> FloatArray:
        """Per iteration, the layout moves' seconds before overlap"""
    @property
    def imbalance(self) -> FloatArray:
        """Per iteration, slowest / fastest busy pipeline"""
    @property
    def idle(self) -> FloatArray:
        """Per iteration, the share of pipelines without work"""
    @property
    def micro_batch_imbalance(self) -> FloatArray:
        """Per iteration, WLB-LLM's imbalance degree between micro-batches"""
    @property
    def planning_seconds(self) -> FloatArray:
        """Per iteration, the measured wall-clock seconds spent planning it"""

class Summary:
    """A system's statistics over the iterations: means and sample standard deviations."""

class IterationBound:
    """A lower bound on any plan's iteration time of one batch under the cost model."""

def lower_bound(profile: Profile, batch: BatchLike, *, cross_node_tp: bool = False) -> Optional[IterationBound]:
    """A time no plan of `batch` beats on `profile`'s schemes, as `sluice simulate` and `sluice plan` report it.

    `batch` is a sluice.Batch, a lengths array or an (ids, lengths) pair. The profile's CP and AC schemes count,
    and the same under ZeRO-3. None when no scheme holds one of its sequences."""

class Comparison:
    """The systems on the same batches, in system_names() order."""
    @property
    def systems(self) -> list[SystemRun]: ...
    def __getitem__(self, name: str) -> SystemRun:
        """The run of a system by name (one of system_names())."""
    @property
    def batch_sequences(self) -> IntArray:
        """Per iteration, the batch's sequence count"""
    @property
    def batch_tokens(self) -> IntArray:
        """Per iteration, the batch's tokens"""
    @property
    def lower_bounds(self) -> list[Optional[IterationBound]]:
        """Per iteration, a lower bound no plan of its batch beats (IterationBound; None where no scheme holds one of
        its sequences)"""
    @property
    def candidates(self) -> list[Strategy]:
        """sluice's candidate strategies"""
    @property
    def bounds(self) -> IntArray:
        """HotSPa's length ranges' upper bounds: (0, b0], (b0, b1], … (a read-only view)"""
    @property
    def any_ran(self) -> bool: ...
    def summarize(self) -> dict[str, Summary]:
        """Each system's summary by name (systems that failed are left out)."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> Comparison: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> Comparison: ...

def system_names() -> list[str]:
    """The compared systems' names, in the order results list them."""

def compare_systems(
    profile: Profile,
    dataset: LengthDataset,
    *,
    tokens: int,
    iterations: Optional[int] = None,
    batches: Optional[Iterable[BatchLike]] = None,
    context: Optional[int] = None,
    cross_node_tp: bool = False,
    problem: ProblemOptions = ...,
    dispatch: Optional[DispatchOptions] = None,
    seed: int = 0,
) -> Comparison:
    """Megatron-LM, HotSPa, DynaPipe and sluice on the same batches of `dataset`, each iteration simulated.

    The batches are `iterations` (default 10) batches of at most `tokens` tokens sampled with `seed`, as
    `sluice simulate` draws them, or the given `batches`. `context` defaults to the dataset's longest sequence, or
    the longest MaxLen of a usable scheme when shorter. `dispatch` defaults to DispatchOptions(seed=seed)."""
