#include "calibrate/importers/azure_results.hpp"

#include <cctype>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "calibrate/text_util.hpp"
#include "sim/core/error.hpp"

namespace stepsim::calib {

namespace {

// The dtypes a line of the section's text names: the guide writes "FP8" (older files) or the
// benchmark's own datatype string ("fp8e4m3", "fp16").
void add_dtype_words(std::string_view line, std::set<std::string>& out) {
  static const std::set<std::string> dtypes{"fp8e4m3", "fp8", "fp16", "bf16", "tf32", "fp32", "fp4e2m1"};
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  for (std::size_t i = 0; i < line.size();) {
    if (!alnum(line[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < line.size() && alnum(line[j])) ++j;
    if (std::string w = lower(line.substr(i, j - i)); dtypes.count(w)) out.insert(w);
    i = j;
  }
}

bool is_separator_row(const std::vector<std::string>& cells) {
  for (const auto& c : cells)
    for (char ch : c)
      if (ch != '-' && ch != ':' && ch != '\\' && ch != ' ') return false;
  return true;
}

struct Columns {
  int m = -1, n = -1, k = -1, batch = -1, tflops = -1;
};

Columns read_header(const std::vector<std::string>& cells, const std::string& source, int lineno) {
  Columns c;
  std::vector<std::string> rates;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const std::string name = lower(cells[i]);
    const int col = static_cast<int>(i);
    if (name == "m") c.m = col;
    else if (name == "n") c.n = col;
    else if (name == "k") c.k = col;
    else if (name == "batch size" || name == "batch" || name == "b") c.batch = col;
    else if (name.find("tflops") != std::string::npos) c.tflops = col, rates.push_back(cells[i]);
  }
  if (c.m < 0 || c.n < 0 || c.k < 0 || rates.empty())
    throw InputError(fmt::format("{}:{}: expected a GEMM table header with columns m, n, k and a TFLOPS column, got '{}'",
                                 source, lineno, fmt::join(cells, " | ")));
  if (rates.size() > 1)
    throw InputError(fmt::format("{}:{}: expected one TFLOPS column, found {} ({}): import one machine's results file",
                                 source, lineno, rates.size(), fmt::join(rates, ", ")));
  return c;
}

}  // namespace

std::vector<GemmSample> parse_azure_gemm(const std::string& text, const std::string& source) {
  const auto lines = split_char(text, '\n');
  std::size_t at = 0;
  for (; at < lines.size(); ++at) {
    std::string_view l = trim(lines[at]);
    if (l.starts_with("#") && lower(l).find("gemm") != std::string::npos) break;
  }
  if (at == lines.size()) throw InputError(fmt::format("{}: no '### GEMM CuBLASLt' section", source));
  const int section_line = static_cast<int>(at) + 1;

  std::set<std::string> dtypes;  // named in the section's text
  std::optional<Columns> cols;
  int header_line = 0;
  std::vector<GemmSample> out;
  for (std::size_t i = at + 1; i < lines.size(); ++i) {
    const int lineno = static_cast<int>(i) + 1;
    std::string_view l = trim(lines[i]);
    if (l.starts_with("#")) break;  // the next section
    if (!l.starts_with("|")) {
      if (cols && !out.empty()) break;  // the table ended
      add_dtype_words(l, dtypes);
      continue;
    }
    const auto cells = markdown_cells(l);
    if (!cols) {
      cols = read_header(cells, source, lineno);
      header_line = lineno;
      continue;
    }
    if (is_separator_row(cells)) continue;
    auto cell = [&](int c, const char* what) -> const std::string& {
      if (c >= static_cast<int>(cells.size()))
        throw InputError(fmt::format("{}:{}: expected the {} cell of the header on line {}, the row has {} cells", source,
                                     lineno, what, header_line, cells.size()));
      return cells[static_cast<std::size_t>(c)];
    };
    auto dim = [&](int c, const char* what) {
      auto v = parse_int(cell(c, what));
      if (!v || *v <= 0) throw InputError(fmt::format("{}:{}: {} '{}' is not a positive integer", source, lineno, what, cell(c, what)));
      return static_cast<std::int64_t>(*v);
    };
    GemmSample g;
    g.shape.m = dim(cols->m, "m");
    g.shape.n = dim(cols->n, "n");
    g.shape.k = dim(cols->k, "k");
    g.shape.batch = cols->batch >= 0 ? dim(cols->batch, "batch size") : 1;
    auto tflops = parse_double(cell(cols->tflops, "TFLOPS"));
    if (!tflops || *tflops <= 0)
      throw InputError(fmt::format("{}:{}: TFLOPS '{}' is not a positive number", source, lineno, cell(cols->tflops, "TFLOPS")));
    g.rate = FlopRate::from_tflops(*tflops);
    g.source = fmt::format("{}:{}", source, lineno);
    out.push_back(g);
  }
  if (!cols || out.empty())
    throw InputError(fmt::format("{}:{}: the GEMM section has no '| m | n | k | ... (TFLOPS) |' table with rows", source, section_line));
  if (dtypes.size() != 1)
    throw InputError(fmt::format("{}:{}: expected the GEMM section's text to name one dtype (FP8, FP16, BF16, TF32, FP32), found {}",
                                 source, section_line, dtypes.empty() ? std::string("none") : fmt::format("{}", fmt::join(dtypes, ", "))));
  const std::string& d = *dtypes.begin();
  if (d == "fp4e2m1") throw InputError(fmt::format("{}:{}: fp4e2m1 rates: stepsim has no fp4 dtype", source, section_line));
  const Dtype dtype = d == "fp8e4m3" || d == "fp8" ? Dtype::FP8 : parse_dtype(d);
  for (auto& g : out) g.shape.dtype = dtype;
  return out;
}

std::vector<GemmSample> import_azure_gemm(const std::filesystem::path& file) {
  return parse_azure_gemm(read_text_file(file), file.string());
}

}  // namespace stepsim::calib
