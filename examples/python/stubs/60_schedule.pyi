
# ---- DynaPipe's micro-batches and pipeline schedules ---------------------------------------------------------------

Models = Union["StageCost", Sequence["StageCost"]]

class StageCost:
    """A micro-batch's time on one stage, rows·(a·L² + b·L) + c with L = input + target, and its activation bytes,
    bytes_per_token per row token."""
    def __init__(self, latency: QuadraticLatency, bytes_per_token: float) -> None: ...
    @property
    def latency(self) -> QuadraticLatency: ...
    @property
    def bytes_per_token(self) -> float: ...
    def seconds(self, rows: int, input: int, target: int = 0) -> float: ...
    def bytes(self, rows: int, input: int, target: int = 0) -> float: ...

class StageCostSetup:
    """A profile's scheme as the micro-batch DP sees it."""
    @property
    def model(self) -> StageCost: ...
    @property
    def memory_limit(self) -> float:
        """Activation bytes per micro-batch under 1F1B: (budget − model states) / PP."""
    @property
    def last_stage(self) -> LastStageWork:
        """The scheme's last-stage work, plan_pipeline's last_stage."""

def stage_cost(scheme: SchemeCost) -> StageCostSetup:
    """The stage cost and per-micro-batch memory limit of a profile's scheme (Profile.at(scheme))."""

class MicroBatchShape:
    """`rows` rows of `input` + `target` tokens each."""
    def __eq__(self, other: object) -> bool: ...

class ShapedMicroBatch:
    """One of DynaPipe's micro-batches: samples in rows, padded to a shape."""
    def __eq__(self, other: object) -> bool: ...

class MicroBatchPartition:
    """A mini-batch cut into micro-batches (DynaPipe §4)."""
    @property
    def layout(self) -> str:
        """'padded', 'packed' or 'fixed_rows'."""
    @property
    def micro_batches(self) -> list[ShapedMicroBatch]: ...
    @property
    def objective(self) -> float:
        """(stages − 1)·max t + Σ t / replicas over the micro-batches."""
    @property
    def cost_model(self) -> int:
        """Index of the cost model it was planned with."""
    @property
    def times(self) -> FloatArray:
        """The micro-batches' seconds, as the replica balancers take them."""
    def validate(
        self,
        lengths: npt.ArrayLike,
        models: Models,
        *,
        ids: Optional[npt.ArrayLike] = None,
        targets: Optional[npt.ArrayLike] = None,
        stages: int = 1,
        replicas: int = 1,
        memory_limit: float = ...,
    ) -> None:
        """Raises InvalidPlan naming the first broken invariant against the samples, cost models and context."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> MicroBatchPartition: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> MicroBatchPartition: ...

class ReplicaAssignment:
    """Micro-batches split among data-parallel replicas: indices and summed seconds."""
    @property
    def replicas(self) -> list[npt.NDArray[np.uint64]]: ...
    @property
    def loads(self) -> FloatArray: ...
    @property
    def max_load(self) -> float: ...
    def validate(self, times: npt.ArrayLike, replicas: int) -> None:
        """Raises InvalidPlan naming the first broken invariant."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> ReplicaAssignment: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> ReplicaAssignment: ...

def balance_kk(times: npt.ArrayLike, replicas: int) -> ReplicaAssignment:
    """Karmarkar–Karp largest differencing of micro-batch times over replicas."""

def balance_lpt(times: npt.ArrayLike, replicas: int) -> ReplicaAssignment:
    """Greedy longest-processing-time-first balancing of micro-batch times."""

def partition_micro_batches(
    lengths: npt.ArrayLike,
    models: Models,
    *,
    ids: Optional[npt.ArrayLike] = None,
    targets: Optional[npt.ArrayLike] = None,
    ordering: Optional[str] = "length",
    stages: int = 1,
    replicas: int = 1,
    memory_limit: float = ...,
    layout: str = "padded",
    tmax_interval: float = 5e-06,
) -> MicroBatchPartition:
    """DynaPipe's micro-batch DP over the samples, ordered ('length', 'input_target', 'path'; None: as given)."""

def token_based_micro_batches(
    lengths: npt.ArrayLike,
    model: StageCost,
    *,
    tokens_per_micro_batch: int,
    ids: Optional[npt.ArrayLike] = None,
    targets: Optional[npt.ArrayLike] = None,
    ordering: Optional[str] = "length",
    stages: int = 1,
    replicas: int = 1,
    memory_limit: float = ...,
) -> MicroBatchPartition:
    """The token-based baseline: a micro-batch grows while rows × longest stays within the budget."""

