
# ---- the interpreter run by a Python trainer (sluice.runtime) -----------------------------------------------------

class Transfer:
    """One point-to-point operation of a rank's instruction list, as its rank issues it."""
    @property
    def rank(self) -> int: ...
    @property
    def peer(self) -> int: ...
    @property
    def index(self) -> int: ...
    @property
    def slot(self) -> int: ...
    @property
    def send(self) -> bool: ...
    @property
    def activation(self) -> bool: ...
    @property
    def micro_batch(self) -> int: ...
    @property
    def shape(self) -> tuple[int, int]: ...

def run_rank(pipelines: Sequence[tuple[ExecutionPlan, Sequence[Sequence[int]]]],
             groups: Sequence[Sequence[tuple[int, int]]], rank: int, runner: Any, *,
             check: bool = True) -> list[tuple[float, float]]:
    """Runs global rank `rank`'s instruction list through the library's interpreter; the runner's callbacks compute
    and move the tensors."""
