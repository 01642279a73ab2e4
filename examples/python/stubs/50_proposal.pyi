
# ---- strategy proposal before training (Hydraulis §7) -------------------------------------------------------------

class ProposedCandidate:
    """A proposed strategy and the grid lengths it was proposed for."""
    def __eq__(self, other: object) -> bool: ...

class LengthOptimum:
    """The DP's optimum for one grid length L."""
    def __eq__(self, other: object) -> bool: ...

class Proposal:
    """The candidate strategies worth considering (Hydraulis §7)."""
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
    def __eq__(self, other: object) -> bool: ...

class SampledProposal:
    """Candidates chosen by the mean planned time of batches sampled from the data."""
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
