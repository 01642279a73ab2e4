
# ---- strategy proposal before training (Hydraulis §7) -------------------------------------------------------------

class ProposedCandidate:
    """A proposed strategy and the grid lengths it was proposed for."""
    @property
    def strategy(self) -> Strategy: ...
    @property
    def estimate(self) -> float:
        """The interval objective at max_len (seconds per iteration)."""
    @property
    def min_len(self) -> int: ...
    @property
    def max_len(self) -> int: ...
    @property
    def share(self) -> float:
        """Estimated share of iterations whose longest sequence is in [min_len, max_len]."""
    @property
    def origin(self) -> str:
        """'integer_dp', 'relaxed_rounding' or 'homogeneous'."""
    def __eq__(self, other: object) -> bool: ...

class LengthOptimum:
    """The DP's optimum for one grid length L."""
    @property
    def max_len(self) -> int: ...
    @property
    def integer(self) -> float: ...
    @property
    def relaxed(self) -> Optional[float]:
        """None unless the proposal is relaxed."""
    @property
    def share(self) -> float: ...
    def __eq__(self, other: object) -> bool: ...

class Proposal:
    """The candidate strategies worth considering (Hydraulis §7)."""
    @property
    def options(self) -> ProposeOptions: ...
    @property
    def profile(self) -> str:
        """The profile's name."""
    @property
    def sequences_per_iteration(self) -> float: ...
    @property
    def integer_optimum(self) -> float: ...
    @property
    def relaxed_optimum(self) -> Optional[float]: ...
    @property
    def considered(self) -> int:
        """Distinct strategies before the max_candidates cap."""
    @property
    def candidates(self) -> list[ProposedCandidate]: ...
    @property
    def by_length(self) -> list[LengthOptimum]: ...
    def strategies(self) -> list[Strategy]:
        """The candidates' strategies, as plan_iteration takes them."""
    def validate(self, profile: Profile) -> None:
        """Raises InvalidPlan naming the first broken invariant against the profile."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> Proposal: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> Proposal: ...

class SampledCandidate:
    """A member of the sampled proposal's set."""
    @property
    def strategy(self) -> Strategy: ...
    @property
    def wins(self) -> int:
        """Choosing batches on which it has the lowest planned time."""
    @property
    def source(self) -> str:
        """'proposal_dp', 'homogeneous' or 'neighbour'."""
    def __eq__(self, other: object) -> bool: ...

class SampledProposal:
    """Candidates chosen by the mean planned time of batches sampled from the data."""
    @property
    def paper(self) -> Proposal:
        """The DP's own proposal."""
    @property
    def choosing_batches(self) -> int: ...
    @property
    def held_out_batches(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def trials(self) -> int: ...
    @property
    def candidates(self) -> list[SampledCandidate]: ...
    @property
    def choosing_mean(self) -> float: ...
    @property
    def held_out_mean(self) -> float: ...
    @property
    def paper_choosing_mean(self) -> float: ...
    @property
    def paper_held_out_mean(self) -> float: ...
    @property
    def best_homogeneous(self) -> str: ...
    @property
    def best_homogeneous_held_out_mean(self) -> float: ...
    @property
    def pool_size(self) -> int: ...
    @property
    def plans(self) -> int: ...
    @property
    def rounds(self) -> int: ...
    def strategies(self) -> list[Strategy]:
        """The chosen strategies, as plan_iteration takes them."""
    def validate(self, profile: Profile) -> None:
        """Raises InvalidPlan naming the first broken invariant against the profile."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> SampledProposal: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> SampledProposal: ...

def propose(dataset: LengthDataset, profile: Profile, *, options: ProposeOptions = ...) -> Proposal:
    """Hydraulis' strategy proposal over the dataset's length distribution."""

def propose_sampled(
    dataset: LengthDataset,
    profile: Profile,
    *,
    options: ProposeOptions = ...,
    sampled: SampledOptions = ...,
    overhead: Optional[Callable[[Strategy], float]] = None,
) -> SampledProposal:
    """The proposal judged by the mean planned time of batches sampled from the dataset."""

def homogeneous_strategies(profile: Profile, *, holds: int = 0, tp_within_node: bool = True) -> list[Strategy]:
    """Every scheme replicated over all the profile's GPUs whose MaxLen holds `holds` tokens."""

def default_max_len(dataset: LengthDataset, profile: Profile, *, options: ProposeOptions = ...) -> int:
    """Lmax when none is named: the longest sequence, or the longest MaxLen of a usable scheme when shorter."""
