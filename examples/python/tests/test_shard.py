"""shard: placements, optimizer layouts, the pull and push plans, their cost and rank placements, against
`sluice shard --json --plans` and `sluice plan --json`, their validators, documents, errors and threads."""
import json
import pickle
import threading

import numpy as np
import pytest

import sluice
from conftest import CANDIDATES_64, assert_close_json, json_of, without_header

GPUS = 16


@pytest.fixture(scope="module")
def model():
    """What `sluice shard` takes by default: llama2-7b as LLaMA-like layers."""
    return sluice.ShardModel.llama_like(sluice.Profile.bundled("llama2-7b"))


@pytest.fixture(scope="module")
def tiny():
    """Small enough for check_pull/check_push's host buffers (a few hundred KB)."""
    return sluice.ShardModel("tiny", 6, [sluice.ShardTensor("w", 96), sluice.ShardTensor("b", 40)])


def planned(strategy, model, *, previous=None, gpus=GPUS, gpus_per_node=8, match_owners=True):
    placing = sluice.PlacementOptions(gpus_per_node=gpus_per_node)
    placement = sluice.place(strategy, gpus, model.layers, options=placing)
    layout = (sluice.aligned_layout(sluice.place(previous, gpus, model.layers, options=placing))
              if previous else sluice.sharded_layout(gpus, model.layers))
    pull = sluice.plan_pull(placement, layout, model)
    push = sluice.plan_push(placement, layout, model, match_owners=match_owners)
    return placement, layout, pull, push


CASES = [
    ("1*tp8pp1+2*tp4pp1", None, True, 8),
    ("2*tp4pp2", "1*tp8pp1+2*tp4pp1", True, 8),
    ("4*tp2pp2", None, False, 4),
]


@pytest.mark.parametrize("strategy, previous, match_owners, gpus_per_node", CASES)
def test_plans_and_cost_match_the_tool(cli, model, strategy, previous, match_owners, gpus_per_node):
    args = ["shard", "--gpus", GPUS, "--strategy", strategy, "--gpus-per-node", gpus_per_node, "--plans"]
    args += ["--previous", previous] if previous else []
    args += [] if match_owners else ["--no-match"]
    document = cli(*args)
    placement, layout, pull, push = planned(strategy, model, previous=previous, gpus_per_node=gpus_per_node,
                                            match_owners=match_owners)
    assert without_header(json_of(model)) == document["model"]
    assert json_of(placement) == document["placement"]
    assert json_of(layout) == document["layout"]
    assert json_of(pull) == document["pull"]
    assert json_of(push) == document["push"]
    pull.validate(placement, layout, model)
    push.validate(placement, layout, model)
    assert (len(pull.sends), len(pull.local_moves), len(push.sends), len(push.local_moves), len(push.rs_groups)) == (
        document["pull_sends"], document["pull_local_moves"], document["push_sends"], document["push_local_moves"],
        document["rs_groups"])
    assert (push.grid, push.pipelines) == (document["grid"], document["pipelines"])
    assert [[b.layer_begin, b.layer_end] for b in pull.blocks] == [b["layers"] for b in document["blocks"]]
    assert [b.granularity for b in pull.blocks] == [b["pull_granularity"] for b in document["blocks"]]
    assert [b.granularity for b in push.blocks] == [b["push_granularity"] for b in document["blocks"]]

    cluster = sluice.ShardCluster(gpus_per_node=gpus_per_node)
    assert json.loads(cluster.to_json()) == document["cluster"]
    cost = sluice.plan_cost(pull, push, cluster)
    assert_close_json(json.loads(cost.to_json()), document["cost"])
    assert cost.seconds == pytest.approx(cost.pull.seconds + cost.reduce_scatter.seconds + cost.push.seconds)
    # iteration_cost prices the same pull without storing it (the tool's default matching only).
    if match_owners:
        if previous:
            priced = sluice.switching_cost(previous, strategy, GPUS, model, cluster,
                                           options=sluice.PlacementOptions(gpus_per_node=gpus_per_node))
        else:
            priced = sluice.iteration_cost(layout, strategy, model, cluster,
                                           options=sluice.PlacementOptions(gpus_per_node=gpus_per_node))
        assert_close_json(json.loads(priced.to_json()), document["cost"], rel=1e-12)


