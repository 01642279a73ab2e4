"""sluice.read_document: any sluice document, the command-line tool's reports included, read as its format's class;
a format without a class, or a malformed file, is InvalidInput naming the file."""
import collections
import json
import pathlib

import pytest

import sluice

GOLDEN = pathlib.Path(__file__).resolve().parents[3] / "test" / "golden"
REPORT_CLASSES = {"fit": sluice.FitRun, "inspect": sluice.Inspect, "plan": sluice.PlanRun, "propose": sluice.Proposal,
                  "propose_sampled": sluice.SampledProposal, "schedule": sluice.ScheduleRun,
                  "search": sluice.SearchReport, "shard": sluice.ShardRun, "simulate": sluice.SimulateRun,
                  "trace": sluice.TraceRun}
# One derived scheme as `sluice inspect --cp 2 --json` writes it.
CONTEXT_PARALLEL = {
    "degree": 2, "kind": "ring", "ulysses": 1, "recompute": False, "heads": 32, "kv_heads": 32,
    "link": {"latency": 1e-5, "bandwidth": 1.5e11}, "cross_node_link": {"latency": 2e-5, "bandwidth": 5e10},
    "schemes": [{"scheme": "tp1cp2ringpp1", "gpus": 2, "max_len": 8192,
                 "fit": {"a": 1e-9, "b": 1e-6, "c": 1e-3, "relative_rms_error": 0.01},
                 "times": [{"length": 1024, "seconds": 0.1, "fits": True},
                           {"length": 4096, "seconds": 0.2, "fits": True},
                           {"length": 16384, "seconds": 0.4, "fits": False},
                           {"length": 32768, "seconds": 0.8, "fits": False}]}],
    "not_derived": []}
# What `sluice search` adds to the library's report: its inputs' names and the sweep's limit.
TOOL_ONLY = {"search": {"at_sweep_limit", "cluster", "memory_bytes", "model"}}


def recorded(name, directory):
    """A recorded report, its measured planning times (blanked in the recording) put back as numbers."""
    path = directory / f"{name}.json"
    path.write_text((GOLDEN / f"{name}.json").read_text().replace('"measured"', "0.25"))
    return path


@pytest.mark.parametrize("name", sorted(REPORT_CLASSES))
def test_a_report_reads_as_its_class_and_writes_back_the_same_document(name, tmp_path):
    path = recorded(name, tmp_path)
    report = sluice.read_document(path)
    assert type(report) is REPORT_CLASSES[name]
    written = {key: value for key, value in json.loads(path.read_text()).items()
               if key not in TOOL_ONLY.get(name, set())}
    assert json.loads(report.to_json()) == written
    assert type(report).load(path).to_json() == report.to_json()


def test_a_format_without_a_class_is_invalid_input_naming_it(tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"format": "sluice.milp", "version": 1}))
    with pytest.raises(sluice.InvalidInput, match=f"{path}: format 'sluice.milp' has no Python class"):
        sluice.read_document(path)


def test_an_inspect_report_holds_the_profile_and_the_derived_schemes(tmp_path):
    report = sluice.read_document(GOLDEN / "inspect.json")
    document = json.loads((GOLDEN / "inspect.json").read_text())
    assert report.context_parallel is None and report.dataset.context is None
    assert report.profile.model.layers == document["profile"]["model"]["layers"]
    assert [(scheme.cost.scheme.tp, [time.fits for time in scheme.times]) for scheme in report.profile.schemes] == [
        (scheme["tp"], [time["fits"] for time in scheme["times"]]) for scheme in document["profile"]["schemes"]]
    cp = tmp_path / "inspect_cp.json"
    cp.write_text(json.dumps(dict(document, context_parallel=CONTEXT_PARALLEL)))
    derived = sluice.read_document(cp).context_parallel
    assert (derived.degree, derived.kind, derived.link, derived.cross_node_link.bandwidth) == (
        2, "ring", sluice.Link(1e-5, 1.5e11), 5e10)
    scheme = derived.schemes[0]
    assert (scheme.scheme.cp, scheme.max_len, scheme.fit.relative_rms_error, scheme.fit.latency.a) == (
        2, 8192, 0.01, 1e-9)
    assert [time.fits for time in scheme.times] == [True, True, False, False]
    assert sluice.Inspect.from_json(sluice.read_document(cp).to_json()) == sluice.read_document(cp)


