#pragma once
// Importer for nccl-tests output (all_reduce_perf, all_gather_perf, ...), in every layout found
// in data/nccl-tests: plain logs with `#` comment headers, markdown-indented copies,
// logs embedded as Python string literals, several runs per file separated by prose, column
// sets with or without `root`, `#wrong` / `wrong` / `error`, and `N/A` in the wrong column.
// Both the out-of-place and the in-place column groups become samples (in_place flags them).
//
// Per run it determines:
//  - the collective: the "Collective test starting: X_perf" line that opens the table's section
//    (a file may chain several binaries; sections of binaries without a collective kind, e.g.
//    sendrecv_perf, are skipped by name), else "Collective test concluded: X_perf" in the file,
//    else the file name (allreduce, all_gather, ...), else redop/root and the busbw/algbw ratio;
//  - ranks: the "#  Rank N ... on HOST device" lines, else the busbw/algbw ratio, which is the
//    nccl-tests factor (AR 2(n-1)/n, AG/RS (n-1)/n) and so gives n;
//  - nodes: distinct hosts of the rank lines, else an "<nodes>x<gpus>x" token in the file name,
//    else 1.
// Malformed table rows throw InputError "FILE:LINE: what was wrong".
//
// Also imports the torch.distributed all_reduce_bench markdown table (payload | busbw | algbw).

#include <filesystem>
#include <string>
#include <vector>

#include "calibrate/measurements.hpp"

namespace stepsim::calib {

std::vector<CollectiveSeries> parse_nccl_tests_text(const std::string& text, const std::string& source);
std::vector<CollectiveSeries> parse_bench_markdown(const std::string& text, const std::string& source);

// Reads the file and picks the parser (a markdown "| payload |" table, Galvatron's sp_time JSON
// (importers/galvatron_hardware.hpp), else nccl-tests).
// Throws InputError when the file cannot be read or holds no result table.
std::vector<CollectiveSeries> import_collective_log(const std::filesystem::path& file);

}  // namespace stepsim::calib
