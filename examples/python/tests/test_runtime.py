"""sluice.runtime: plans of ⟨TP, CP, PP⟩ pipelines, heterogeneous ones and a new strategy every step, trained across
processes (gloo on 127.0.0.1, started as torchrun starts them) give the losses and final parameters of the same model
trained in one process on every sequence alone; the TP layers against their unsharded counterparts; the interpreter
binding's checks; a process that dies mid-step ends the others with a line naming their rank."""
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import sluice  # noqa: E402
from launch import built_package_env, run_like_torchrun  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
WORKER = "runtime_worker.py"
# Per world: steps whose strategies differ: TP×PP, ring CP in a pipeline, TP×Ulysses CP, hybrid CP (Ulysses 2 ×
# ring 2), recomputation, heterogeneous pipelines side by side, (STRATEGY:1, a batch of one sequence) a pipeline
# left idle, and (flex=DOMAIN) flex CP domains whose units re-form CP groups of 1, 2 and 4 per micro-batch.
STRATEGIES = {
    4: "1*tp2pp2,1*tp1cp2ringpp2,1*tp2pp1+1*tp1pp2ac,1*tp2cp2ulyssespp1,1*tp1cp4hybrid2pp1,2*tp2pp1:1,"
       "flex=4*tp1pp1,flex=2*tp2pp1",
    8: "1*tp2pp2+1*tp1pp4,1*tp2cp2ulyssespp2,2*tp2pp2ac,1*tp2pp2+1*tp1cp4hybrid2pp1,1*tp2pp2+1*tp1cp2ringpp2,"
       "flex=4*tp1pp2:16",
}
RELATIVE = 1e-9  # float64


