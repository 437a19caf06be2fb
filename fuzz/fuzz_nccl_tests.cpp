// Fuzzes the nccl-tests log reader (and its markdown-table form), Galvatron's sp_time JSON, the
// XLA performance-table importers and Azure's results markdown. Input: the log text; the same
// bytes are also read as Galvatron JSON, as both XLA CSV tables and as an Azure results file.
#include "calibrate/importers/azure_results.hpp"
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
  fuzz::expect_ok_or_input_error([&] { (void)calib::parse_azure_gemm(text, "fuzz.md"); });
  auto csv = fuzz::write_file("table.csv", text);
  fuzz::expect_ok_or_input_error([&] { (void)calib::import_xla_collectives(csv, "sm_90"); });
  fuzz::expect_ok_or_input_error([&] { (void)calib::import_xla_gemm(csv, "sm_90"); });
  return 0;
}
