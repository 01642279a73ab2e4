#pragma once
// Running a job on GPUs (target sluice::executor). Plain C++: no CUDA header is needed to call these.
//
// The CUDA backend keeps bf16 parameters and activations and fp32 gradients (accumulated over micro-batches);
// GEMMs run through cuBLAS with fp32 accumulation, attention, RMSNorm, RoPE, SwiGLU and the loss through the
// kernels of reference_executor/kernels. The model's head dimension must be 64 or 128 (the attention kernels'),
// hidden and ffn multiples of 8; it runs TP 1 and CP 1 with or without full recompute (the host backend runs every
// degree); anything else raises sluice::invalid_input. Every CUDA, cuBLAS and NCCL failure raises
// std::runtime_error naming the call, file and line; a plan the interpreter rejects raises invalid_plan.
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

// The local transport: every rank of every pipeline on one GPU (options.device), a compute stream per rank and a
// stream per (receiver, sender) pair for copies; a send's Start records an event on the sender's stream, the
// pairing copy waits for it on the receiver's copy stream and records a done event, which Waits make compute
// streams wait for. options.serialize puts every rank on one stream, in the order the host issues their work: ops
// run one at a time, so their times carry no contention between ranks (for checking per-op costs on one GPU). The
// data-parallel reduction adds each tensor's gradients over pipelines on the device (in pipeline order).
RunReport run_local(const Job& job, const RunOptions& options = {});

// The NCCL transport in one process: a GPU and a host thread per rank (rank r on device options.device + r);
// sends and receives are ncclSend/ncclRecv on a communicator per neighbouring pair of lanes, on a stream per (rank,
// peer); the data-parallel reduction all-reduces every tensor's gradients over all ranks (ranks without the tensor
// contribute zeros). The plan is first checked by a host dry run under NCCL's pairing rules, so a plan that would
// deadlock raises invalid_plan instead of hanging. Raises std::runtime_error when there are fewer devices than
// ranks or the build has no NCCL.
RunReport run_nccl(const Job& job, const RunOptions& options = {});

}  // namespace sluice::executor::cuda