def worker_run(directory, world, strategies, *, one_process=False, sharded=False):
    out = directory / f"result-{world}-{'one' if one_process else 'sharded' if sharded else 'summed'}.pt"
    arguments = [WORKER, "--strategies", strategies, "--world", str(world), "--out", str(out)]
    arguments += ["--sharded"] if sharded else []
    if one_process:
        result = subprocess.run([sys.executable, *arguments, "--one-process"], cwd=HERE, env=built_package_env(),
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
    else:
        codes, outputs = run_like_torchrun(world, arguments, HERE)
        assert codes == [0] * world, "\n".join(stdout + stderr for stdout, stderr in outputs)
    return torch.load(out)


@pytest.fixture(scope="module")
def one_process_runs(tmp_path_factory):
    """Per world, the same steps trained in one process on every sequence alone (computed once, for both modes)."""
    directory = tmp_path_factory.mktemp("one-process")
    return {world: worker_run(directory, world, strategies, one_process=True)
            for world, strategies in STRATEGIES.items()}


@pytest.mark.parametrize("sharded", [True, False], ids=["sharded-adam", "summed-grad"])
@pytest.mark.parametrize("world", [4, 8])
def test_steps_of_different_strategies_equal_one_process(tmp_path, one_process_runs, world, sharded):
    strategies = STRATEGIES[world]
    alone = one_process_runs[world]
    spread = worker_run(tmp_path, world, strategies, sharded=sharded)
    names = [entry.split(":")[0] for entry in strategies.split(",")]
    assert spread["strategies"] == [name[len("flex="):] + " flex" if name.startswith("flex=") else name
                                    for name in names]
    assert any(degree > 1 for layout in spread["layouts"] for groups in layout for degree in groups)  # CP groups
    assert any(count > 1 for counts in spread["micro_batches"] for count in counts)  # pipelines with real schedules
    idle = any(entry.endswith(":1") for entry in strategies.split(","))  # a batch of one sequence
    assert any(0 in counts for counts in spread["micro_batches"]) == idle  # leaves a pipeline idle
    # Gradient clipping both binds and does not in some steps.
    assert min(alone["norms"]) < alone["max_norm"] < max(alone["norms"])
    # Sequence parallelism: a TP lane sends only its rows of the activations and their gradients.
    assert any(tp > 1 for _, _, _, tp in spread["sent"])
    for rows, tokens, rank, tp in spread["sent"]:
        assert rows == (rank + 1) * tokens // tp - rank * tokens // tp
    if sharded:  # every process keeps its share of each tensor's masters and moments, ⌊E/N⌋ or ⌈E/N⌉
        model = alone["parameters"].values()
        assert sum(spread["owned"]) == sum(p.numel() for p in model)
        assert max(spread["owned"]) - min(spread["owned"]) <= len(model)
    for step, (one, many) in enumerate(zip(alone["losses"], spread["losses"])):
        assert abs(many - one) <= RELATIVE * abs(one), f"step {step}: loss {many} against {one}"
    for name, expected in alone["parameters"].items():
        actual = spread["parameters"][name]
        error = float((actual - expected).norm() / expected.norm())
        assert error <= RELATIVE, f"{name}: relative {error:.2e}"


def test_a_process_that_dies_ends_the_others_naming_their_rank(tmp_path):
    out = tmp_path / "result.pt"
    codes, outputs = run_like_torchrun(
        4, [WORKER, "--strategies", "1*tp2pp2,1*tp1pp4", "--world", "4", "--out", str(out), "--die", "2:1",
            "--timeout", "10", "--sharded"], HERE)
    assert codes[2] == 3
    for rank in (0, 1, 3):
        assert codes[rank] == 1, outputs[rank]
        last = outputs[rank][1].strip().splitlines()[-1]
        assert last.startswith(f"runtime_worker: sluice.runtime: rank {rank}"), outputs[rank][1]


def test_run_rank_refuses_what_does_not_fit_and_says_where_the_runner_failed():
    profile = sluice.Profile.bundled("llama2-7b", gpus=4)
    plan = sluice.plan_iteration([300, 200, 500, 400, 100, 250], ["1*tp1pp4"], profile)
    schedule = sluice.schedule_iteration(plan, profile)
    execution = schedule.pipelines[0].schedule.plan
    with pytest.raises(sluice.InvalidPlan, match="names ranks of 2 stages for 4"):
        sluice.run_rank([(execution, [[0], [1]])], [], 0, object())
    with pytest.raises(sluice.InvalidInput, match="names no ranks"):
        sluice.run_rank([(execution, [])], [], 0, object())
    assert sluice.run_rank([(execution, [[0], [1], [2], [3]])], [], 7, Recording()) == []  # a rank with nothing to run
    with pytest.raises(sluice.InvalidInput, match="run_rank: rank -1 is negative"):  # before any plan is looked at
        sluice.run_rank([(execution, [])], [], -1, object())

    class Failing:
        def load_input(self, micro_batch, slot):
            raise KeyError("no such batch")

        forward = backward = post = wait = load_input

    with pytest.raises(RuntimeError, match=r"^sluice.runtime: rank 0 instruction 0 \(load_input micro-batch \d+\): "
                                           r"KeyError: 'no such batch'$") as raised:
        sluice.run_rank([(execution, [[0], [1], [2], [3]])], [], 0, Failing())
    assert isinstance(raised.value.__cause__, KeyError)


class Recording:
    """A runner that records what the interpreter asks of rank 0 and completes every transfer at once."""

    def __init__(self):
        self.calls = []

    def load_input(self, micro_batch, slot):
        self.calls.append(("load", micro_batch))

    def forward(self, micro_batch, input_slot, output_slot):
        self.calls.append(("forward", micro_batch))

    def backward(self, micro_batch, gradient_slot, output_slot):
        self.calls.append(("backward", micro_batch))

    def post(self, transfer):
        assert transfer.rank == 0 and transfer.peer == 1
        self.calls.append(("send" if transfer.send else "receive", transfer.micro_batch))

    def wait(self, transfer):
        pass


def test_run_rank_runs_the_ranks_list_as_the_plan_says():
    profile = sluice.Profile.bundled("llama2-7b", gpus=4)
    plan = sluice.plan_iteration([300, 200, 500, 400, 100, 250, 350, 450] * 4, ["1*tp1pp4"], profile)
    execution = sluice.schedule_iteration(plan, profile).pipelines[0].schedule.plan
    runner = Recording()
    timings = sluice.run_rank([(execution, [[0], [1], [2], [3]])], [], 0, runner)
    instructions = execution.ranks[0]
    assert len(timings) == len(instructions)
    assert all(0 <= start <= end for start, end in timings)
    computed = [call for call in runner.calls if call[0] in ("load", "forward", "backward")]
    expected = [(kind, i.micro_batch) for i in instructions
                for kind in [{"load_input": "load", "forward": "forward", "backward": "backward"}.get(i.kind)] if kind]
    assert computed == expected
    # Every micro-batch: loaded, forwarded and its activation sent, its gradient received, then its backward.
    for m in range(execution.micro_batches):
        order = [call[0] for call in runner.calls if call[1] == m]
        assert order == ["load", "forward", "send", "receive", "backward"]


def tp_group_run(tmp_path, script):
    """`script` in 2 processes of a gloo group; its assertions run in each."""
    path = tmp_path / "tp_check.py"
    path.write_text(script)
    codes, outputs = run_like_torchrun(2, [str(path)], HERE)
    assert codes == [0, 0], "\n".join(stdout + stderr for stdout, stderr in outputs)


TP_LAYERS = """
import torch, torch.distributed as dist, torch.nn.functional as F
from sluice import runtime
dist.init_process_group("gloo")
rank = dist.get_rank()
group = dist.new_group([0, 1])
torch.manual_seed(0)
x = torch.randn(5, 8, dtype=torch.float64, requires_grad=True)
qkv = torch.nn.Parameter(torch.randn(12, 8, dtype=torch.float64))
out = torch.nn.Parameter(torch.randn(8, 4, dtype=torch.float64))
embed = torch.nn.Parameter(torch.randn(10, 8, dtype=torch.float64))
head = torch.nn.Parameter(torch.randn(10, 8, dtype=torch.float64))
tokens = torch.tensor([0, 9, 4, 5, 3])
labels = torch.tensor([9, 4, -100, 3, 5])
weights = torch.arange(1, 6, dtype=torch.float64)


def unsharded(x):
    h = F.embedding(tokens, embed) + x
    y = F.linear(h, qkv).unflatten(-1, (3, 4)).sum(-2)  # q|k|v blocks summed, 4 features
    z = F.linear(y, out)
    return F.cross_entropy(F.linear(z, head), labels, reduction="none")


expected = unsharded(x)
(expected * weights).sum().backward()
for sequence_parallel in (False, True):
    tp = runtime.TensorParallel(group, rank, 2, sequence_parallel, rows=5)
    mine = slice(2 * rank, 2 + 3 * rank) if sequence_parallel else slice(0, 5)  # rows [0, 2) and [2, 5)
    column = runtime.ColumnParallelLinear(qkv, tp, blocks=3)
    row = runtime.RowParallelLinear(out, tp)
    embedding = runtime.VocabParallelEmbedding(embed, tp)
    lm_head = runtime.ColumnParallelLinear(head, tp)
    xs = x.detach()[mine].clone().requires_grad_()
    y = column(embedding(tokens) + xs).unflatten(-1, (3, 2)).sum(-2)
    logits = lm_head(row(y))
    loss = runtime.vocab_parallel_cross_entropy(logits, labels, tp, vocab_begin=5 * rank)
    assert torch.allclose(loss, expected, rtol=1e-12, atol=1e-12), (sequence_parallel, loss, expected)
    assert loss[2] == 0
    (loss * weights).sum().backward()
    assert torch.allclose(xs.grad, x.grad[mine], rtol=1e-12, atol=1e-12), sequence_parallel
    rows = torch.cat([torch.arange(b * 4 + 2 * rank, b * 4 + 2 * rank + 2) for b in range(3)])
    assert torch.allclose(column.weight.grad, qkv.grad[rows], rtol=1e-12, atol=1e-12)
    assert torch.allclose(row.weight.grad, out.grad[:, 2 * rank:2 * rank + 2], rtol=1e-12, atol=1e-12)
    assert torch.allclose(embedding.weight.grad, embed.grad[5 * rank:5 * rank + 5], rtol=1e-12, atol=1e-12)
    assert torch.allclose(lm_head.weight.grad, head.grad[5 * rank:5 * rank + 5], rtol=1e-12, atol=1e-12)

# Gate and up, fed the same input, share one all-gather; a new pass gathers again.
gate_weight, up_weight = (torch.nn.Parameter(torch.randn(6, 8, dtype=torch.float64)) for _ in range(2))
full = x.detach().clone().requires_grad_()
h = full * 1.5
expected = F.silu(F.linear(h, gate_weight)) * F.linear(h, up_weight)
(expected * weights[:, None]).sum().backward()
tp = runtime.TensorParallel(group, rank, 2, True)
gate, up = runtime.ColumnParallelLinear(gate_weight, tp), runtime.ColumnParallelLinear(up_weight, tp)
gathers = []
all_gather = dist.all_gather
dist.all_gather = lambda *arguments, **options: (gathers.append(1), all_gather(*arguments, **options))[1]
for passes in (1, 2):
    tp.begin_pass(5)
    xs = x.detach()[2 * rank:2 + 3 * rank].clone().requires_grad_()
    h = xs * 1.5
    y = F.silu(gate(h)) * up(h)
    assert len(gathers) == passes
    assert torch.allclose(y, expected[:, 3 * rank:3 * rank + 3], rtol=1e-12, atol=1e-12)
    (y * weights[:, None]).sum().backward()
    assert torch.allclose(xs.grad, full.grad[2 * rank:2 + 3 * rank], rtol=1e-12, atol=1e-12)  # one reduce-scatter
dist.all_gather = all_gather

# A stage whose parameters are not slices of the model's is refused before it runs.
import sluice
profile = sluice.Profile.bundled("llama2-7b", gpus=2)
plan = sluice.plan_iteration([30, 20], ["1*tp2pp1"], profile)
engine = runtime.Runtime(torch.nn.Linear(2, 2), lambda model, spec: torch.nn.Linear(2, 2), layers=1, hidden=2,
                         profile=profile)
try:
    engine.step(plan, {0: torch.arange(30), 1: torch.arange(20)}, sluice.schedule_iteration(plan, profile))
except TypeError as error:
    assert "the stage's parameter weight is not a slice of the model's" in str(error), error
else:
    raise AssertionError("a stage of plain parameters ran")
dist.destroy_process_group()
"""


def test_tensor_parallel_layers_equal_their_unsharded_counterparts(tmp_path):
    tp_group_run(tmp_path, TP_LAYERS)


def test_tensor_parallel_refuses_a_degree_that_does_not_divide():
    from sluice import runtime

    tp = runtime.TensorParallel(None, 1, 3)
    with pytest.raises(ValueError, match="TP 3 does not divide the heads"):
        tp.share(4, "the heads")
    assert tp.part(9, "the vocabulary") == (3, 6)
    with pytest.raises(ValueError, match="3 layers cannot fill 4 pipeline stages"):
        runtime.layer_split(3, 4)
    assert runtime.layer_split(7, 3) == [0, 3, 5, 7]


def test_training_example_runs_the_planners_strategies_across_processes_as_documented():
    """docs/python.md's train_llama.py --pipelines command: every step's plan, a CP pipeline or heterogeneous ones
    with recomputation, run by sluice.runtime, its loss equal to the unpacked loss (--check)."""
    documented = HERE.parents[2] / "docs" / "python.md"
    command = ("torchrun --nproc_per_node 4 examples/python/train_llama.py --steps 2 --layers 4 --pipelines --check "
               "--candidates 1*tp1cp2ringpp2 1*tp2pp1+1*tp1pp2ac\n")
    assert command in documented.read_text()
    codes, outputs = run_like_torchrun(4, command.split()[3:], documented.parents[1])
    assert codes == [0] * 4, "\n".join(stdout + stderr for stdout, stderr in outputs)
    stdout = outputs[0][0]
    assert "check passed" in stdout and stdout.count("step ") >= 2, stdout


def test_runtime_imports_without_a_process_group():
    script = "import torch.distributed as dist; from sluice import runtime; assert not dist.is_initialized()"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=built_package_env())
    assert result.returncode == 0, result.stderr