def test_a_saved_object_reads_back_equal(tmp_path):
    profile = sluice.Profile.bundled("llama2-7b", gpus=8)
    profile.save(tmp_path / "profile.json")
    assert sluice.read_document(tmp_path / "profile.json").to_json() == profile.to_json()
    run = sluice.read_document(GOLDEN / "shard.json")
    run.save(tmp_path / "shard.json")
    assert sluice.read_document(tmp_path / "shard.json") == run


def test_report_properties_come_from_the_document():
    run = sluice.read_document(GOLDEN / "schedule.json")
    document = json.loads((GOLDEN / "schedule.json").read_text())
    assert (run.replicas, run.schedule, run.makespan) == (document["replicas"], document["schedule"],
                                                          document["makespan"])
    assert run.tokens_per_second == pytest.approx(document["tokens_per_second"])
    scheduled = [replica for replica in run.replica_schedules if replica.schedule is not None]
    assert scheduled and list(scheduled[0].schedule.injection) == document["replica_schedules"][0]["injection"]
    fit = sluice.read_document(GOLDEN / "fit.json")
    assert [scheme.usable for scheme in fit.schemes] == [scheme["usable"] for scheme in json.loads(
        (GOLDEN / "fit.json").read_text())["schemes"]]


def test_a_plan_report_holds_each_iterations_plan_and_the_summary_counts_them(tmp_path):
    run = sluice.read_document(recorded("plan", tmp_path))
    document = json.loads((tmp_path / "plan.json").read_text())
    read_parts = [[(part.scheme.tp, part.scheme.pp, part.pipelines) for part in strategy.parts]
                  for strategy in run.candidates]
    assert read_parts == [[(part["tp"], part["pp"], part["pipelines"]) for part in strategy["parts"]]
                          for strategy in document["candidates"]["strategies"]]
    assert [(iteration.plan.strategy.name, iteration.total) for iteration in run.iterations] == [
        (iteration["strategy"], iteration["total"]) for iteration in document["iterations"]]
    assert all(len(iteration.placement.plan_order) == len(iteration.plan.pipelines) for iteration in run.iterations)
    assert run.summary.chosen == dict(collections.Counter(iteration.ran for iteration in run.iterations))
    assert run.summary.over_bound == pytest.approx(run.summary.mean_total / run.summary.mean_lower_bound)
    assert sluice.PlanRun.from_json(run.to_json()) == run


def test_a_simulate_report_holds_every_system_by_name(tmp_path):
    run = sluice.read_document(recorded("simulate", tmp_path))
    document = json.loads((tmp_path / "simulate.json").read_text())
    assert [system.name for system in run.systems] == list(sluice.system_names())
    assert [(system.failure is None, system.summary is None) for system in run.systems] == [
        (system["failure"] is None, "summary" not in system) for system in document["systems"]]
    assert [batch.tokens for batch in run.batches] == [batch["tokens"] for batch in document["batches"]]
    assert list(run.length_ranges) == document["length_ranges"]
    assert run.link.bandwidth_bytes_per_second == document["link"]["bandwidth_bytes_per_second"]


def test_a_trace_report_keeps_the_fastest_planned_candidate(tmp_path):
    run = sluice.read_document(recorded("trace", tmp_path))
    planned = [candidate for candidate in run.candidates if candidate.makespan is not None]
    kept = run.candidates[run.chosen]
    assert kept.strategy == run.plan.strategy
    assert kept == min(planned, key=lambda candidate: candidate.makespan + candidate.layout_move)
    assert run.flex is None and run.total == run.makespan + run.layout_move
    assert [pipeline.index for pipeline in run.pipelines] == sorted({pipeline.index for pipeline in run.pipelines})


@pytest.mark.parametrize("text, message", [
    ('{"version": 1}', "field 'format'"),
    ('{"format": "sluice.nothing", "version": 1}', "format 'sluice.nothing' has no Python class"),
    ('{"format": "sluice.shard_run", "version": 99}', "unsupported sluice.shard_run version 99"),
    ('[1, 2', ""),
])
def test_a_malformed_document_is_invalid_input_naming_the_file(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(sluice.InvalidInput, match=str(path)) as error:
        sluice.read_document(path)
    assert message in str(error.value)
