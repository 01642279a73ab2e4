#pragma once
// The host backend on the local transport: every rank of the job on a thread of its own in this process, their
// activations and gradients moving between threads as NCCL pairs them (in issue order between two ranks), and the
// collectives inside their passes through the same mailboxes. Deterministic: the arithmetic and every sum's order
// are fixed, whatever the threads' timing, so two runs are equal bit for bit, and equal to a run of one MPI process
// per rank (mpi.hpp).
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice_executor/host/backend.hpp"
#include "sluice_executor/host/exchange.hpp"
#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/run_options.hpp"

namespace sluice::executor::host {

// Messages between the threads of one process: a FIFO per (sender, receiver, channel).
class Mailboxes {
public:
  struct Message {
    std::vector<double> values;
    int tag = 0;  // what the receiver checks it expects: the tensor and micro-batch, or the collective
    schedule::TensorShape shape{};  // a tensor's, as its send names it
  };

  explicit Mailboxes(double timeout_seconds) : timeout_(timeout_seconds) {}

  void send(int from, int to, int channel, Message message) {
    {
      const std::lock_guard lock(mutex_);
      queues_[{from, to, channel}].push_back(std::move(message));
    }
    arrived_.notify_all();
  }

  // Blocks until the next message from `from` arrives; throws transport_error after the timeout or once stop() was
  // called (another rank failed, and the message may never come).
  Message receive(int from, int to, int channel) {
    std::unique_lock lock(mutex_);
    std::deque<Message>& queue = queues_[{from, to, channel}];
    wait_for_peers(arrived_, lock, timeout_, stopped_, sluice::concat("rank ", from), [&] { return !queue.empty(); });
    Message message = std::move(queue.front());
    queue.pop_front();
    return message;
  }

  void stop() {
    {
      const std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    arrived_.notify_all();
  }

private:
  double timeout_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<std::tuple<int, int, int>, std::deque<Message>> queues_;
  bool stopped_ = false;
};

// Collectives between threads: a message per member and part.
class LocalExchange final : public Exchange {
public:
  explicit LocalExchange(Mailboxes& mailboxes) : mailboxes_(mailboxes) {}

  std::vector<std::vector<double>> all_to_all(const Group& group, std::vector<std::vector<double>> parts) override {
    const int me = group.rank();
    for (int j = 0; j < group.size(); ++j)
      if (j != group.index)
        mailboxes_.send(me, group.ranks[static_cast<std::size_t>(j)], collective_channel,
                        {std::move(parts[static_cast<std::size_t>(j)]), tag(group, all_to_all_op)});
    for (int j = 0; j < group.size(); ++j)
      if (j != group.index)
        parts[static_cast<std::size_t>(j)] = checked(
            mailboxes_.receive(group.ranks[static_cast<std::size_t>(j)], me, collective_channel), group, all_to_all_op);
    return parts;
  }

  std::vector<double> shift(const Group& group, int to, std::vector<double> data, int from) override {
    const int me = group.rank();
    mailboxes_.send(me, group.ranks[static_cast<std::size_t>(to)], collective_channel,
                    {std::move(data), tag(group, shift_op)});
    return checked(mailboxes_.receive(group.ranks[static_cast<std::size_t>(from)], me, collective_channel), group,
                   shift_op);
  }

private:
  static constexpr int collective_channel = 1;
  static constexpr int all_to_all_op = 0;
  static constexpr int shift_op = 1;
  static int tag(const Group& group, int op) { return 2 * group.id + op; }
  static std::vector<double> checked(Mailboxes::Message message, const Group& group, int op) {
    if (message.tag != tag(group, op))
      throw transport_error(
          sluice::concat("mismatch: a collective of group ", group.id, " met a message of another collective"));
    return std::move(message.values);
  }

