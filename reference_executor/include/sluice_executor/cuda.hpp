#pragma once
// Running a job on GPUs (target sluice::executor). Plain C++: no CUDA header is needed to call these.
//
// The CUDA backend keeps bf16 parameters and activations and fp32 gradients (accumulated over micro-batches);
// GEMMs run through cuBLAS with fp32 accumulation, attention, RMSNorm, RoPE, SwiGLU and the loss through the
// kernels of reference_executor/kernels. The model's head dimension must be 64 or 128 (the attention kernels'),
// hidden and ffn multiples of 8; it runs every TP that divides the heads, the vocabulary and the FFN width (each TP
// rank's FFN columns a multiple of 8), CP of every kind (ring, Ulysses and their hybrid), flex CP groups, and full
// recompute; anything else raises sluice::invalid_input. Every CUDA, cuBLAS and NCCL
// failure raises std::runtime_error naming the call, file and line; a plan the interpreter rejects raises invalid_plan.
#include <string>

#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/run_options.hpp"

namespace sluice::executor::cuda {

// CUDA devices visible to this process; 0 when there is none or no driver.
int device_count() noexcept;
std::string device_name(int device);
// Whether this build has the NCCL transport.
bool nccl_available() noexcept;

// The local transport: every rank of every pipeline on one GPU (options.device), each stepped on a host thread of
// its own (a TP group's lanes meet inside their passes), a compute stream per rank and a stream per (receiver,
// sender) pair for copies; a Start records an event on its rank's stream, the second Start of a send and its
// receive issues the copy on the receiver's copy stream after both events and records a done event, which Waits
// make compute streams wait for. TP's and Ulysses' collectives copy between the lanes' buffers on each lane's stream.
// options.serialize puts every rank on one stream, in the order the threads issue their work, and each pass takes
// its stage's turn (StageTurns): its time is its own stage's work alone, free of contention between ranks (for
// checking per-op costs on one GPU; the report says serialized, so that the replay divides a stage's time by its
// lanes). The loss and the gradients are every rank's downloaded and added on the host in float64 (over pipelines,
// and over TP for the replicated norms), as the host backend adds them.
RunReport run_local(const Job& job, const RunOptions& options = {});

// The NCCL transport in one process: a GPU and a host thread per rank (rank r on device options.device + r);
// sends and receives are ncclSend/ncclRecv on a communicator per neighbouring pair of lanes, on a stream per (rank,
// peer); TP's and Ulysses' collectives are grouped ncclSend/ncclRecv on a communicator per group; the loss and
// gradients are added on the host as run_local adds them. The plan is first checked by a host dry run under NCCL's
// pairing rules, so a plan that would deadlock raises invalid_plan instead of hanging. Raises std::runtime_error when
// there are fewer devices than ranks or the build has no NCCL.
RunReport run_nccl(const Job& job, const RunOptions& options = {});

}  // namespace sluice::executor::cuda
