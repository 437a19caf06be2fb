#pragma once
// Importers for XLA's measured performance tables as parsed into CSV in
// data/xla_perf_tables (see its SOURCES.txt):
//  - collective_perf_table.csv: device_key, opcode, element_type, output_dim0,
//    num_replica_groups, num_devices_per_group, n_source_target_pairs,
//    tensor_size_bytes_derived, network_throughput_bytes_per_sec, derived_time_us.
//    tensor_size_bytes_derived is the whole gathered / pre-scatter buffer, i.e. S in the
//    nccl-tests convention; the time is S / throughput. All groups are on one host (8 GPUs).
//    collective-permute rows are skipped (no Program collective uses them).
//  - matmul_perf_table.csv: device_key, b, m, n, k, dtype, flops_per_sec[, tflops].
//    dtype "bf16xbf16->bf16" -> bf16, "f32xf32->f32" -> tf32 (XLA's default precision; the rates exceed the fp32 peak), "f8e4m3fnxf8e4m3fn->bf16" -> fp8
//    (the other fp8 input combinations are skipped: one fp8 entry per shape).
// Columns are found by name in the header; rows for other device keys are skipped.

#include <filesystem>
#include <string>
#include <vector>

#include "calibrate/measurements.hpp"

namespace stepsim::calib {

std::vector<CollectiveSeries> import_xla_collectives(const std::filesystem::path& file, const std::string& device_key);
std::vector<GemmSample> import_xla_gemm(const std::filesystem::path& file, const std::string& device_key);

}  // namespace stepsim::calib
