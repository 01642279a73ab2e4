"""sluice.torch: packed micro-batches against the plan, the input errors, the block-causal mask and varlen
attention against brute force, the training example's packed loss against the unpacked one, and sluice without
PyTorch."""
import itertools
import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import sluice  # noqa: E402
import sluice.torch as st  # noqa: E402
from launch import built_package_env, free_port, run_like_torchrun  # noqa: E402

EXAMPLES = pathlib.Path(__file__).resolve().parents[1]
CANDIDATES = ["4*tp1pp2", "2*tp2pp2", "2*tp1pp2+1*tp2pp2", "1*tp4pp2"]
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.fixture(scope="module")
def profile():
    return sluice.Profile.bundled("llama2-7b", gpus=8)


@pytest.fixture(scope="module")
def planned(profile):
    dataset = sluice.LengthDataset.bundled("man-pages").truncated(2048)
    sampler = sluice.BatchSampler(dataset, tokens_per_batch=20_000, seed=2)
    options = sluice.PlanOptions(dispatch=sluice.DispatchOptions(seed=1))
    with sluice.Planner(profile, CANDIDATES, itertools.islice(sampler, 1), options) as planner:
        return next(planner)


def tokens_of(ids, lengths):
    generator = torch.Generator().manual_seed(7)
    return {i: torch.randint(1000, (n,), generator=generator) for i, n in zip(ids, lengths)}


@pytest.fixture(scope="module")
def sequences(planned):
    return tokens_of(planned.ids.tolist(), planned.lengths.tolist())


def check_packed(plan, sequences, expected_ids, normaliser):
    seen = []
    iteration = plan.plan if isinstance(plan, sluice.Planned) else plan
    for pipeline, pipeline_plan in enumerate(iteration.pipelines):
        packed = st.micro_batches(plan, sequences, pipeline=pipeline)
        assert len(packed) == len(pipeline_plan.micro_batches)
        for batch, micro_batch in zip(packed, pipeline_plan.micro_batches):
            ids = micro_batch.sequence_ids.tolist()
            assert batch.sequence_ids == ids
            seen += ids
            assert torch.equal(batch.tokens, torch.cat([sequences[i] for i in ids]))
            assert batch.cu_seqlens.dtype == torch.int32 and batch.cu_seqlens[0] == 0
            sizes = (batch.cu_seqlens[1:] - batch.cu_seqlens[:-1]).tolist()
            assert sizes == [len(sequences[i]) for i in ids] and sum(sizes) == micro_batch.tokens
            assert batch.max_seqlen == max(sizes)
            bounds = batch.cu_seqlens.tolist()
            for i, start, end in zip(ids, bounds[:-1], bounds[1:]):
                assert torch.equal(batch.positions[start:end], torch.arange(end - start))
                assert torch.equal(batch.labels[start : end - 1], sequences[i][1:])
                assert batch.labels[end - 1] == st.IGNORE_INDEX  # never the next sequence's first token
            assert batch.target_count == int((batch.labels != st.IGNORE_INDEX).sum()) == micro_batch.tokens - len(ids)
            assert batch.loss_normaliser == normaliser
    assert sorted(seen) == sorted(expected_ids)  # every sequence exactly once across the pipelines


def test_planned_item_packs_as_planned(planned, sequences):
    assert len(planned.plan.pipelines) > 1 and any(len(p.micro_batches) > 1 for p in planned.plan.pipelines)
    normaliser = int(planned.lengths.sum()) - len(planned.lengths)
    assert st.loss_normaliser(planned) == st.loss_normaliser(planned.plan) == normaliser
    check_packed(planned, sequences, planned.ids.tolist(), normaliser)


def test_pack_packs_any_ids_as_micro_batches_packs_a_plans(planned, sequences):
    micro_batch = planned.plan.pipelines[0].micro_batches[0]
    normaliser = st.loss_normaliser(planned)
    [expected, *_] = st.micro_batches(planned, sequences, pipeline=0)
    batch = st.pack(sequences, micro_batch.sequence_ids.tolist(), loss_normaliser=normaliser)
    for field in ("tokens", "positions", "labels", "cu_seqlens"):
        assert torch.equal(getattr(batch, field), getattr(expected, field))
    assert (batch.sequence_ids, batch.max_seqlen, batch.target_count, batch.loss_normaliser) == (
        expected.sequence_ids, expected.max_seqlen, expected.target_count, expected.loss_normaliser)
    reordered = list(reversed(planned.ids.tolist()[:3]))  # ids no micro-batch of the plan holds together
    assert st.pack(sequences, reordered, loss_normaliser=normaliser).sequence_ids == reordered
    with pytest.raises(ValueError, match="at least one sequence"):
        st.pack(sequences, [], loss_normaliser=normaliser)
    with pytest.raises(ValueError, match="the plan has 1"):
        st.pack(sequences, reordered[:1], loss_normaliser=normaliser, lengths={reordered[0]: 1})