def test_runtime_needs_a_process_group():
    from sluice import runtime

    with pytest.raises(RuntimeError, match="torch.distributed is not initialised"):
        runtime.Runtime(torch.nn.Linear(2, 2), lambda model, spec: model, layers=1, hidden=2,
                        profile=sluice.Profile.bundled("llama2-7b", gpus=4))


def test_documented_stage_builder_is_the_examples():
    """docs/python.md shows the trainer-side code of train_llama.py, which the tests above run: the same text."""
    document = (HERE.parents[2] / "docs" / "python.md").read_text()
    block = document.split("# doc-test: skip (train_llama.py defines and runs it under torchrun's processes)\n")[1]
    block = block.split("```")[0]
    assert "class LlamaStage" in block
    assert block in (HERE.parent / "train_llama.py").read_text()


TINY_BATCH = """
import sys, torch, torch.distributed as dist
sys.path.append(sys.argv[1])
import sluice
from sluice import runtime
from train_llama import Llama, LlamaStage, synthetic_sequence
dist.init_process_group("gloo")
torch.manual_seed(0)
model = Llama(64, 32, 2, 4).double()
profile = sluice.with_scheme_space(sluice.Profile.bundled("llama2-7b", gpus=4), cp=[2], cp_kinds=["ring", "ulysses"])
engine = runtime.Runtime(model, LlamaStage, layers=2, hidden=32, profile=profile)
lengths, ids = [1, 1, 2], [0, 1, 2]
sequences = {i: synthetic_sequence(i, n, 64, 3) for i, n in zip(ids, lengths)}
losses = []
for strategy in ["1*tp2pp2", "1*tp2cp2ringpp1", "1*tp2cp2ulyssespp1"]:
    plan = sluice.plan_iteration(lengths, [strategy], profile, ids=ids)
    losses.append(engine.step(plan, sequences, sluice.schedule_iteration(plan, profile)).loss)
assert all(abs(loss - losses[0]) <= 1e-12 * abs(losses[0]) for loss in losses), losses
dist.destroy_process_group()
"""


