#pragma once
// `stepsim init --from-trace`: a starting experiment inferred from a profiler trace of the
// user's own job, every guess said out loud. What is read, and how:
//  - world size and rank: distributedInfo; the GPU: deviceProperties (name, memory), which picks
//    the shipped profile of that GPU type as the base of the profile fitted from the trace;
//  - nodes x GPUs per node: not in a trace; a world of up to 8 ranks is taken as one node,
//    larger worlds as nodes of 8 (a note says so);
//  - dtype: the dtype of the GEMM inputs (aten::mm/addmm Input types), else of the collectives;
//  - framework: from the collectives of one step and when they run: all-gathers in forward and
//    reduce-scatters in backward -> FSDP (FSDP2 when its copy-in/out kernels chunk_cat /
//    split_with_sizes_copy appear), an all-gather after the optimizer step -> DeepSpeed ZeRO-1/2
//    (stage 2 with overlap_comm when the gradient all-reduces overlap backward compute), else
//    all-reduces in backward -> DDP;
//  - model dimensions from the GEMM shapes (record_shapes=True): tokens per micro-batch T = the
//    most frequent M; hidden = the most frequent K of GEMMs with M = T; the MLP width = the
//    other side of the (T, F, hidden) / (T, hidden, F) pairs; a SwiGLU MLP has two (T, F, hidden)
//    GEMMs per (T, hidden, F) one (Llama family); the vocabulary = the widest N with K = hidden;
//    layers from the count of (T, hidden, F) GEMMs per step (forward + input-gradient, plus the
//    recomputed forward when it counts 3 per layer); heads and sequence length from the batched
//    attention matmuls (eager attention: [b*heads, s, head_dim] x [b*heads, head_dim, s]); when
//    there are none (flash attention), head_dim 128 and a sequence of T are assumed.
// Anything that cannot be inferred is a note, never a silent default.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/kineto_trace.hpp"
#include "trace/trace_analysis.hpp"

namespace stepsim::trace {

struct InitResult {
  nlohmann::json experiment;        // ready to write; "notes" lists every guess
  std::string base_profile;         // shipped profile picked for the GPU ("" if none fits)
  std::vector<std::string> notes;   // the same notes
};

// `profile_ref` is what the experiment's cluster.profile should say (the fitted profile's path).
InitResult init_from_traces(const std::vector<KinetoTrace>& traces, const AnalyzeOptions& o, const std::string& profile_ref);

// The shipped profile for a device name ("NVIDIA A800-SXM4-80GB" -> configs/hardware/a800-sxm-8x.json), "" if none.
std::string shipped_profile_for(const std::string& device_name, Bytes memory);

}  // namespace stepsim::trace