def test_iteration_plan_with_a_list_of_sequences(profile):
    lengths = np.array([1800, 1, 700, 2, 1500, 64, 900, 333, 1200, 5, 410], dtype=np.int64)
    plan = sluice.plan_iteration(lengths, CANDIDATES, profile, dispatch=sluice.DispatchOptions(seed=3))
    sequences = list(tokens_of(range(len(lengths)), lengths.tolist()).values())
    check_packed(plan, sequences, list(range(len(lengths))), int(lengths.sum()) - len(lengths))
    on_device = st.micro_batches(plan, sequences, pipeline=0, device="cpu")
    assert all(b.tokens.device.type == "cpu" and b.cu_seqlens.device.type == "cpu" for b in on_device)


def test_packed_loss_is_the_unpacked_mean(planned, sequences):
    # Any per-token loss: summed over every micro-batch of every rank and divided by the normaliser, it is the
    # mean over the unpacked batch's targets.
    table = torch.randn(1000, 1000, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    packed = sum(
        torch.nn.functional.cross_entropy(table[b.tokens], b.labels, ignore_index=st.IGNORE_INDEX, reduction="sum")
        / b.loss_normaliser
        for pipeline in range(len(planned.plan.pipelines))
        for b in st.micro_batches(planned, sequences, pipeline=pipeline)
    )
    unpacked = torch.nn.functional.cross_entropy(
        torch.cat([table[s[:-1]] for s in sequences.values()]), torch.cat([s[1:] for s in sequences.values()])
    )
    assert math.isclose(packed.item(), unpacked.item(), rel_tol=1e-12)


def test_bad_inputs_raise(planned, sequences):
    plan = planned.plan
    count = len(plan.pipelines)
    first = plan.pipelines[0].micro_batches[0].sequence_ids[0].item()
    for pipeline in (-1, count, 0.0, None):
        with pytest.raises(ValueError, match=rf"pipeline must be in \[0, {count}\)"):
            st.micro_batches(planned, sequences, pipeline=pipeline)
    missing = {i: s for i, s in sequences.items() if i != first}
    with pytest.raises(ValueError, match=f"sequence id {first} is not in sequences"):
        st.micro_batches(planned, missing, pipeline=0)
    with pytest.raises(ValueError, match=f"sequence id {first} is not in sequences"):
        st.micro_batches(planned, [], pipeline=0)
    longer = {**sequences, first: torch.cat([sequences[first], sequences[first][:1]])}
    expected = len(sequences[first])
    with pytest.raises(ValueError, match=f"sequence {first} has {expected + 1} tokens, the plan has {expected}"):
        st.micro_batches(planned, longer, pipeline=0)
    with pytest.raises(ValueError, match=r"micro-batch 0: its sequences have \d+ tokens, the plan has \d+"):
        st.micro_batches(plan, longer, pipeline=0)
    for bad in (sequences[first].float(), sequences[first][None, :]):
        with pytest.raises(ValueError, match=f"sequence {first} must be a 1-D integer tensor"):
            st.micro_batches(planned, {**sequences, first: bad}, pipeline=0)
    with pytest.raises(TypeError, match="sluice.IterationPlan or a sluice.Planned"):
        st.micro_batches("plan", sequences, pipeline=0)


def test_block_causal_mask_against_brute_force():
    sizes = [3, 1, 5, 2]
    cu = torch.tensor([0, *itertools.accumulate(sizes)], dtype=torch.int32)
    owner = [s for s, n in enumerate(sizes) for _ in range(n)]
    total = sum(sizes)
    expected = torch.tensor([[owner[i] == owner[j] and j <= i for j in range(total)] for i in range(total)])
    assert torch.equal(st.block_causal_mask(cu), expected)


def reference_attention(q, k, v, cu_seqlens, scale):
    """Each sequence alone, causal, in float64 from the definition."""
    out = torch.empty_like(q, dtype=torch.float64)
    bounds = cu_seqlens.tolist()
    for start, end in zip(bounds[:-1], bounds[1:]):
        for i in range(start, end):
            scores = torch.einsum("hd,khd->hk", q[i].double(), k[start : i + 1].double()) * scale
            out[i] = torch.einsum("hk,khd->hd", scores.softmax(-1), v[start : i + 1].double())
    return out


@pytest.mark.parametrize("softmax_scale", [None, 0.3])
def test_varlen_attention_against_each_sequence_alone(softmax_scale):
    generator = torch.Generator().manual_seed(4)
    sizes, heads, dim = [7, 1, 12, 4], 3, 8
    cu = torch.tensor([0, *itertools.accumulate(sizes)], dtype=torch.int32)
    q, k, v = (torch.randn(sum(sizes), heads, dim, generator=generator) for _ in range(3))
    out = st.varlen_attention(q, k, v, cu, max(sizes), softmax_scale=softmax_scale)
    assert out.shape == q.shape and out.dtype == q.dtype
    scale = softmax_scale if softmax_scale is not None else 1 / math.sqrt(dim)
    torch.testing.assert_close(out.double(), reference_attention(q, k, v, cu, scale), rtol=0, atol=1e-6)
    # The same as one masked attention over the whole micro-batch.
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    scores = scores.masked_fill(~st.block_causal_mask(cu), float("-inf"))
    masked = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v)
    torch.testing.assert_close(out, masked, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match=r"\(total, heads, head_dim\)"):
        st.varlen_attention(q[:, 0], k[:, 0], v[:, 0], cu, max(sizes))