def test_a_micro_batch_of_fewer_tokens_than_lanes_runs(tmp_path):
    """Four tokens on TP 2 × CP 2: the second CP rank holds one of them, so its first TP lane has no rows under
    sequence parallelism and sends and receives empty tensors; every strategy gives the same loss."""
    path = tmp_path / "tiny.py"
    path.write_text(TINY_BATCH)
    codes, outputs = run_like_torchrun(4, [str(path), str(HERE.parent)], HERE)
    assert codes == [0] * 4, "\n".join(stdout + stderr for stdout, stderr in outputs)


def test_every_tp_degree_holds_one_contiguous_range_of_each_tensors_view():
    """The sharded optimizer moves tensors as views: for each TP layer and each TP degree, a lane's slice is exactly
    the view's fraction [⌊t·E/TP⌋, ⌊(t+1)·E/TP⌋)."""
    from sluice import runtime, sharded

    torch.manual_seed(0)
    layers = {"qkv": (lambda w, tp: runtime.ColumnParallelLinear(w, tp, blocks=3), (24, 8), 0, 3),
              "down": (runtime.RowParallelLinear, (8, 16), 1, 1),
              "embedding": (runtime.VocabParallelEmbedding, (16, 8), 0, 1)}
    for name, (make, shape, dim, blocks) in layers.items():
        master = torch.nn.Parameter(torch.randn(shape, dtype=torch.float64))
        tensor = sharded._Tensor(master, name, 0, dim, blocks, 0)
        view = tensor.view()
        assert sorted(view.tolist()) == list(range(master.numel()))
        for size in (1, 2, 4):
            for rank in range(size):
                lane = make(master, runtime.TensorParallel(None, rank, size)).weight
                begin, end = rank * master.numel() // size, (rank + 1) * master.numel() // size
                local = sharded._fraction_in_shard(tensor, lane, begin, end)
                assert torch.equal(lane.detach().view(-1)[local], master.detach().view(-1)[view[begin:end]]), name
                if size > 1:  # another lane's fraction is not this lane's
                    with pytest.raises(RuntimeError, match=f"slice of {name} holds other elements"):
                        other = (rank + 1) % size
                        sharded._fraction_in_shard(tensor, lane, other * master.numel() // size,
                                                   (other + 1) * master.numel() // size)


def test_sharded_optimizer_learns_the_models_groups_and_refuses_what_it_cannot_shard():
    sys.path.append(str(HERE.parent))
    from sluice import runtime, sharded
    from train_llama import Llama, LlamaStage

    def structure(model, build=LlamaStage, layers=3):
        return sharded._Structure(model, build, layers, runtime.StageSpec, runtime.TensorParallel)

    model = Llama(16, 8, 3, 2)
    learnt = structure(model)
    groups = [(g.held_by, g.replicated, g.layers, len(g.names)) for g in learnt.groups]
    assert groups == [("every_stage", False, 3, 5), ("every_stage", True, 3, 2), ("first_stage", False, 1, 1),
                      ("last_stage", False, 1, 1), ("last_stage", True, 1, 1)]
    assert learnt.elements == sum(p.numel() for p in model.parameters())
    assert learnt.groups[2].names == ["embed.weight"] and learnt.groups[4].names == ["norm.weight"]

    tied = Llama(16, 8, 3, 2)
    tied.head.weight = tied.embed.weight
    with pytest.raises(ValueError, match="embed.weight is used twice"):
        structure(tied)
    uneven = Llama(16, 8, 3, 2)
    uneven.blocks[2] = type(uneven.blocks[2])(8, 1)  # one head: its layer's attention splits otherwise
    uneven.blocks[2].qkv = torch.nn.Linear(8, 12, bias=False)
    with pytest.raises(ValueError, match="layer 2's parameters differ from layer 0's"):
        structure(uneven)
    with pytest.raises(ValueError, match="the model's parameter blocks.0.mlp_norm.weight is in no stage"):
        def skipping(model, spec):
            stage = LlamaStage(model, spec)
            for block in stage.blocks:
                block.mlp_norm = torch.nn.Identity()
            return stage

        structure(model, skipping)
    with pytest.raises(ValueError, match="the stages build_stage builds hold no parameters"):
        structure(model, lambda model, spec: torch.nn.Identity())
    with pytest.raises(TypeError, match="layer 0's parameter weight is not a slice of the model's"):
        structure(model, lambda model, spec: torch.nn.Linear(2, 2))
    for bad in ({"lr": float("nan")}, {"betas": (0.9, 1.0)}, {"eps": -1.0}, {"max_grad_norm": float("inf")}):
        with pytest.raises(ValueError, match="sluice.runtime.Adam"):
            runtime.Adam(**bad)
