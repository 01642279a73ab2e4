
# ---- the interpreter run by a Python trainer (sluice.runtime) -----------------------------------------------------

class Transfer:
    """One point-to-point operation of a rank's instruction list, as its rank issues it."""
    @property
    def rank(self) -> int:
        """The global rank that issues it"""
    @property
    def peer(self) -> int:
        """The global rank at the other end"""
    @property
    def index(self) -> int:
        """Among the rank's transfers, in issue order"""
    @property
    def slot(self) -> int: ...
    @property
    def send(self) -> bool: ...
    @property
    def activation(self) -> bool:
        """An activation (else a gradient)"""
    @property
    def micro_batch(self) -> int: ...
    @property
    def shape(self) -> tuple[int, int]: ...

def run_rank(pipelines: Sequence[tuple[ExecutionPlan, Sequence[Sequence[int]]]],
             groups: Sequence[Sequence[tuple[int, int]]], rank: int, runner: Any, *,
             check: bool = True) -> list[tuple[float, float]]:
    """Runs global rank `rank`'s instruction list through the library's interpreter; the runner's callbacks compute
    and move the tensors."""
