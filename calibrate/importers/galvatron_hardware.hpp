#pragma once
// Importer for Galvatron's (PKU-DAIR/Hetu-Galvatron) hardware-profile JSON, the file its
// `profile_sp_bandwidth` writes (`hardware_configs/sp_time_<N>nodes_<G>gpus_per_node.json`):
// keys `allreduce_size_<n>_<m>MB_time` and `all2all_size_<n>_<m>MB_time`, each the time in
// milliseconds of one all_reduce_perf / alltoall_perf row on a group of n consecutive ranks
// (Galvatron's launch_nccl_test, mode "detail": size = bytes // 2^20, time = the out-of-place
// time column / 1000). One series per (collective, n); the group's node count follows from
// the GPUs per node in the file name (one node when absent).
//
// Keys of other forms (Galvatron's other files hold bandwidths, not times) throw InputError
// naming the file and the key; so do values that are not positive numbers.

#include <string>
#include <vector>

#include "calibrate/measurements.hpp"

namespace stepsim::calib {

// True when `text` looks like such a file (a JSON object with an `..._size_<n>_<m>MB_time` key).
bool is_galvatron_sp_time(const std::string& text);

std::vector<CollectiveSeries> parse_galvatron_sp_time(const std::string& text, const std::string& source);

}  // namespace stepsim::calib
