// The library's interpreter run by a Python trainer: one process's rank of a plan's instruction lists, its compute and
// its transfers calling back into Python (sluice.runtime drives them with PyTorch and torch.distributed).
#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "sluice/schedule/interpreter.hpp"

namespace sluice::python {
namespace {

// Backend and transport at once: every callback is a method of the Python runner. Its transfers pair themselves
// (torch.distributed's isend/irecv match in issue order between two ranks, as NCCL's do), so only this process's rank
// is stepped and its Waits block in the runner's wait().
class PythonRunner {
public:
  using Stamp = double;
  static constexpr bool pairs_itself = true;

  explicit PythonRunner(py::object runner)
      : runner_(std::move(runner)),
        load_input_(runner_.attr("load_input")),
        forward_(runner_.attr("forward")),
        backward_(runner_.attr("backward")),
        post_(runner_.attr("post")),
        wait_(runner_.attr("wait")) {}

  void load_input(int, int micro_batch, int slot) { load_input_(micro_batch, slot); }
  void forward(int, int micro_batch, int input, int output) { forward_(micro_batch, input, output); }
  void backward(int, int micro_batch, int gradient, int output) { backward_(micro_batch, gradient, output); }
  void post(const schedule::Transfer& transfer) { post_(transfer); }
  void wait(const schedule::Transfer& transfer) { wait_(transfer); }
  [[nodiscard]] Stamp stamp(int) const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
  }
  [[nodiscard]] double seconds(Stamp stamp) const { return stamp; }

private:
  py::object runner_, load_input_, forward_, backward_, post_, wait_;
  std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
};

std::vector<schedule::PipelineRanks> pipeline_ranks(
    const std::vector<std::pair<const schedule::ExecutionPlan*, std::vector<std::vector<int>>>>& pipelines) {
  std::vector<schedule::PipelineRanks> result;
  for (const auto& [plan, ranks] : pipelines) {
    if (plan == nullptr) throw invalid_input("run_rank: a pipeline's plan is None");
    if (ranks.empty()) throw invalid_input("run_rank: a pipeline names no ranks");
    result.push_back({plan, ranks});
  }
  return result;
}

std::vector<schedule::ComputeGroup> compute_groups(const std::vector<std::vector<std::pair<int, int>>>& groups) {
  std::vector<schedule::ComputeGroup> result;
  for (const auto& members : groups) {
    schedule::ComputeGroup group;
    for (const auto& [rank, micro_batch] : members) group.members.push_back({rank, micro_batch});
    result.push_back(std::move(group));
  }
  return result;
}

bool names(const std::vector<schedule::PipelineRanks>& pipelines, int rank) {
  for (const schedule::PipelineRanks& pipeline : pipelines)
    for (const std::vector<int>& lanes : pipeline.ranks)
      if (std::find(lanes.begin(), lanes.end(), rank) != lanes.end()) return true;
  return false;
}

}  // namespace

void bind_runtime(py::module_& module) {
  py::class_<schedule::Transfer>(module, "Transfer",
                                 "One point-to-point operation of a rank's instruction list, as its rank issues it.")
      .def_readonly("rank", &schedule::Transfer::rank, "The global rank that issues it")
      .def_readonly("peer", &schedule::Transfer::peer, "The global rank at the other end")
      .def_readonly("index", &schedule::Transfer::index, "Among the rank's transfers, in issue order")
      .def_readonly("slot", &schedule::Transfer::slot)
      .def_readonly("send", &schedule::Transfer::send)
      .def_readonly("activation", &schedule::Transfer::activation, "An activation (else a gradient)")
      .def_readonly("micro_batch", &schedule::Transfer::micro_batch)
      .def_property_readonly(
          "shape",
          [](const schedule::Transfer& transfer) { return std::pair(transfer.shape.rows, transfer.shape.cols); })
      .def("__repr__", [](const schedule::Transfer& transfer) {
        return sluice::concat("<Transfer ", transfer.send ? "send " : "receive ",
                              transfer.activation ? "act " : "grad ", transfer.micro_batch, " rank=", transfer.rank,
                              " peer=", transfer.peer, " slot=", transfer.slot, ">");
      });

  module.def(
      "run_rank",
      [](const std::vector<std::pair<const schedule::ExecutionPlan*, std::vector<std::vector<int>>>>& pipelines,
         const std::vector<std::vector<std::pair<int, int>>>& groups, int rank, py::object runner, bool check) {
        if (rank < 0) throw invalid_input(sluice::concat("run_rank: rank ", rank, " is negative"));
        const std::vector<schedule::PipelineRanks> ranks = pipeline_ranks(pipelines);
        const std::vector<schedule::ComputeGroup> members = compute_groups(groups);
        schedule::InterpreterOptions options;
        options.context = "sluice.runtime";
        if (check) {
          const py::gil_scoped_release release;
          schedule::dry_run(ranks, members, options);
        }
        PythonRunner python(std::move(runner));
        schedule::Interpreter<PythonRunner, PythonRunner> interpreter(ranks, members, python, python, options);
        std::vector<std::pair<double, double>> timings;
        if (!names(ranks, rank)) return timings;
        try {
          while (!interpreter.finished(rank)) interpreter.step(rank);
        } catch (py::error_already_set& error) {
          // The runner's exception (a peer gone, a kernel's error) chained to one naming the rank and instruction.
          const std::string where = sluice::concat("sluice.runtime: ", interpreter.where(rank), ": ",
                                                   py::str(error.type().attr("__name__")).cast<std::string>(), ": ",
                                                   py::str(error.value()).cast<std::string>());
          py::raise_from(error, PyExc_RuntimeError, where.c_str());
          throw py::error_already_set();
        }
        const auto all = interpreter.timings();  // one list per rank the pipelines name, so this rank's is there
        for (const schedule::InstructionTiming& timing : all[static_cast<std::size_t>(rank)])
          timings.emplace_back(timing.start, timing.end);
        return timings;
      },
      py::arg("pipelines"), py::arg("groups"), py::arg("rank"), py::arg("runner"), py::kw_only(),
      py::arg("check") = true,
      "Runs global rank `rank`'s instruction list through the library's interpreter, the one that validates and "
      "dry-runs plans. pipelines: per pipeline its ExecutionPlan and, per stage, the global ranks of its lanes; "
      "groups: the ranks that compute a micro-batch together, as (rank, micro-batch) pairs. `runner` provides "
      "load_input(micro_batch, slot), forward(micro_batch, input_slot, output_slot), backward(micro_batch, "
      "gradient_slot, output_slot) (-1 for none) and post(transfer) / wait(transfer) for Transfers that pair in "
      "issue order between two ranks. check: dry-run every rank first, so that a plan that could deadlock or break "
      "its slots raises InvalidPlan before anything runs. A rank no pipeline names runs nothing. Returns the "
      "(start, end) seconds of each of the rank's instructions. An exception the runner raises comes back as a "
      "RuntimeError naming the rank and the instruction, the runner's exception its __cause__.");
}

}  // namespace sluice::python
