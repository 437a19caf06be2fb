// Fuzzes the nccl-tests log reader (and its markdown-table form), Galvatron's sp_time JSON and
// the XLA performance-table importers. Input: the log text; the same bytes are also read as
// Galvatron JSON and as both XLA CSV tables.
#include "calibrate/importers/galvatron_hardware.hpp"
#include "calibrate/importers/nccl_tests_log.hpp"
#include "calibrate/importers/xla_tables.hpp"
#include "fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stepsim;
  std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_ok_or_input_error([&] { (void)calib::parse_nccl_tests_text(text, "fuzz.log"); });
  fuzz::expect_ok_or_input_error([&] { (void)calib::parse_bench_markdown(text, "fuzz.md"); });
  (void)calib::is_galvatron_sp_time(text);
  fuzz::expect_ok_or_input_error([&] { (void)calib::parse_galvatron_sp_time(text, "fuzz.json"); });
  auto csv = fuzz::write_file("table.csv", text);
  fuzz::expect_ok_or_input_error([&] { (void)calib::import_xla_collectives(csv, "sm_90"); });
  fuzz::expect_ok_or_input_error([&] { (void)calib::import_xla_gemm(csv, "sm_90"); });
  return 0;
}