def fixed_length_packing(
    lengths: npt.ArrayLike,
    model: StageCost,
    *,
    row_input: int,
    row_target: int = 0,
    rows: int = 1,
    ids: Optional[npt.ArrayLike] = None,
    targets: Optional[npt.ArrayLike] = None,
    stages: int = 1,
    replicas: int = 1,
    memory_limit: float = ...,
) -> MicroBatchPartition:
    """The Megatron-LM-style baseline: samples packed into fixed rows, `rows` rows per micro-batch."""

class MicroBatchCost:
    """One micro-batch per stage: forward and backward seconds, activation bytes."""
    def __eq__(self, other: object) -> bool: ...

class SchedulingProblem:
    """One pipeline's scheduling problem: per micro-batch and stage its costs, per stage its activation memory limit,
    and the link between stages."""
    def __init__(
        self,
        forward: npt.ArrayLike,
        backward: npt.ArrayLike,
        activation: npt.ArrayLike,
        tokens: npt.ArrayLike,
        memory_limit: npt.ArrayLike,
        *,
        hidden: int = 1,
        element_bytes: int = 2,
        latency: float = 0.0,
        bandwidth: float = ...,
    ) -> None:
        """forward, backward, activation: micro-batches × stages arrays; memory_limit: bytes per stage."""
    @property
    def stages(self) -> int: ...
    @property
    def micro_batches(self) -> list[MicroBatchCost]: ...
    @property
    def memory_limit(self) -> FloatArray: ...
    @property
    def hidden(self) -> int: ...
    @property
    def element_bytes(self) -> int: ...
    @property
    def link(self) -> Link: ...
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> SchedulingProblem: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> SchedulingProblem: ...

class ScheduleOrder:
    """Per stage, the order of its ops: (micro_batch, 'forward' | 'backward') pairs."""
    def __init__(self, stages: Sequence[Sequence[tuple[int, str]]]) -> None: ...
    @property
    def stages(self) -> list[list[tuple[int, str]]]: ...
    def validate(self, micro_batches: int, stages: int) -> None:
        """Raises InvalidPlan unless every op runs once, forward first, and the stages never wait forever."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> ScheduleOrder: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> ScheduleOrder: ...

def one_f_one_b_order(injection: npt.ArrayLike, stages: int) -> ScheduleOrder:
    """1F1B with the micro-batches injected in `injection` order."""

def gpipe_order(injection: npt.ArrayLike, stages: int) -> ScheduleOrder:
    """All forwards in injection order, then all backwards in reverse."""

def adaptive_cyclic_order(
    problem: SchedulingProblem, injection: npt.ArrayLike, limits: Optional[npt.ArrayLike] = None
) -> ScheduleOrder:
    """DynaPipe's adaptive cyclic order (Alg. 1) under per-stage activation limits (default: the problem's)."""

class OpTiming:
    """One simulated op: when it ran and when its output arrived."""
    def __eq__(self, other: object) -> bool: ...

class ScheduleSimulation:
    """Per-stage timelines of an order, simulated."""
    @property
    def stages(self) -> list[list[OpTiming]]: ...
    @property
    def makespan(self) -> float: ...
    @property
    def peak_memory(self) -> FloatArray: ...
    @property
    def idle(self) -> FloatArray: ...
    def validate(self, problem: SchedulingProblem, order: ScheduleOrder) -> None:
        """Raises InvalidPlan naming the first broken invariant."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> ScheduleSimulation: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> ScheduleSimulation: ...

def simulate_schedule(problem: SchedulingProblem, order: ScheduleOrder) -> ScheduleSimulation:
    """Event-driven simulation of the stage orders: per stage its ops' times, the makespan and peak memory."""

class Instruction:
    """One instruction of a rank's list."""
    @property
    def kind(self) -> str:
        """'load_input', 'forward', 'backward', 'free_buffer', or a send/recv start/wait."""
    @property
    def micro_batch(self) -> int: ...
    @property
    def stage(self) -> int: ...
    @property
    def peer(self) -> int:
        """-1 unless it communicates."""
    @property
    def buffer(self) -> int: ...
    @property
    def output(self) -> int: ...
    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols) of the tensor it moves, computes or frees."""
    def __eq__(self, other: object) -> bool: ...

class ExecutionPlan:
    """Per-rank instruction lists of one pipeline; rank j runs stage j."""
    def validate(self, problem: SchedulingProblem) -> None:
        """Raises InvalidPlan naming the first broken invariant (shapes, slots, NCCL pairing, memory)."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> ExecutionPlan: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> ExecutionPlan: ...

class DeadlockReport:
    """What a dry run of a plan's communication found."""
    @property
    def outcome(self) -> str:
        """'completes', 'deadlock', 'mismatch' or 'unmatched'."""
    @property
    def cycle(self) -> list[int]:
        """For a deadlock: ranks each waiting on the next."""
    @property
    def message(self) -> str: ...
    @property
    def ok(self) -> bool: ...

def check_deadlock(plan: ExecutionPlan) -> DeadlockReport:
    """Dry-runs the plan's sends and receives under NCCL's rules."""

