// Fuzzes `sweep --merge`: the input is up to four shard CSVs separated by "\n--shard--\n".
#include <sstream>

#include "fuzz/fuzz_common.hpp"
#include "sim/explore/sweep.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stepsim;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto parts = fuzz::split(in, "\n--shard--\n");
  std::vector<std::filesystem::path> files;
  for (std::size_t i = 0; i < parts.size() && i < 4; ++i)
    files.push_back(fuzz::write_file("shard" + std::to_string(i) + ".csv", parts[i]));
  fuzz::expect_ok_or_input_error([&] {
    std::ostringstream out;
    (void)merge_sweep_csv(files, out);
  });
  return 0;
}
