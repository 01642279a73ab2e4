// One GPU per rank: a host thread per rank runs the rank's instructions; sends and receives are NCCL
// point-to-point operations on a communicator per neighbouring pair of stages, issued on a stream per (rank, peer),
// and the collectives inside passes run on a communicator per TP or Ulysses group.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstddef>
#include <exception>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "device.hpp"
#include "sluice/core/error.hpp"
#include "sluice_executor/cuda.hpp"
#include "sluice_executor/interpreter.hpp"

#ifdef SLUICE_EXECUTOR_HAVE_NCCL
#include "nccl.hpp"
#endif

namespace sluice::executor::cuda {

bool nccl_available() noexcept {
#ifdef SLUICE_EXECUTOR_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

#ifndef SLUICE_EXECUTOR_HAVE_NCCL

RunReport run_nccl(const Job& /*job*/, const RunOptions& /*options*/) {
  throw std::runtime_error("run_nccl: this build of the executor has no NCCL transport (NCCL was not found)");
}

#else

RunReport run_nccl(const Job& job, const RunOptions& options) {
  require_valid(options);
  const JobLayout job_layout = layout(job, options.checks);  // its dry run rejects a plan NCCL would deadlock on
  require_gpu_job(job);
  const int ranks = job_layout.rank_count();
  const int first_device = std::max(options.device, 0);
  const int visible = device_count();
  if (first_device + ranks > visible)
    throw std::runtime_error("run_nccl: the job has " + std::to_string(ranks) + " ranks, devices from " +
                             std::to_string(first_device) + " on; " + std::to_string(visible) + " visible");
  std::vector<int> devices(static_cast<std::size_t>(ranks));
  std::iota(devices.begin(), devices.end(), first_device);
  for (int r = 0; r < ranks; ++r)
    if (!job_layout.ranks[static_cast<std::size_t>(r)].runs) devices[static_cast<std::size_t>(r)] = -1;
  const std::vector<int> running = running_ranks(job_layout);
  Communicators communicators(job_layout, devices);
  NcclExchange exchange(communicators);
  Backend backend(job, job_layout, devices, false, &exchange);

  RunReport report;
  for (int iteration = 0; iteration <= options.warmup; ++iteration) {
    NcclTransport transport(backend, communicators);
    auto interpreter = make_interpreter(job, job_layout, backend, transport);
    std::barrier start_line(static_cast<std::ptrdiff_t>(running.size()));
    std::atomic<bool> failed{false};
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
    auto run_rank = [&](int rank) {
      const auto r = static_cast<std::size_t>(rank);
      bool arrived = false;
      try {
        SLUICE_CUDA_CHECK(cudaSetDevice(devices[r]));
        backend.reset(rank);
        arrived = true;
        start_line.arrive_and_wait();
        backend.mark_origin(rank);
        while (!interpreter.finished(rank)) interpreter.step(rank);
        const Event done;
        done.record(backend.stream(rank));
        wait_polling(done, [&] {
          if (failed.load()) throw std::runtime_error("run_nccl: stopped because another rank failed");
        });
      } catch (...) {
        errors[r] = std::current_exception();
        failed = true;
        if (!arrived) start_line.arrive_and_drop();
      }
    };
    std::vector<std::thread> threads;
    for (const int rank : running) threads.emplace_back(run_rank, rank);
    for (std::thread& thread : threads) thread.join();
    if (failed) {
      communicators.abort();
      for (const std::exception_ptr& error : errors)
        if (error) std::rethrow_exception(error);
    }
    if (iteration == options.warmup) {
      report.instructions = interpreter.timings();
      report.transfers = transport.timings();
    }
  }
  report.result = collect_result(job, job_layout, backend, options.gradients);
  report.activation_peak_bytes = backend.activation_peaks();
  fill_makespans(job_layout, report);
  report.device = std::to_string(running.size()) + " × " + device_name(first_device) + " (NCCL)";
  return report;
}

#endif

}  // namespace sluice::executor::cuda