@CUDA
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_varlen_attention_on_cuda(dtype):
    # bfloat16 takes flash_attn_varlen_func where flash_attn is installed, else SDPA's fused kernels.
    generator = torch.Generator().manual_seed(5)
    sizes, heads, dim = [300, 1, 77, 512], 4, 64
    cu = torch.tensor([0, *itertools.accumulate(sizes)], dtype=torch.int32)
    q, k, v = (torch.randn(sum(sizes), heads, dim, generator=generator) for _ in range(3))
    out = st.varlen_attention(*(t.to("cuda", dtype) for t in (q, k, v)), cu.cuda(), max(sizes))
    assert out.dtype == dtype and out.is_cuda
    expected = reference_attention(q, k, v, cu, 1 / math.sqrt(dim))
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out.cpu().double(), expected, rtol=0, atol=tolerance)


@pytest.mark.parametrize("device, dtype", [("cpu", "float32"), ("cpu", "bfloat16"),
                                           pytest.param("cuda", "bfloat16", marks=CUDA)])
def test_training_example_packed_loss_equals_unpacked(device, dtype):
    # Run from its own directory, where the source sluice/ would shadow the built package if it stayed on sys.path.
    result = subprocess.run(
        [sys.executable, "train_llama.py", "--steps", "2", "--check", "--device", device, "--dtype", dtype,
         "--dim", "32", "--layers", "2", "--heads", "2", "--vocab", "64", "--max-len", "256",
         "--tokens-per-batch", "3000"],
        cwd=EXAMPLES, env=built_package_env(), capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "check passed" in result.stdout and result.stdout.count(", unpacked ") == 2


def test_sluice_imports_without_torch():
    script = (
        "import sys; sys.modules['torch'] = None\n"
        "import sluice; sluice.Scheme(1, 2)\n"
        "try:\n"
        "    import sluice.torch\n"
        "except ImportError as error:\n"
        "    print(error)\n"
        "else:\n"
        "    sys.exit('imported')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=built_package_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "sluice.torch needs PyTorch" in result.stdout and "rest of sluice works without it" in result.stdout


def test_training_example_as_documented():
    """docs/python.md's CPU command, with the example's default sizes."""
    documented = pathlib.Path(__file__).resolve().parents[3] / "docs" / "python.md"
    command = "examples/python/train_llama.py --steps 2 --check\n"
    assert command in documented.read_text()
    result = subprocess.run([sys.executable, *command.split()], cwd=documented.parents[1], env=built_package_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "check passed" in result.stdout


# The training example's small model, for the runs compared across process counts.
SMALL_MODEL = ["--steps", "1", "--check", "--dim", "32", "--layers", "2", "--heads", "2", "--vocab", "64",
               "--tokens-per-batch", "3000"]


# cpython-stdlib's first batch holds sequences short enough for one process beside 256-token ones, which a flex CP
# domain runs in groups of one and of several side by side.
FLEX_MODEL = [*SMALL_MODEL, "--lengths", "cpython-stdlib"]


def one_process_run(tmp_path_factory, arguments):
    path = tmp_path_factory.mktemp("one") / "gradients.pt"
    result = subprocess.run([sys.executable, "train_llama.py", *arguments, "--save-gradients", str(path)],
                            cwd=EXAMPLES, env=built_package_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout, torch.load(path)


@pytest.fixture(scope="module")
def one_process_gradients(tmp_path_factory):
    return one_process_run(tmp_path_factory, SMALL_MODEL)


@pytest.fixture(scope="module")
def flex_one_process_gradients(tmp_path_factory):
    return one_process_run(tmp_path_factory, FLEX_MODEL)


def assert_same_step(out, gradients_path, one_process):
    """The first step's loss and summed gradients are the one-process run's."""
    expected_out, expected = one_process
    loss_of = lambda text: float(text.split(" loss ")[1].split(",")[0])  # noqa: E731
    assert loss_of(out) == pytest.approx(loss_of(expected_out), rel=1e-6)
    gradients = torch.load(gradients_path)
    assert gradients.keys() == expected.keys()
    for name, gradient in expected.items():
        error = float((gradients[name] - gradient).norm() / gradient.norm())
        assert error <= 1e-5, f"{name}: {error:.2e}"


@pytest.mark.parametrize("world, attention", [(4, "ring"), (2, "ulysses")])
def test_training_example_with_context_parallelism_equals_one_process(world, attention, one_process_gradients,
                                                                       tmp_path):
    """Data-parallel groups × CP 2 processes (gloo): the first step's loss and summed gradients are the one-process
    run's on the same plan."""
    path = tmp_path / "gradients.pt"
    arguments = [*SMALL_MODEL, "--cp", "2", "--cp-attention", attention, "--save-gradients", str(path)]
    codes, outputs = run_like_torchrun(world, ["train_llama.py", *arguments], EXAMPLES)
    assert codes == [0] * world, outputs
    out = outputs[0][0]
    assert f"processes: {world} = {world // 2} data-parallel groups × CP 2 ({attention} attention)" in out
    assert "check passed" in out
    assert all(not stdout for stdout, _ in outputs[1:])  # only rank 0 prints
    assert_same_step(out, path, one_process_gradients)


@pytest.mark.parametrize("world, attention", [(4, "ring"), (2, "ulysses")])
def test_training_example_with_flex_cp_groups_equals_one_process(world, attention, flex_one_process_gradients,
                                                                 tmp_path):
    """The processes as one flex CP domain whose groups change per micro-batch (gloo): the first step's loss and
    summed gradients are the one-process run's on the same batch."""
    path = tmp_path / "gradients.pt"
    arguments = [*FLEX_MODEL, "--flex-cp", "--cp-attention", attention, "--save-gradients", str(path)]
    codes, outputs = run_like_torchrun(world, ["train_llama.py", *arguments], EXAMPLES)
    assert codes == [0] * world, outputs
    out = outputs[0][0]
    degrees = "1, 2, 4" if world == 4 else "1, 2"
    assert f"processes: {world} units of one flex CP domain, groups of {degrees} ({attention} attention)" in out
    assert "check passed" in out
    layout = out.split("CP groups per micro-batch [")[1].split("]")[0]
    # Groups of several processes beside groups of one: the case this test is for.
    assert any("+" in micro_batch for micro_batch in layout.split(" | ")), layout
    assert any(size != "1" for size in layout.replace(" | ", "+").split("+")), layout
    assert_same_step(out, path, flex_one_process_gradients)


@pytest.mark.parametrize("option", ["--cp 2", "--flex-cp"])
def test_training_example_with_context_parallelism_as_documented(option):
    """docs/python.md's torchrun commands, their processes started as torchrun starts them."""
    documented = pathlib.Path(__file__).resolve().parents[3] / "docs" / "python.md"
    command = f"torchrun --nproc_per_node 4 examples/python/train_llama.py --steps 2 {option} --check\n"
    assert command in documented.read_text()
    codes, outputs = run_like_torchrun(4, command.split()[3:], documented.parents[1])
    assert codes == [0] * 4, outputs
    assert "check passed" in outputs[0][0]


def test_training_example_refuses_a_cp_degree_the_processes_do_not_fill():
    result = subprocess.run([sys.executable, "train_llama.py", "--cp", "2"], cwd=EXAMPLES, env=built_package_env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "--cp 2 must be a positive divisor of the 1 processes" in result.stderr


def test_training_example_refuses_flex_cp_without_processes():
    result = subprocess.run([sys.executable, "train_llama.py", "--flex-cp"], cwd=EXAMPLES, env=built_package_env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "--flex-cp forms its own CP groups of torchrun's processes: needs WORLD_SIZE >= 2" in result.stderr


def test_training_example_ends_when_the_store_does_not_answer():
    """A process whose rendezvous store never answers fails within --timeout, its last line saying so (PyTorch's
    C++ logging may write its own lines before it), instead of waiting."""
    env = built_package_env()
    env.update(RANK="1", LOCAL_RANK="1", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    result = subprocess.run([sys.executable, "train_llama.py", "--cp", "2", "--timeout", "2"], cwd=EXAMPLES, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    last = result.stderr.splitlines()[-1]
    assert last.startswith("train_llama.py: rank 1 of 2: the process group did not start:"), result.stderr
    assert "Traceback" not in result.stderr