  Mailboxes& mailboxes_;
};

// Activations and gradients between threads: a send copies the lane's rows into a message at its Start, the
// receive's Wait takes the next message from that peer and checks that it is the tensor expected.
class LocalTransport {
public:
  static constexpr bool pairs_itself = true;

  LocalTransport(Backend& backend, Mailboxes& mailboxes) : backend_(backend), mailboxes_(mailboxes) {}

  void post(const Transfer& transfer) {
    if (!transfer.send) return;
    const std::vector<double>& slot = backend_.data(transfer.rank, transfer.slot);
    const std::size_t count = backend_.payload(transfer.rank, transfer.micro_batch);
    mailboxes_.send(transfer.rank, transfer.peer, point_to_point,
                    {std::vector<double>(slot.begin(), slot.begin() + static_cast<std::ptrdiff_t>(count)),
                     tag(transfer), transfer.shape});
  }

  void wait(const Transfer& transfer) {
    if (transfer.send) return;
    Mailboxes::Message message = mailboxes_.receive(transfer.peer, transfer.rank, point_to_point);
    const std::size_t count = backend_.payload(transfer.rank, transfer.micro_batch);
    if (message.tag != tag(transfer) || message.values.size() != count || message.shape != transfer.shape)
      throw transport_error(sluice::concat("mismatch: the receive of ", transfer.activation ? "activation" : "gradient",
                                           " micro-batch ", transfer.micro_batch, " [", transfer.shape.rows, ", ",
                                           transfer.shape.cols, "] from rank ", transfer.peer, " met another tensor (",
                                           message.values.size(), " values of [", message.shape.rows, ", ",
                                           message.shape.cols, "], expected ", count, ")"));
    std::copy(message.values.begin(), message.values.end(), backend_.data(transfer.rank, transfer.slot).begin());
  }

private:
  static constexpr int point_to_point = 0;
  static int tag(const Transfer& transfer) { return 2 * transfer.micro_batch + (transfer.activation ? 1 : 0); }

  Backend& backend_;
  Mailboxes& mailboxes_;
};

// Steps every rank of the job on a thread of its own over `backend`, whose exchange runs on `mailboxes`; returns
// every rank's instruction times, or rethrows the first failure (with the rank and the instruction) that is not
// another rank's having stopped this one.
inline std::vector<std::vector<InstructionTiming>> run_ranks(const Job& job, const JobLayout& job_layout,
                                                             Backend& backend, Mailboxes& mailboxes) {
  LocalTransport transport(backend, mailboxes);
  auto interpreter = make_interpreter(job, job_layout, backend, transport);
  step_on_threads(
      interpreter, job_layout.rank_count(),
      [&](int rank) { return job_layout.ranks[static_cast<std::size_t>(rank)].runs; }, [&] { mailboxes.stop(); },
      [] {});
  return interpreter.timings();
}

// Runs the job on the host, a thread per rank: raises invalid_input / invalid_plan for a bad job or a plan the
// interpreter rejects (checked whole before any rank starts). `mutation` is for the tests that inject defects.
inline RunReport run_local(const Job& job, const RunOptions& options = {}, Mutation mutation = Mutation::none) {
  require_valid(options);
  const JobLayout job_layout = layout(job, options.checks);
  Mailboxes mailboxes(options.timeout_seconds);
  LocalExchange exchange(mailboxes);
  Backend backend(job, job_layout, exchange, {}, mutation);
  RunReport report;
  report.instructions = run_ranks(job, job_layout, backend, mailboxes);
  report.result = backend.result(options.gradients);
  for (int rank = 0; rank < job_layout.rank_count(); ++rank)
    report.activation_peak_bytes.push_back(
        job_layout.ranks[static_cast<std::size_t>(rank)].runs ? backend.activation_peak_bytes(rank) : 0.0);
  fill_makespans(job_layout, report);
  report.device = sluice::concat("host (float64), ", job_layout.rank_count(), " ranks on threads");
  return report;
}

}  // namespace sluice::executor::host
