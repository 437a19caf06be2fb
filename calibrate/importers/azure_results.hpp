#pragma once
// Importer for the GEMM table of Azure's AI benchmarking guide results
// (github.com/Azure/AI-benchmarking-guide, Azure_Results/ND_*_results.md; an example is
// data/azure_ai_benchmarking_guide): the "GEMM CuBLASLt" section, which the guide's
// GEMMCublasLt.py fills from superbench's cublaslt_gemm with random inputs, batch 1, 10,000
// warmup and 1,000 timed calls back to back, so its rates are sustained ones (clocks under the
// power limit), not a burst of a few calls.
//
//   ### GEMM CuBLASLt
//   The results shown below are with random initialization (...), FP8, and 10,000 warmup iterations.
//   | m | n | k | ND H100 V5 (TFLOPS) |
//   | --- | --- | --- | --- |
//   | 1024 | 1024 | 1024 | 274.1 |
//
// The dtype is the one the section's text names (FP8 / fp8e4m3, FP16, BF16, TF32, FP32); the
// columns are m, n, k (any case), an optional batch size, and exactly one TFLOPS column. Rows
// of dashes (the alignment row, and the guide's separator row `| \---- | ...`) are skipped.

#include <filesystem>
#include <string>
#include <vector>

#include "calibrate/measurements.hpp"

namespace stepsim::calib {

std::vector<GemmSample> import_azure_gemm(const std::filesystem::path& file);
std::vector<GemmSample> parse_azure_gemm(const std::string& text, const std::string& source);

}  // namespace stepsim::calib
