
# ---- profiles: bundled, read, fitted ----------------------------------------------------------------------------

class Link:
    """An α–β link: a message of b bytes takes latency + b / bandwidth seconds; free by default."""
    def __init__(self, latency: float = 0.0, bandwidth: float = ...) -> None: ...
    @property
    def latency(self) -> float: ...
    @property
    def bandwidth(self) -> float: ...
    def __eq__(self, other: object) -> bool: ...

class QuadraticLatency:
    """T(l) = a·l² + b·l + c seconds for one stage."""
    def __init__(self, a: float, b: float, c: float) -> None: ...
    @property
    def a(self) -> float: ...
    @property
    def b(self) -> float: ...
    @property
    def c(self) -> float: ...
    @overload
    def __call__(self, length: int) -> float: ...
    @overload
    def __call__(self, lengths: npt.ArrayLike) -> FloatArray: ...
    def __eq__(self, other: object) -> bool: ...

class ModelInfo:
    """The model a profile describes."""
    def __eq__(self, other: object) -> bool: ...

class LastStageWork:
    """The last pipeline stage's own work (final norm, LM head, loss): b·tokens + c seconds per micro-batch, which
    the schedules take off the other stages; zero prices every stage alike."""
    def __init__(self, b: float = 0.0, c: float = 0.0) -> None: ...
    @property
    def b(self) -> float: ...
    @property
    def c(self) -> float: ...
    def seconds(self, tokens: int) -> float: ...
    def __eq__(self, other: object) -> bool: ...

class SchemeCost:
    """A scheme of a profile, ready for planning."""
    @property
    def scheme(self) -> Scheme: ...
    @property
    def latency(self) -> QuadraticLatency: ...
    @property
    def max_len(self) -> int: ...
    @property
    def util_len(self) -> int: ...
    @property
    def last_stage(self) -> LastStageWork: ...
    def __eq__(self, other: object) -> bool: ...

class Profile:
    """The parallel schemes of one model on one cluster with their cost models."""
    @staticmethod
    def bundled(name: str = "llama2-7b", gpus: Optional[int] = None) -> Profile:
        """A bundled profile by name or a path, resolved for `gpus` GPUs (default: its own)."""
    @staticmethod
    def read(path: PathLike, gpus: Optional[int] = None) -> Profile:
        """A sluice profile or a Hetu strategy_pool JSON file."""
    @property
    def name(self) -> str: ...
    @property
    def gpus(self) -> int: ...
    @property
    def gpus_per_node(self) -> int: ...
    @property
    def model(self) -> str: ...
    @property
    def layers(self) -> int: ...
    @property
    def hidden(self) -> int:
        """The model's hidden size, which the schedule functions take for activation transfers"""
    @property
    def vocab(self) -> int: ...
    @property
    def schemes(self) -> list[SchemeCost]: ...
    def with_gpus(self, gpus: int) -> Profile: ...
    def max_len(self, scheme: Scheme) -> int: ...
    def at(self, scheme: Scheme) -> SchemeCost: ...
    def pipelines(self, strategy: StrategyLike) -> list[Pipeline]:
        """The strategy's pipelines in MaxLen order, as plans index them."""
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> Profile: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> Profile: ...

class FitResult:
    """A latency model fitted to measured samples: the quadratic, its relative RMS error and how many samples it used."""

class MemoryFit:
    @property
    def fixed_bytes(self) -> float: ...
    @property
    def bytes_per_token(self) -> float: ...
    @property
    def relative_rms_error(self) -> float: ...

class SchemeFit:
    @property
    def scheme(self) -> Scheme: ...
    @property
    def latency(self) -> FitResult: ...
    @property
    def memory(self) -> Optional[MemoryFit]: ...
    @property
    def inner(self) -> Optional[FitResult]: ...

class ProfileFit:
    @property
    def profile(self) -> Profile: ...
    @property
    def schemes(self) -> list[SchemeFit]: ...

class CpScheme:
    """A scheme of a profile derived with context parallelism (and recomputation)."""
    @property
    def scheme(self) -> Scheme: ...
    @property
    def name(self) -> str: ...
    @property
    def base(self) -> Scheme: ...
    @property
    def gpus(self) -> int: ...
    @property
    def max_len(self) -> int: ...
    @property
    def fit(self) -> FitResult: ...
    @property
    def last_stage(self) -> LastStageWork:
        """The last stage's own work: the base's, its linear term shared over the CP ranks' tokens."""
    def seconds(self, length: int) -> float:
        """The derived forward + backward time of one sequence on the last stage (not the fitted quadratic; the other stages take last_stage off it)."""

def derive_context_parallel(
    profile: Profile,
    cp: int,
    *,
    heads: Optional[int] = None,
    kv_heads: Optional[int] = None,
    kind: str = "ring",
    ulysses: Optional[int] = None,
    recompute: bool = False,
    intra_node: Link = ...,
    inter_node: Link = ...,
) -> list[CpScheme]:
    """Every scheme of the profile derived with context parallelism of degree `cp` (what `sluice inspect --cp`
    prints); `heads` and `kv_heads` default to the profile's model; schemes wider than the cluster, or whose heads
    do not split, are left out."""

def with_scheme_space(
    profile: Profile, *, cp: Sequence[int] = (), cp_kinds: Sequence[str] = ("ring",), recompute: bool = False
) -> Profile:
    """The profile with the CP and AC schemes derived from its ⟨TP, PP⟩ schemes (what `--cp`, `--cp-kinds` and
    `--ac` give the CLI's planners): each degree of `cp` in each kind of `cp_kinds`, and with `recompute` every
    scheme also with full activation recomputation. Schemes the profile measures keep their measurement."""

def fit_profile(
    schemes: Sequence[str],
    tokens: npt.ArrayLike,
    seconds: npt.ArrayLike,
    *,
    base: Profile,
    peak_bytes: Optional[npt.ArrayLike] = None,
    inner_seconds: Optional[npt.ArrayLike] = None,
    sequences: Optional[npt.ArrayLike] = None,
    name: str = "fitted",
    source: str = "",
    max_error: float = 0.05,
) -> ProfileFit:
    """A profile from measured (scheme, tokens, seconds[, peak bytes][, inner seconds][, sequences]) samples, T(l)
    fitted per scheme (a sample of k packed sequences of l tokens as k·(a·l² + b·l) + c), and from another stage's
    inner seconds the last stage's own work.

    A NaN in peak_bytes or inner_seconds marks a sample measured without it; sequences defaults to 1 per sample."""

def read_profile_samples(path: PathLike) -> dict[str, Any]:
    """Samples from a CSV or sluice.profile_samples JSON file, as keyword arguments of fit_profile."""
