// The host backend with one MPI process per rank (sluice_executor/host/mpi.hpp).
#include "sluice_executor/host/mpi.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../mpi/results.hpp"
#include "sluice/core/error.hpp"
#include "sluice_executor/host/backend.hpp"

namespace sluice::executor::host {

using mpi::detail::check;

namespace {

// Messages between two ranks pair in issue order, as NCCL pairs them: MPI never reorders messages of one tag
// between two processes.
constexpr int data_tag = 1;
constexpr int shift_tag = 3;
constexpr int move_tag = 5;

// Polls `request` until it completes; throws transport_error after `timeout` seconds, saying what it waited for.
template <class Describe>
MPI_Status wait_for(MPI_Request& request, double timeout, Describe describe) {
  MPI_Status status{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  for (int done = 0;;) {
    check(MPI_Test(&request, &done, &status), "MPI_Test");
    if (done) return status;
    if (std::chrono::steady_clock::now() > deadline)
      throw transport_error(sluice::concat("timed out after ", timeout, " s waiting for ", describe()));
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// The collectives inside the passes: a communicator per group of the job, one MPI_Comm_split per family of groups
// that share no rank, made by every process in the same order; all-to-alls of varying sizes as MPI_Ialltoall of the
// counts then MPI_Ialltoallv, ring steps as point-to-point messages on the group's communicator.
class MpiExchange final : public Exchange {
public:
  MpiExchange(const JobLayout& layout, MPI_Comm comm, double timeout) : timeout_(timeout) {
    int process = 0;
    MPI_Comm_rank(comm, &process);
    const int families =
        layout.group_family.empty() ? 0 : *std::max_element(layout.group_family.begin(), layout.group_family.end()) + 1;
    for (int family = 0; family < families; ++family) {
      int color = MPI_UNDEFINED;
      int key = 0;
      int group = -1;
      for (std::size_t g = 0; g < layout.groups.size(); ++g) {
        if (layout.group_family[g] != family) continue;
        const auto& ranks = layout.groups[g];
        const auto it = std::find(ranks.begin(), ranks.end(), process);
        if (it == ranks.end()) continue;
        color = static_cast<int>(g);
        key = static_cast<int>(it - ranks.begin());
        group = static_cast<int>(g);
      }
      MPI_Comm split = MPI_COMM_NULL;
      check(MPI_Comm_split(comm, color, key, &split), "MPI_Comm_split");
      if (split != MPI_COMM_NULL) {
        MPI_Comm_set_errhandler(split, MPI_ERRORS_RETURN);
        communicators_.emplace(group, split);
      }
    }
  }
  MpiExchange(const MpiExchange&) = delete;
  MpiExchange& operator=(const MpiExchange&) = delete;
  ~MpiExchange() override {
    for (auto& [group, comm] : communicators_) MPI_Comm_free(&comm);
  }

  std::vector<std::vector<double>> all_to_all(const Group& group, std::vector<std::vector<double>> parts) override {
    const MPI_Comm comm = communicator(group);
    const auto size = static_cast<std::size_t>(group.size());
    std::vector<int> send_counts(size), receive_counts(size), send_offsets(size), receive_offsets(size);
    for (std::size_t j = 0; j < size; ++j) send_counts[j] = count(parts[j].size());
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Ialltoall(send_counts.data(), 1, MPI_INT, receive_counts.data(), 1, MPI_INT, comm, &request),
          "MPI_Ialltoall");
    wait_for(request, timeout_, [&] { return describe(group, "the sizes of an all-to-all"); });
    std::vector<double> sent, received;
    for (std::size_t j = 0; j < size; ++j) {
      send_offsets[j] = count(sent.size());
      sent.insert(sent.end(), parts[j].begin(), parts[j].end());
      receive_offsets[j] = j == 0 ? 0 : receive_offsets[j - 1] + receive_counts[j - 1];
    }
    received.resize(static_cast<std::size_t>(receive_offsets.back() + receive_counts.back()));
    check(MPI_Ialltoallv(sent.data(), send_counts.data(), send_offsets.data(), MPI_DOUBLE, received.data(),
                         receive_counts.data(), receive_offsets.data(), MPI_DOUBLE, comm, &request),
          "MPI_Ialltoallv");
    wait_for(request, timeout_, [&] { return describe(group, "an all-to-all"); });
    for (std::size_t j = 0; j < size; ++j)
      if (static_cast<int>(j) != group.index)
        parts[j].assign(received.begin() + receive_offsets[j],
                        received.begin() + receive_offsets[j] + receive_counts[j]);
    return parts;
  }

  std::vector<double> shift(const Group& group, int to, std::vector<double> data, int from) override {
    const MPI_Comm comm = communicator(group);
    MPI_Request send = MPI_REQUEST_NULL;
    check(MPI_Isend(data.data(), count(data.size()), MPI_DOUBLE, to, shift_tag, comm, &send), "MPI_Isend");
    // The size comes with the message: probe for it, then receive.
    MPI_Status status{};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    for (int found = 0; !found;) {
      check(MPI_Iprobe(from, shift_tag, comm, &found, &status), "MPI_Iprobe");
      if (!found && std::chrono::steady_clock::now() > deadline)
        throw transport_error(
            sluice::concat("timed out after ", timeout_, " s waiting for ", describe(group, "a ring step")));
      if (!found) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    int values = 0;
    check(MPI_Get_count(&status, MPI_DOUBLE, &values), "MPI_Get_count");
    std::vector<double> received(static_cast<std::size_t>(values));
    check(MPI_Recv(received.data(), values, MPI_DOUBLE, from, shift_tag, comm, MPI_STATUS_IGNORE), "MPI_Recv");
    wait_for(send, timeout_, [&] { return describe(group, "a ring step's send"); });
    return received;
  }

private:
  static int count(std::size_t values) {
    if (values > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw transport_error(sluice::concat("a collective of ", values, " values is past MPI's int counts"));
    return static_cast<int>(values);
  }
  static std::string describe(const Group& group, const char* what) {
    std::string ranks;
    for (const int rank : group.ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
    return sluice::concat(what, " in the group of ranks ", ranks);
  }
  [[nodiscard]] MPI_Comm communicator(const Group& group) const {
    const auto it = communicators_.find(group.id);
    if (it == communicators_.end())
      throw transport_error(sluice::concat("this process has no communicator for group ", group.id));
    return it->second;
  }

  double timeout_;
  std::map<int, MPI_Comm> communicators_;  // by group id
};

// Moves slots by MPI_Isend/MPI_Irecv. Every message carries, after the lane's rows, its kind, micro-batch and the
// shape its instruction names, so that a send that pairs with the receive of another tensor is caught where NCCL
// would silently corrupt the data.
class MpiTransport {
public:
  static constexpr bool pairs_itself = true;

  MpiTransport(Backend& backend, MPI_Comm comm, double timeout) : backend_(backend), comm_(comm), timeout_(timeout) {}

  void post(const Transfer& transfer) {
    if (static_cast<std::size_t>(transfer.index) >= operations_.size())
      operations_.resize(static_cast<std::size_t>(transfer.index) + 1);
    Operation& operation = operations_[static_cast<std::size_t>(transfer.index)];
    const std::size_t count = backend_.payload(transfer.rank, transfer.micro_batch);
    operation.buffer.assign(count + header, 0.0);
    if (transfer.send) {
      const std::vector<double>& data = backend_.data(transfer.rank, transfer.slot);
      std::copy_n(data.begin(), count, operation.buffer.begin());
      write_header(transfer, std::span(operation.buffer).subspan(count));
      check(MPI_Isend(operation.buffer.data(), static_cast<int>(operation.buffer.size()), MPI_DOUBLE, transfer.peer,
                      data_tag, comm_, &operation.request),
            "MPI_Isend");
    } else {
      check(MPI_Irecv(operation.buffer.data(), static_cast<int>(operation.buffer.size()), MPI_DOUBLE, transfer.peer,
                      data_tag, comm_, &operation.request),
            "MPI_Irecv");
    }
  }

  void wait(const Transfer& transfer) {
    Operation& operation = operations_[static_cast<std::size_t>(transfer.index)];
    MPI_Status status{};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    for (int done = 0;;) {
      const int code = MPI_Test(&operation.request, &done, &status);
      if (code != MPI_SUCCESS) {
        // A message longer than the receive: the sender's tensor is not the one expected.
        if (!transfer.send)
          throw transport_error(
              sluice::concat("mismatch: the ", describe(transfer), " met a longer message from rank ", transfer.peer));
        check(code, "MPI_Test");
      }
      if (done) break;
      if (std::chrono::steady_clock::now() > deadline)
        throw transport_error(sluice::concat("timed out after ", timeout_, " s waiting for the ", describe(transfer),
                                             " (a missing or mismatched operation on rank ", transfer.peer,
                                             ", or a cycle of waiting ranks)"));
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if (!transfer.send) {
      int received = 0;
      check(MPI_Get_count(&status, MPI_DOUBLE, &received), "MPI_Get_count");
      const std::size_t count = operation.buffer.size() - header;
      std::array<double, header> expected{};
      write_header(transfer, expected);
      if (static_cast<std::size_t>(received) != operation.buffer.size() ||
          !std::equal(expected.begin(), expected.end(), operation.buffer.begin() + static_cast<std::ptrdiff_t>(count)))
        throw transport_error(sluice::concat(
            "mismatch: the ", describe(transfer), " [", transfer.shape.rows, ", ", transfer.shape.cols, "] got ",
            received >= static_cast<int>(header) ? received - static_cast<int>(header) : 0, " values of ",
            received >= static_cast<int>(header) ? describe_received(operation, received) : "no tensor", ", expected ",
            count));
      std::copy_n(operation.buffer.begin(), count, backend_.data(transfer.rank, transfer.slot).begin());
    }
    operation.buffer = {};
  }

private:
  // After the rows: the kind (1: activation), the micro-batch, and the rows and columns of the instruction's shape.
  static constexpr std::size_t header = 4;
  struct Operation {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<double> buffer;  // the lane's rows, then the header
  };

  static void write_header(const Transfer& transfer, std::span<double> out) {
    out[0] = transfer.activation ? 1 : 0;
    out[1] = transfer.micro_batch;
    out[2] = static_cast<double>(transfer.shape.rows);
    out[3] = static_cast<double>(transfer.shape.cols);
  }

  static std::string describe(const Transfer& transfer) {
    return sluice::concat(transfer.send ? "send of " : "receive of ", transfer.activation ? "activation" : "gradient",
                          " micro-batch ", transfer.micro_batch, transfer.send ? " to" : " from", " rank ",
                          transfer.peer);
  }

  static std::string describe_received(const Operation& operation, int received) {
    const double* at = operation.buffer.data() + static_cast<std::size_t>(received) - header;
    return sluice::concat(at[0] == 1 ? "activation" : "gradient", " micro-batch ", at[1], " [", at[2], ", ", at[3],
                          "]");
  }

  Backend& backend_;
  MPI_Comm comm_;
  double timeout_;
  std::vector<Operation> operations_;  // by the rank's transfer index
};

}  // namespace

namespace {

// Runs this process's rank of the job, if it has one, through the interpreter on the MPI transport; `visit` gets
// the backend afterwards. Every process takes part in the communicators' splits and the start barrier.
template <class Visit>
void run_own_rank(const Job& job, const JobLayout& job_layout, MPI_Comm comm, const RunOptions& options,
                  const Backend::ParameterShards& parameters, Visit visit) {
  int process = 0;
  MPI_Comm_rank(comm, &process);
  // A wait's limit grows by a tenth per rank, so that of ranks waiting on each other the first one reports.
  const double timeout = options.timeout_seconds * (1 + 0.1 * process);
  MpiExchange exchange(job_layout, comm, timeout);
  if (process < job_layout.rank_count() && job_layout.ranks[static_cast<std::size_t>(process)].runs) {
    const int own_rank[] = {process};
    Backend backend(job, job_layout, exchange, own_rank, Mutation::none, parameters);
    MpiTransport transport(backend, comm, timeout);
    auto interpreter = make_interpreter(job, job_layout, backend, transport);
    check(MPI_Barrier(comm), "MPI_Barrier");
    try {
      while (!interpreter.finished(process)) interpreter.step(process);
    } catch (const transport_error& error) {
      throw invalid_plan(sluice::concat("executor: ", interpreter.where(process), ": ", error.what()));
    }
    visit(backend, interpreter.timings()[static_cast<std::size_t>(process)]);
  } else {
    check(MPI_Barrier(comm), "MPI_Barrier");
  }
}

}  // namespace

RunReport run_mpi(const Job& job, MPI_Comm comm, const RunOptions& options) {
  require_valid(options);
  const JobLayout job_layout = layout(job, options.checks);
  const int process = mpi::detail::process_for(job_layout, comm);
  mpi::detail::RankValues own;
  run_own_rank(
      job, job_layout, comm, options, {}, [&](const Backend& backend, const std::vector<InstructionTiming>& timings) {
        own = mpi::detail::rank_values(job, job_layout, process, timings, backend.loss_sums(process),
                                       backend.activation_peak_bytes(process), options.gradients,
                                       [&](std::size_t tensor) { return backend.stage(process).gradients()[tensor]; });
      });
  // Added as a one-process run adds them, so that the two are equal bit for bit.
  RunReport report = mpi::detail::share_run(job, job_layout, comm, std::move(own), options.gradients);
  report.device = sluice::concat("host (float64), ", job_layout.rank_count(), " MPI processes");
  return report;
}

MpiMover::MpiMover(MPI_Comm comm, double timeout_seconds) : comm_(comm), timeout_(timeout_seconds) {
  sluice::require(timeout_seconds > 0, "mpi: timeout_seconds must be > 0, got ", timeout_seconds);
  MPI_Comm_rank(comm, &process_);
}

void MpiMover::move(std::span<const Route> routes, const std::function<std::vector<double>(std::size_t)>& fill,
                    const std::function<void(std::size_t, std::vector<double>)>& apply) {
  // This process's routes, each peer's in route order concatenated into one message each way.
  std::map<int, std::vector<double>> outgoing;
  std::map<int, std::size_t> incoming;              // values expected from each peer
  std::map<std::size_t, std::vector<double>> kept;  // local routes' values, by route
  for (std::size_t i = 0; i < routes.size(); ++i) {
    const Route& route = routes[i];
    if (route.src == process_) {
      std::vector<double> values = fill(i);
      if (values.size() != route.count)
        throw transport_error(sluice::concat("layout move: route ", i, " to rank ", route.dst, " fills ", values.size(),
                                             " values for ", route.count));
      if (route.dst == process_) {
        kept.emplace(i, std::move(values));
      } else {
        std::vector<double>& message = outgoing[route.dst];
        message.insert(message.end(), values.begin(), values.end());
      }
    } else if (route.dst == process_) {
      incoming[route.src] += route.count;
    }
  }
  std::vector<MPI_Request> requests;
  std::map<int, std::vector<double>> received;
  for (auto& [peer, count] : incoming) {
    std::vector<double>& buffer = received[peer];
    buffer.resize(count);
    requests.push_back(MPI_REQUEST_NULL);
    check(MPI_Irecv(buffer.data(), static_cast<int>(count), MPI_DOUBLE, peer, move_tag, comm_, &requests.back()),
          "MPI_Irecv");
  }
  for (auto& [peer, message] : outgoing) {
    requests.push_back(MPI_REQUEST_NULL);
    check(MPI_Isend(message.data(), static_cast<int>(message.size()), MPI_DOUBLE, peer, move_tag, comm_,
                    &requests.back()),
          "MPI_Isend");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
  for (int done = 0; !done;) {
    check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (!done && std::chrono::steady_clock::now() > deadline)
      throw transport_error(sluice::concat("layout move: timed out after ", timeout_,
                                           " s waiting for a peer's pieces (a rank that failed, or never sent)"));
    if (!done) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  // In route order, so that a destination adds its reduce-scatter parts in member order.
  std::map<int, std::size_t> taken;
  for (std::size_t i = 0; i < routes.size(); ++i) {
    const Route& route = routes[i];
    if (route.dst != process_) continue;
    if (route.src == process_) {
      apply(i, std::move(kept.at(i)));
      continue;
    }
    const std::vector<double>& buffer = received.at(route.src);
    std::size_t& at = taken[route.src];
    apply(i, std::vector<double>(buffer.begin() + static_cast<std::ptrdiff_t>(at),
                                 buffer.begin() + static_cast<std::ptrdiff_t>(at + route.count)));
    at += route.count;
  }
}

MpiCohort::MpiCohort(MPI_Comm comm, double timeout_seconds) : comm_(comm), mover_(comm, timeout_seconds) {
  MPI_Comm_rank(comm, &process_);
  MPI_Comm_size(comm, &processes_);
}

void MpiCohort::run(const Job& job, const JobLayout& job_layout, const Backend::ParameterShards& parameters,
                    const RunOptions& options, const Visit& visit) {
  static_cast<void>(mpi::detail::process_for(job_layout, comm_));
  run_own_rank(job, job_layout, comm_, options, parameters,
               [&](const Backend& backend, std::vector<InstructionTiming> timings) {
                 visit(process_, backend.stage(process_), backend.loss_sums(process_), std::move(timings));
               });
}

std::vector<std::vector<double>> MpiCohort::share(std::vector<std::vector<double>> held) {
  // Every process holds one rank: its own values go to every process, in rank order.
  std::vector<double> mine = process_ < static_cast<int>(held.size())
                                 ? std::move(held[static_cast<std::size_t>(process_)])
                                 : std::vector<double>();
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(processes_)), offsets(static_cast<std::size_t>(processes_));
  check(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_), "MPI_Allgather");
  std::exclusive_scan(counts.begin(), counts.end(), offsets.begin(), 0);
  std::vector<double> all(static_cast<std::size_t>(offsets.back() + counts.back()));
  check(MPI_Allgatherv(mine.data(), count, MPI_DOUBLE, all.data(), counts.data(), offsets.data(), MPI_DOUBLE, comm_),
        "MPI_Allgatherv");
  std::vector<std::vector<double>> result(held.size());
  for (std::size_t r = 0; r < result.size() && r < counts.size(); ++r)
    result[r].assign(all.begin() + offsets[r], all.begin() + offsets[r] + counts[r]);
  return result;
}

}  // namespace sluice::executor::host