class PipelineSchedule:
    """One pipeline's schedule: order, simulation and per-rank instructions."""
    def validate(self, problem: SchedulingProblem) -> None:
        """Raises InvalidPlan naming the first broken invariant against the problem."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> PipelineSchedule: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> PipelineSchedule: ...

def schedule_pipeline(
    problem: SchedulingProblem, *, schedule: ScheduleOptions = ...
) -> PipelineSchedule:
    """DynaPipe's scheduler: the fastest simulated cyclic or 1F1B order that fits memory, its communication planned."""

class ReplicaSchedule:
    """One data-parallel replica's pipeline."""
    def __eq__(self, other: object) -> bool: ...

class PipelineRunPlan:
    """DynaPipe's plan of one mini-batch: partition, replicas, their schedules."""
    def validate(
        self,
        lengths: npt.ArrayLike,
        models: Models,
        *,
        ids: Optional[npt.ArrayLike] = None,
        targets: Optional[npt.ArrayLike] = None,
        stages: int = 1,
        replicas: int = 1,
        micro_batch_memory: float = ...,
        stage_memory: float = 0.0,
        problem: ProblemOptions = ...,
        last_stage: LastStageWork = ...,
    ) -> None:
        """Raises InvalidPlan naming the first broken invariant against the samples, models and options."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> PipelineRunPlan: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> PipelineRunPlan: ...

def plan_pipeline(
    lengths: npt.ArrayLike,
    models: Models,
    *,
    ids: Optional[npt.ArrayLike] = None,
    targets: Optional[npt.ArrayLike] = None,
    stages: int = 1,
    replicas: int = 1,
    micro_batch_memory: float = ...,
    stage_memory: float = 0.0,
    ordering: str = "length",
    layout: str = "padded",
    tmax_interval: float = 5e-06,
    schedule: ScheduleOptions = ...,
    problem: ProblemOptions = ...,
    last_stage: LastStageWork = ...,
) -> PipelineRunPlan:
    """DynaPipe's per-iteration planner (`sluice schedule`): order, partition, balance, schedule every replica."""

class ScheduledPipeline:
    """A busy pipeline's problem and schedule."""
    def __eq__(self, other: object) -> bool: ...

class IterationSchedule:
    """Every pipeline of an iteration plan scheduled; None for an idle one."""
    @property
    def pipelines(self) -> list[Optional[ScheduledPipeline]]: ...
    @property
    def makespan(self) -> float: ...
    def validate(
        self,
        plan: IterationPlan,
        profile: Profile,
        *,
        problem: ProblemOptions = ...,
    ) -> None:
        """Raises InvalidPlan naming the first broken invariant against the plan and profile."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> IterationSchedule: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> IterationSchedule: ...

def schedule_iteration(
    plan: IterationPlan,
    profile: Profile,
    *,
    schedule: ScheduleOptions = ...,
    problem: ProblemOptions = ...,
) -> IterationSchedule:
    """Every pipeline of an iteration plan scheduled on its scheme (schedule_pipeline)."""

class FlexIteration:
    """The batch planned on a flex CP domain: its replicas re-form CP groups per micro-batch."""
    @property
    def total(self) -> float:
        """plan.seconds + overhead"""

def flex_unit_plans(
    iteration: FlexIteration, problem: FlexCpProblem, *, problem_options: ProblemOptions = ...
) -> list[tuple[list[int], Optional[ExecutionPlan]]]:
    """Per unit of a flex CP iteration's domain: the plan's micro-batches it takes part in (ascending) and its
    instruction lists for them (None when it takes part in none): one 1F1B pipeline of all the plan's micro-batches
    with the unit's absent ones removed, so that a CP group's units meet at each pass in the same order."""

class SimulatedIteration:
    """One iteration planned with the simulator judging the candidates."""
    @property
    def candidate_total(self) -> float:
        """The kept candidate's makespan plus its layout move."""
    @property
    def runs_flex(self) -> bool:
        """Whether the flex CP plan runs: it is faster than the kept candidate."""
    @property
    def total(self) -> float: ...
    def validate(
        self,
        lengths: npt.ArrayLike,
        candidates: Sequence[StrategyLike],
        profile: Profile,
        *,
        ids: Optional[npt.ArrayLike] = None,
        candidate_overhead: Optional[npt.ArrayLike] = None,
        problem: ProblemOptions = ...,
    ) -> None:
        """Raises InvalidPlan naming the first broken invariant against the batch, candidates and profile."""
    def __eq__(self, other: object) -> bool: ...
    def to_json(self, indent: int = 2) -> str: ...
    @staticmethod
    def from_json(text: str) -> SimulatedIteration: ...
    def save(self, path: PathLike) -> None: ...
    @staticmethod
    def load(path: PathLike) -> SimulatedIteration: ...
