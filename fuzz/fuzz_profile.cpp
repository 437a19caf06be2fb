// Fuzzes the hardware profile reader (strict JSON, every number with its physical range).
#include "fuzz/fuzz_common.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/hardware/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stepsim;
  std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_ok_or_input_error([&] {
    Json doc = parse_json_text(text, "profile.json");
    SourceMap sources;
    sources.root_file = "profile.json";
    ObjectReader r(doc, sources, "");
    (void)parse_profile(r);
  });
  return 0;
}