def test_rank_placements_and_layout_moves_match_the_tool(cli, profile_64, tmp_path):
    ids, lengths = [0, 1, 2, 3], [4096, 17000, 950, 2300]
    (tmp_path / "batch.json").write_text(json.dumps(lengths))
    document = cli("plan", "--profile", "llama2-32b", "--gpus", 64, "--strategies", ",".join(CANDIDATES_64),
                   "--batch", tmp_path / "batch.json", "--layout-moves", "all")
    iteration = document["iterations"][0]
    strategy = sluice.Strategy(iteration["strategy"])
    ranks = sluice.rank_placement(strategy, profile_64)
    ranks.validate(strategy, profile_64)
    assert without_header(json_of(ranks)) == iteration["placement"]

    # The sluice plan's layout moves: each candidate's pull and push (the reduce-scatter, which every system pays
    # once, is not charged), on the profile's cluster, beyond those from its own layout: that pull is the all-gather
    # a static strategy with sharded states pays, uncharged as well.
    model = sluice.ShardModel.llama_like(profile_64)
    layout = sluice.sharded_layout(64, model.layers)
    overheads = sluice.iteration_costs(layout, CANDIDATES_64, model)
    assert overheads.dtype == np.float64 and overheads.shape == (len(CANDIDATES_64),)
    costs = [sluice.iteration_cost(layout, candidate, model) for candidate in CANDIDATES_64]
    assert overheads.tolist() == [cost.seconds for cost in costs]
    problem = sluice.ProblemOptions(hidden=profile_64.hidden, latency=1e-5, bandwidth=100e9)
    options = sluice.PlanOptions(layout_moves="all", problem=problem)
    planner = sluice.IterationPlanner(profile_64, CANDIDATES_64, options)
    own = [sluice.switching_cost(candidate, candidate, 64, model) for candidate in CANDIDATES_64]
    moves = [cost.pull.seconds + cost.push.seconds - (mine.pull.seconds + mine.push.seconds)
             for cost, mine in zip(costs, own)]
    assert min(moves) > 0
    assert_close_json(planner.layout_moves.tolist(), moves)
    assert planner.charged.tolist() == planner.layout_moves.tolist()
    simulated = planner.plan(lengths, ids=ids)
    assert simulated.plan.strategy == strategy
    assert (simulated.plan.overhead, simulated.total) == (iteration["layout_move"], iteration["total"])


