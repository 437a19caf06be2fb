#pragma once
// Kernel cost: GEMMs from a measured efficiency table (nearest shapes, interpolated) with a
// roofline fallback; memory-bound bytes at the calibrated HBM rate; attention FLOPs at a
// calibrated fraction of peak; fixed times as given.

#include "sim/hardware/profile.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

Time gemm_time(const ComputeProfile& c, const GemmShape& g);
Time memory_time(const ComputeProfile& c, Bytes bytes);
Time kernel_time(const ComputeProfile& c, const KernelWork& w);

}  // namespace stepsim
