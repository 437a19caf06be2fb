#pragma once
// `stepsim compare A B` on files: each side a result (stepsim.result/1), an analysis
// (stepsim.analyze/1) or a Kineto trace analysed as `analyze` does (the mean of its steps, or of
// `steps`). Shared by the CLI (tools/cmd_compare.cpp) and the Python API (python/).

#include <string>

#include "sim/report/compare.hpp"

namespace stepsim::trace {

// Reads both files and compares them (sim/report/compare.hpp). `steps` ("" for all; N, A-B, A-,
// -B) picks a trace's ProfilerSteps: InputError when neither file is a trace.
CompareReport compare_files(const std::string& first, const std::string& second, const std::string& steps,
                            const CompareOptions& o);

}  // namespace stepsim::trace