def test_rank_placement_structure(profile_64):
    strategy = sluice.Strategy("2*tp16pp1+4*tp4pp2")
    ranks = sluice.rank_placement(strategy, profile_64)
    pipelines = profile_64.pipelines(strategy)
    assert len(ranks.plan_order) == len(pipelines) == len(ranks.placement.pipelines)
    for j, pipeline in enumerate(pipelines):
        assert ranks.placement.pipelines[ranks.plan_order[j]].scheme == pipeline.scheme
    groups = ranks.groups
    assert len(groups.tp) == sum(p.scheme.pp for p in pipelines)
    assert len(groups.pp) == sum(p.scheme.tp for p in pipelines)
    assert sorted(r for group in groups.dp for r in group) == sorted(r for group in groups.tp for r in group)
    assert all(len({r // ranks.gpus_per_node for r in group}) == 1 for group in groups.tp if len(group) <= 8)
    spread = sluice.rank_placement(strategy, profile_64, tp_within_node=False)
    assert not spread.tp_within_node
    spread.validate(strategy, profile_64)
    with pytest.raises(sluice.InvalidPlan):
        ranks.validate("4*tp16pp1", profile_64)


def test_piece_and_message_views(model):
    placement, layout, pull, push = planned("1*tp8pp1+2*tp4pp1", model)
    document = json_of(pull)
    for plan in (pull, push):
        pieces, sends, local = plan.pieces, plan.sends, plan.local_moves
        assert pieces.dtype.names == ("block", "begin", "end")
        assert sends.dtype.names == ("src", "dst", "first_piece", "piece_count", "bytes")
        assert sends.dtype["first_piece"] == np.uint32 and sends.dtype["piece_count"] == np.uint32
        assert not pieces.flags.writeable and not sends.flags.writeable and not local.flags.writeable
        assert int(sends["bytes"].sum()) == plan.send_bytes and int(local["bytes"].sum()) == plan.local_bytes
        assert np.all(sends["src"] != sends["dst"]) and np.all(local["src"] == local["dst"])
        assert np.all(pieces["begin"] < pieces["end"])
    assert [list(p) for p in pull.pieces.tolist()] == document["pieces"]
    assert pull.sends[["src", "dst"]].tolist() == [(m["src"], m["dst"]) for m in document["sends"]]
    view = pull.sends
    expected = view.copy()
    del pull
    assert np.array_equal(view, expected)


def test_placement_options_and_layouts(model):
    placement = sluice.place("1*tp8pp1+1*tp4pp2", GPUS, model.layers,
                             options=sluice.PlacementOptions(order="tp_ascending", stage_layers={2: [10, 22]}))
    placement.validate()
    assert [p.scheme.tp for p in placement.pipelines] == [4, 8]
    assert [[s.layer_begin, s.layer_end] for s in placement.pipelines[0].stages] == [[0, 10], [10, 32]]
    assert placement.pipelines[0].stages[0].ranks == [0, 1, 2, 3]
    used = [r for p in placement.pipelines for s in p.stages for r in s.ranks]
    assert sorted(used) == list(range(GPUS))
    sharded = sluice.sharded_layout(GPUS, model.layers)
    assert len(sharded.groups) == 1 and np.array_equal(sharded.groups[0].owners, np.arange(GPUS))
    assert not sharded.groups[0].owners.flags.writeable
    # A strategy's own layout: pushing into it is a reduce-scatter alone, nothing sent afterwards.
    aligned = sluice.aligned_layout(placement)
    aligned.validate()
    push = sluice.plan_push(placement, aligned, model)
    assert len(push.sends) == 0 and push.send_bytes == 0 and push.local_bytes > 0
    custom = sluice.OptimizerLayout(GPUS, model.layers, [sluice.OwnerGroup(0, 16, list(range(8))),
                                                         sluice.OwnerGroup(16, 32, list(range(8, 16)))])
    custom.validate()
    pull = sluice.plan_pull(placement, custom, model)
    pull.validate(placement, custom, model)


def test_host_checks_on_a_tiny_model(tiny):
    placement = sluice.place("1*tp4pp1+2*tp2pp1", 8, tiny.layers, options=sluice.PlacementOptions(gpus_per_node=4))
    for layout in (sluice.sharded_layout(8, tiny.layers), sluice.aligned_layout(sluice.place("2*tp2pp2", 8, 6))):
        pull = sluice.plan_pull(placement, layout, tiny)
        push = sluice.plan_push(placement, layout, tiny)
        sluice.check_pull(pull, placement, layout, tiny, seed=3)
        sluice.check_push(push, placement, layout, tiny, seed=3)
    # A message redirected to the wrong rank: the validator and the host check both catch it.
    document = json_of(pull)
    message = document["sends"][0]
    message["dst"] = next(r for r in range(8) if r not in (message["src"], message["dst"]))
    broken = sluice.PullPlan.from_json(json.dumps(document))
    with pytest.raises(sluice.InvalidPlan):
        broken.validate(placement, layout, tiny)
    with pytest.raises(sluice.InvalidPlan):
        sluice.check_pull(broken, placement, layout, tiny)


def test_holder_placements_of_first_last_and_replicated_tensors(tiny):
    placement = sluice.place("1*tp2cp2ringpp2+1*tp1pp2", 10, tiny.layers)
    assert sluice.holder_placement(placement, "every_stage", replicated=False) == placement
    embedding = sluice.holder_placement(placement, "first_stage", replicated=False)
    assert embedding.layers == 1
    assert [[list(s.ranks) for s in p.stages] for p in embedding.pipelines] == [[[0, 1, 2, 3]], [[8]]]
    norms = sluice.holder_placement(placement, "last_stage", replicated=True)
    assert [[list(s.ranks) for s in p.stages] for p in norms.pipelines] == [[[4]], [[5]], [[6]], [[7]], [[9]]]
    for held in (embedding, norms):
        one_layer = sluice.ShardModel("held", 1, [sluice.ShardTensor("w", 24)])
        layout = sluice.sharded_layout(10, 1)
        sluice.check_pull(sluice.plan_pull(held, layout, one_layer), held, layout, one_layer, seed=5)
        sluice.check_push(sluice.plan_push(held, layout, one_layer), held, layout, one_layer, seed=5)
    with pytest.raises(sluice.InvalidInput, match="held_by must be 'every_stage', 'first_stage' or 'last_stage', "
                                                  "got 'middle'"):
        sluice.holder_placement(placement, "middle", replicated=False)


def test_documents_round_trip(model, profile_64, tmp_path):
    placement, layout, pull, push = planned("2*tp4pp2", model, previous="1*tp8pp1+2*tp4pp1")
    ranks = sluice.rank_placement("2*tp16pp1+4*tp4pp2", profile_64)
    for value in (model, placement, layout, pull, push, ranks):
        cls = type(value)
        assert cls.from_json(value.to_json()) == value
        assert pickle.loads(pickle.dumps(value)) == value
        value.save(tmp_path / "document.json")
        assert cls.load(tmp_path / "document.json") == value
    cluster = sluice.ShardCluster(gpus_per_node=4, inter_node=sluice.Link(2e-5, 12.5e9))
    assert sluice.ShardCluster.from_json(cluster.to_json()) == cluster


def test_validators_catch_broken_results(model):
    placement, layout, pull, push = planned("1*tp8pp1+2*tp4pp1", model)
    document = json_of(placement)
    document["pipelines"][1]["stages"][0]["ranks"][0] = 0
    with pytest.raises(sluice.InvalidPlan, match="used twice"):
        sluice.Placement.from_json(json.dumps(document)).validate()
    document = json_of(layout)
    document["groups"][0]["owners"][3] = GPUS
    with pytest.raises(sluice.InvalidPlan):
        sluice.OptimizerLayout.from_json(json.dumps(document)).validate()
    other = sluice.aligned_layout(sluice.place("2*tp4pp2", GPUS, model.layers))
    with pytest.raises(sluice.InvalidPlan):
        pull.validate(placement, other, model)
    with pytest.raises(sluice.InvalidPlan):
        push.validate(placement, other, model)


def test_bad_inputs(model):
    with pytest.raises(sluice.Infeasible):
        sluice.place("3*tp3pp1", 9, model.layers)
    with pytest.raises(sluice.InvalidInput):
        sluice.place("1*tp8pp1", 0, model.layers)
    # The options' own fields are checked when they are made (test_options.py); the stage sums need the model.
    with pytest.raises(sluice.InvalidInput, match="stage_layers for pp 2 sum to 20"):
        sluice.place("1*tp4pp2", 8, model.layers, options=sluice.PlacementOptions(stage_layers={2: [10, 10]}))
    with pytest.raises(sluice.InvalidInput):
        sluice.ShardModel("m", 0, [sluice.ShardTensor("w", 8)])
    with pytest.raises(sluice.InvalidInput, match="listed twice"):
        sluice.ShardModel("m", 2, [sluice.ShardTensor("w", 8), sluice.ShardTensor("w", 4)])
    with pytest.raises(sluice.InvalidInput):
        sluice.ShardCluster(gpus_per_node=0)
    with pytest.raises(sluice.InvalidInput):
        sluice.ShardCluster(local=sluice.Link(float("nan"), 1e9))
    placement = sluice.place("2*tp4pp1", 8, model.layers)
    with pytest.raises(sluice.InvalidInput, match="layers"):
        sluice.plan_pull(placement, sluice.sharded_layout(8, model.layers + 1), model)
    with pytest.raises(sluice.InvalidInput, match="GPUs"):
        sluice.plan_push(placement, sluice.sharded_layout(16, model.layers), model)
    broken = sluice.ShardModel("m", model.layers, [sluice.ShardTensor("w", 8)])
    broken.param_bytes = 0
    with pytest.raises(sluice.InvalidInput, match="param_bytes"):
        sluice.plan_pull(placement, sluice.sharded_layout(8, model.layers), broken)
    with pytest.raises(sluice.InvalidInput, match="16384"):
        sluice.sharded_layout(16385, 4)  # past the shard planner's maximum of 2^14 GPUs


def test_deterministic_and_thread_safe(model):
    def work():
        placement, layout, pull, push = planned("1*tp8pp1+2*tp4pp1", model, gpus=32)
        return pull, push, sluice.iteration_cost(layout, "4*tp8pp1", model)

    reference = work()
    assert work() == reference
    results = [None] * 4

    def run(slot):
        results[slot] = work()

    workers = [threading.Thread(target=run, args=(slot,)) for slot in range(len(results))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert all(result == reference for result in results)
