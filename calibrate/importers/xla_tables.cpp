#include "calibrate/importers/xla_tables.hpp"

#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "calibrate/text_util.hpp"
#include "sim/core/error.hpp"

namespace stepsim::calib {

namespace {

struct Csv {
  std::string source;
  std::vector<std::string> header;
  std::vector<std::pair<int, std::vector<std::string>>> rows;  // (line, cells)

  int col(const std::string& name) const {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return static_cast<int>(i);
    throw InputError(fmt::format("{}:1: missing column '{}' in the header", source, name));
  }
};

Csv read_csv(const std::filesystem::path& file) {
  Csv csv;
  csv.source = file.string();
  auto lines = split_char(read_text_file(file), '\n');
  bool have_header = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = trim(lines[i]);
    if (l.empty() || l.front() == '#') continue;
    auto cells = split_char(l, ',');
    for (auto& c : cells) c = std::string(trim(c));
    if (!have_header) {
      csv.header = cells;
      have_header = true;
      continue;
    }
    if (cells.size() != csv.header.size())
      throw InputError(fmt::format("{}:{}: expected {} comma-separated cells like the header, found {}", csv.source, i + 1,
                                   csv.header.size(), cells.size()));
    csv.rows.push_back({static_cast<int>(i) + 1, std::move(cells)});
  }
  if (!have_header) throw InputError(fmt::format("{}: empty CSV file", csv.source));
  return csv;
}

double number_cell(const Csv& csv, int line, const std::vector<std::string>& cells, int col, bool positive) {
  auto v = parse_double(cells[static_cast<std::size_t>(col)]);
  if (!v || !std::isfinite(*v) || (positive ? *v <= 0 : *v < 0))
    throw InputError(fmt::format("{}:{}: column '{}': '{}' is not a {} number", csv.source, line,
                                 csv.header[static_cast<std::size_t>(col)], cells[static_cast<std::size_t>(col)],
                                 positive ? "positive" : "non-negative"));
  return *v;
}

std::optional<CollectiveKind> xla_opcode(const std::string& op) {
  if (op == "all-reduce") return CollectiveKind::AllReduce;
  if (op == "all-gather") return CollectiveKind::AllGather;
  if (op == "reduce-scatter") return CollectiveKind::ReduceScatter;
  if (op == "all-to-all") return CollectiveKind::AllToAll;
  return std::nullopt;
}

}  // namespace

std::vector<CollectiveSeries> import_xla_collectives(const std::filesystem::path& file, const std::string& device_key) {
  Csv csv = read_csv(file);
  int c_dev = csv.col("device_key"), c_op = csv.col("opcode"), c_groups = csv.col("num_replica_groups"),
      c_per = csv.col("num_devices_per_group"), c_bytes = csv.col("tensor_size_bytes_derived"),
      c_thr = csv.col("network_throughput_bytes_per_sec");
  // One series per (opcode, groups x devices-per-group), in file order.
  std::map<std::tuple<int, int, int>, CollectiveSeries> by_key;
  std::vector<std::tuple<int, int, int>> order;
  for (const auto& [line, cells] : csv.rows) {
    if (cells[static_cast<std::size_t>(c_dev)] != device_key) continue;
    auto kind = xla_opcode(cells[static_cast<std::size_t>(c_op)]);
    if (!kind) continue;
    int groups = static_cast<int>(number_cell(csv, line, cells, c_groups, true));
    int per = static_cast<int>(number_cell(csv, line, cells, c_per, true));
    double bytes = number_cell(csv, line, cells, c_bytes, true);
    double thr = number_cell(csv, line, cells, c_thr, true);
    auto key = std::make_tuple(static_cast<int>(*kind), groups, per);
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      CollectiveSeries s;
      s.source = csv.source;
      s.label = fmt::format("{} {} groups {}x{}", device_key, cells[static_cast<std::size_t>(c_op)], groups, per);
      s.kind = *kind;
      s.ranks = per;
      s.nodes = 1;  // XLA's table was measured on 8 GPUs of one host
      it = by_key.emplace(key, std::move(s)).first;
      order.push_back(key);
    }
    // throughput = S / t  ->  t = S / throughput (seconds).
    it->second.samples.push_back(
        {Bytes{static_cast<std::int64_t>(std::llround(bytes))}, Time::from_s(bytes / thr), false, line});
  }
  if (order.empty())
    throw InputError(fmt::format("{}: no collective rows for device key '{}'", csv.source, device_key));
  std::vector<CollectiveSeries> out;
  for (const auto& k : order) out.push_back(std::move(by_key.at(k)));
  return out;
}

std::vector<GemmSample> import_xla_gemm(const std::filesystem::path& file, const std::string& device_key) {
  Csv csv = read_csv(file);
  int c_dev = csv.col("device_key"), c_b = csv.col("b"), c_m = csv.col("m"), c_n = csv.col("n"), c_k = csv.col("k"),
      c_dtype = csv.col("dtype"), c_flops = csv.col("flops_per_sec");
  std::vector<GemmSample> out;
  for (const auto& [line, cells] : csv.rows) {
    if (cells[static_cast<std::size_t>(c_dev)] != device_key) continue;
    const std::string& d = cells[static_cast<std::size_t>(c_dtype)];
    Dtype dtype;
    if (d == "bf16xbf16->bf16") dtype = Dtype::BF16;
    // XLA runs f32 dots on Hopper with TF32 tensor cores by default: the sm_90 f32 rows reach
    // ~4.5x the fp32 (non-tensor) peak, so they are TF32 measurements.
    else if (d == "f32xf32->f32") dtype = Dtype::TF32;
    else if (d == "f8e4m3fnxf8e4m3fn->bf16") dtype = Dtype::FP8;
    else continue;
    GemmSample g;
    g.shape.batch = static_cast<std::int64_t>(number_cell(csv, line, cells, c_b, true));
    g.shape.m = static_cast<std::int64_t>(number_cell(csv, line, cells, c_m, true));
    g.shape.n = static_cast<std::int64_t>(number_cell(csv, line, cells, c_n, true));
    g.shape.k = static_cast<std::int64_t>(number_cell(csv, line, cells, c_k, true));
    g.shape.dtype = dtype;
    g.rate = FlopRate{number_cell(csv, line, cells, c_flops, true)};
    g.source = fmt::format("{}:{}", csv.source, line);
    out.push_back(g);
  }
  if (out.empty()) throw InputError(fmt::format("{}: no GEMM rows for device key '{}'", csv.source, device_key));
  return out;
}

}  // namespace stepsim::calib
