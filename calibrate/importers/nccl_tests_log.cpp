#include "calibrate/importers/nccl_tests_log.hpp"

#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "calibrate/importers/galvatron_hardware.hpp"
#include "calibrate/text_util.hpp"
#include "sim/core/error.hpp"
#include "sim/hardware/collective_model.hpp"

namespace stepsim::calib {

namespace {

// Strips the wrappers a log picks up when pasted elsewhere: a Python string literal
// ("...\n",) and surrounding blanks. Returns the line and whether it is a `#` comment line
// (with the `#` removed).
std::pair<std::string, bool> normalize(std::string_view raw) {
  std::string_view s = trim(raw);
  if (s.size() >= 2 && s.front() == '"') {
    s.remove_prefix(1);
    if (!s.empty() && s.back() == ',') s.remove_suffix(1);
    if (!s.empty() && s.back() == '"') s.remove_suffix(1);
    if (s.size() >= 2 && s.substr(s.size() - 2) == "\\n") s.remove_suffix(2);
  }
  s = trim(s);
  bool comment = !s.empty() && s.front() == '#';
  if (comment) s = trim(s.substr(1));
  return {std::string(s), comment};
}

bool all_digits(const std::string& t) {
  if (t.empty()) return false;
  for (char c : t)
    if (c < '0' || c > '9') return false;
  return true;
}

std::optional<CollectiveKind> kind_from_name(const std::string& text) {
  std::string s = lower(text);
  std::vector<std::pair<CollectiveKind, std::vector<const char*>>> names = {
      {CollectiveKind::AllReduce, {"allreduce", "all_reduce", "all-reduce"}},
      {CollectiveKind::AllGather, {"allgather", "all_gather", "all-gather"}},
      {CollectiveKind::ReduceScatter, {"reducescatter", "reduce_scatter", "reduce-scatter"}},
      {CollectiveKind::AllToAll, {"alltoall", "all_to_all", "all-to-all"}},
      {CollectiveKind::Broadcast, {"broadcast"}}};
  std::optional<CollectiveKind> found;
  for (const auto& [kind, keys] : names)
    for (const char* k : keys)
      if (s.find(k) != std::string::npos) {
        if (found && *found != kind) return std::nullopt;  // ambiguous: let the table decide
        found = kind;
      }
  return found;
}

// The section a "# Collective test starting: NAME" line opens. nccl-tests writes one such
// line per binary (src/common.cu prints "Collective test starting: %s"), and the
// h100-cluster01 logs chain five binaries in one file: all_reduce, all_gather, reduce_scatter,
// alltoall, sendrecv. A known collective names its tables; a binary the collective model has no
// kind for (sendrecv, gather, scatter, hypercube) makes its tables skipped, never folded into
// the previous section's collective.
struct Section {
  std::string name;
  std::optional<CollectiveKind> kind;  // nullopt: skip the section's tables
};

Section section_from_binary(const std::string& binary) {
  std::string name = lower(binary);
  if (name.size() > 5 && name.substr(name.size() - 5) == "_perf") name = name.substr(0, name.size() - 5);
  static const std::map<std::string, CollectiveKind> known = {
      {"all_reduce", CollectiveKind::AllReduce},         {"allreduce", CollectiveKind::AllReduce},
      {"all_gather", CollectiveKind::AllGather},         {"allgather", CollectiveKind::AllGather},
      {"reduce_scatter", CollectiveKind::ReduceScatter}, {"reducescatter", CollectiveKind::ReduceScatter},
      {"alltoall", CollectiveKind::AllToAll},            {"all_to_all", CollectiveKind::AllToAll},
      {"broadcast", CollectiveKind::Broadcast},          {"reduce", CollectiveKind::Reduce}};
  auto it = known.find(name);
  return {name, it == known.end() ? std::nullopt : std::optional<CollectiveKind>(it->second)};
}

// n from the nccl-tests factor r = busbw/algbw: AR r = 2(n-1)/n -> n = 2/(2-r);
// AG/RS/A2A r = (n-1)/n -> n = 1/(1-r). Broadcast/reduce carry no information (r = 1).
std::optional<int> ranks_from_ratio(CollectiveKind kind, double r) {
  double n = 0;
  if (kind == CollectiveKind::AllReduce) {
    if (r >= 1.999) return std::nullopt;
    n = 2.0 / (2.0 - r);
  } else if (kind == CollectiveKind::Broadcast || kind == CollectiveKind::Reduce) {
    return std::nullopt;
  } else {
    if (r >= 0.999) return std::nullopt;
    n = 1.0 / (1.0 - r);
  }
  int rounded = static_cast<int>(std::lround(n));
  if (rounded < 2) return std::nullopt;
  return rounded;
}

struct Row {
  std::int64_t bytes = 0;
  std::vector<double> times, algbw, busbw;  // one per column group (out-of-place, in-place)
  std::string redop, root;
  int line = 0;
};

struct Table {
  int header_line = 0;
  std::size_t columns = 0;
  int size_idx = -1, redop_idx = -1, root_idx = -1;
  std::vector<int> time_idx, algbw_idx, busbw_idx;
  std::vector<std::string> groups;  // "out-of-place" / "in-place" labels, in column order
  std::vector<Row> rows;
  // Run metadata seen before the table (rank lines belong to the run they precede).
  int rank_lines = 0;
  std::set<std::string> hosts;
  std::optional<CollectiveKind> section_kind;  // from "Collective test starting: X_perf"
};

class Parser {
 public:
  Parser(std::string source) : source_(std::move(source)) {}

  std::vector<CollectiveSeries> parse(const std::string& text) {
    auto lines = split_char(text, '\n');
    kind_hint_ = kind_from_name(std::filesystem::path(source_).filename().string());
    for (std::size_t i = 0; i < lines.size(); ++i) read_line(lines[i], static_cast<int>(i) + 1);
    close_table();
    if (concluded_) kind_hint_ = concluded_;  // the log's own word beats the file name
    return series();
  }

 private:
  // One line of the log: a run's markers and metadata, or a table's header block, row or end.
  void read_line(std::string_view raw, int lineno) {
    auto [s, comment] = normalize(raw);
    if (run_marker(s)) return;
    auto tokens = split_ws(s);
    if (tokens.empty()) return;
    if (tokens[0] == "size" && std::find(tokens.begin(), tokens.end(), "time") != tokens.end()) {
      open_table(tokens, lineno);
      return;
    }
    if (tokens[0] == "(B)") return;
    if (s.find("out-of-place") != std::string::npos || s.find("in-place") != std::string::npos) {
      close_table();  // a banner starts the next table's header block
      banner_.clear();
      for (const auto& t : tokens)
        if (t == "out-of-place" || t == "in-place") banner_.push_back(t);
      return;
    }
    if (s.rfind("Out of bounds", 0) == 0 || s.rfind("Avg bus bandwidth", 0) == 0) {
      close_table();
      return;
    }
    if (!table_) return;  // prose between runs
    if (!comment && starts_like_row(tokens[0])) {
      add_row(tokens, lineno);
      return;
    }
    if (!comment) close_table();  // anything else ends the table (a code fence, prose)
  }

  // A row starts with its size; one that starts like a number but is not a byte count (-5,
  // 1e30, 2.5) is an error in add_row, not prose that silently ends the table.
  static bool starts_like_row(const std::string& first) {
    return all_digits(first) || first.find_first_of("0123456789") == 0 ||
           ((first[0] == '-' || first[0] == '+' || first[0] == '.') && first.size() > 1 &&
            std::isdigit(static_cast<unsigned char>(first[1])));
  }

  // The lines around the tables: a section's start and end (one per nccl-tests binary), a run's
  // start (its nThread line) and its rank lines. True when `s` is one of them.
  bool run_marker(const std::string& s) {
    static const std::regex rank_re(R"(^Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device)");
    static const std::regex concluded_re(R"(Collective test concluded:\s*(\S+))");
    static const std::regex starting_re(R"(Collective test starting:\s*(\S+))");
    std::smatch m;
    if (std::regex_search(s, m, starting_re)) {
      close_table();
      section_ = section_from_binary(m[1].str());
      return true;
    }
    if (std::regex_search(s, m, concluded_re)) {
      close_table();
      if (!section_) concluded_ = kind_from_name(m[1].str());
      section_.reset();
      return true;
    }
    if (s.rfind("nThread", 0) == 0) {
      close_table();
      pending_rank_lines_ = 0;
      pending_hosts_.clear();
      return true;
    }
    if (std::regex_search(s, m, rank_re)) {
      ++pending_rank_lines_;
      pending_hosts_.insert(m[2].str());
      return true;
    }
    return false;
  }

  // One series per table read; an error when there is none.
  std::vector<CollectiveSeries> series() const {
    if (tables_.empty() && !skipped_.empty())
      throw InputError(fmt::format("{}: only sections of collectives the model has no kind for ({}); expected "
                                   "all_reduce, all_gather, reduce_scatter, alltoall, broadcast or reduce",
                                   source_, fmt::join(skipped_, ", ")));
    if (tables_.empty())
      throw InputError(fmt::format("{}: no nccl-tests result table found (expected a header line starting with "
                                   "'size count type' and rows of numbers)",
                                   source_));
    std::vector<CollectiveSeries> out;
    for (std::size_t t = 0; t < tables_.size(); ++t) out.push_back(to_series(tables_[t], t, tables_.size()));
    return out;
  }

  void open_table(const std::vector<std::string>& tokens, int lineno) {
    close_table();
    if (section_ && !section_->kind) {  // a section the model has no collective for
      skipped_.insert(section_->name);
      return;
    }
    Table t;
    if (section_) t.section_kind = section_->kind;
    t.header_line = lineno;
    t.columns = tokens.size();
    for (std::size_t c = 0; c < tokens.size(); ++c) {
      const std::string& tok = tokens[c];
      int ci = static_cast<int>(c);
      if (tok == "size") t.size_idx = ci;
      else if (tok == "redop") t.redop_idx = ci;
      else if (tok == "root") t.root_idx = ci;
      else if (tok == "time") t.time_idx.push_back(ci);
      else if (tok == "algbw") t.algbw_idx.push_back(ci);
      else if (tok == "busbw") t.busbw_idx.push_back(ci);
    }
    if (t.time_idx.empty() || t.time_idx.size() != t.algbw_idx.size() || t.time_idx.size() != t.busbw_idx.size())
      throw InputError(fmt::format("{}:{}: column header needs matching time, algbw and busbw columns", source_, lineno));
    t.groups = banner_;
    while (t.groups.size() < t.time_idx.size()) t.groups.push_back(t.groups.empty() ? "out-of-place" : "in-place");
    t.rank_lines = pending_rank_lines_;
    t.hosts = pending_hosts_;
    table_ = std::move(t);
  }

  void add_row(const std::vector<std::string>& tokens, int lineno) {
    Table& t = *table_;
    if (tokens.size() != t.columns)
      throw InputError(fmt::format("{}:{}: expected {} columns like the header on line {}, found {}", source_, lineno,
                                   t.columns, t.header_line, tokens.size()));
    Row r;
    r.line = lineno;
    auto bytes = parse_int(tokens[static_cast<std::size_t>(t.size_idx)]);
    constexpr long long kMaxBytes = 1LL << 48;  // 256 TiB: far above any nccl-tests message
    if (!bytes || *bytes <= 0 || *bytes > kMaxBytes)
      throw InputError(fmt::format("{}:{}: size '{}': expected a positive integer of at most 2^48 bytes", source_, lineno,
                                   tokens[static_cast<std::size_t>(t.size_idx)]));
    r.bytes = *bytes;
    auto num = [&](int idx, const char* what) {
      const std::string& tok = tokens[static_cast<std::size_t>(idx)];
      auto v = parse_double(tok);
      if (!v || !std::isfinite(*v) || *v < 0)
        throw InputError(fmt::format("{}:{}: {} '{}' is not a non-negative number", source_, lineno, what, tok));
      return *v;
    };
    for (std::size_t g = 0; g < t.time_idx.size(); ++g) {
      double time_us = num(t.time_idx[g], "time");
      // nccl-tests prints microseconds with 2 decimals; 1 ns .. 10^12 us (11.6 days) holds any run.
      if (!(time_us >= 1e-3 && time_us <= 1e12))
        throw InputError(fmt::format("{}:{}: time {}: expected microseconds from 0.001 to 1e12", source_, lineno, time_us));
      r.times.push_back(time_us);
      r.algbw.push_back(num(t.algbw_idx[g], "algbw"));
      r.busbw.push_back(num(t.busbw_idx[g], "busbw"));
    }
    if (t.redop_idx >= 0) r.redop = tokens[static_cast<std::size_t>(t.redop_idx)];
    if (t.root_idx >= 0) r.root = tokens[static_cast<std::size_t>(t.root_idx)];
    if (!t.rows.empty() && r.bytes <= t.rows.back().bytes)
      throw InputError(fmt::format("{}:{}: size {} does not increase over the previous row (line {})", source_, lineno,
                                   r.bytes, t.rows.back().line));
    t.rows.push_back(std::move(r));
  }

  void close_table() {
    if (table_ && !table_->rows.empty()) tables_.push_back(std::move(*table_));
    table_.reset();
  }

  CollectiveSeries to_series(const Table& t, std::size_t index, std::size_t count) const {
    CollectiveSeries s;
    s.source = source_;
    s.label = count > 1 ? fmt::format("run {} of {} (header line {})", index + 1, count, t.header_line)
                        : fmt::format("header line {}", t.header_line);
    // The row with the largest algbw gives the most precise busbw/algbw ratio (2 decimals).
    const Row* best = &t.rows.front();
    for (const auto& r : t.rows)
      if (r.algbw[0] > best->algbw[0]) best = &r;
    double ratio = best->algbw[0] > 0 ? best->busbw[0] / best->algbw[0] : 0;
    if (t.section_kind) {
      s.kind = *t.section_kind;
    } else if (kind_hint_) {
      s.kind = *kind_hint_;
    } else {
      const std::string& redop = best->redop;
      bool rooted = !best->root.empty() && best->root != "-1";
      if (redop == "none" || redop.empty()) s.kind = rooted ? CollectiveKind::Broadcast : CollectiveKind::AllGather;
      else if (rooted) s.kind = CollectiveKind::Reduce;
      else s.kind = ratio >= 0.995 ? CollectiveKind::AllReduce : CollectiveKind::ReduceScatter;
    }
    auto from_ratio = best->algbw[0] >= 0.5 ? ranks_from_ratio(s.kind, ratio) : std::nullopt;
    if (t.rank_lines > 0) {
      s.ranks = t.rank_lines;
      if (from_ratio && *from_ratio != s.ranks)
        throw InputError(fmt::format("{}:{}: busbw/algbw = {:.4f} means {} ranks for {}, but the log lists {} rank lines",
                                     source_, best->line, ratio, *from_ratio, to_string(s.kind), s.ranks));
    } else if (from_ratio) {
      s.ranks = *from_ratio;
    } else {
      throw InputError(fmt::format("{}:{}: cannot tell the number of ranks (no '# Rank' lines and busbw/algbw = {:.4f})",
                                   source_, t.header_line, ratio));
    }
    if (!t.hosts.empty()) {
      s.nodes = static_cast<int>(t.hosts.size());
    } else {
      static const std::regex nodes_re(R"((?:^|[^0-9])(\d+)x(\d+)x)");
      std::smatch m;
      std::string fname = std::filesystem::path(source_).filename().string();
      if (std::regex_search(fname, m, nodes_re) && std::stoi(m[1].str()) * std::stoi(m[2].str()) == s.ranks)
        s.nodes = std::stoi(m[1].str());
    }
    for (const auto& r : t.rows)
      for (std::size_t g = 0; g < r.times.size(); ++g)
        s.samples.push_back({Bytes{r.bytes}, Time::from_us(r.times[g]), t.groups[g] == "in-place", r.line});
    return s;
  }

  std::string source_;
  std::optional<CollectiveKind> kind_hint_;
  std::optional<CollectiveKind> concluded_;  // from a "Collective test concluded: X" line outside a section
  std::optional<Table> table_;
  std::vector<Table> tables_;
  std::vector<std::string> banner_;
  std::optional<Section> section_;  // between "starting" and "concluded" lines
  std::set<std::string> skipped_;   // names of sections skipped
  int pending_rank_lines_ = 0;
  std::set<std::string> pending_hosts_;
};

std::optional<std::int64_t> parse_payload(const std::string& text) {
  static const std::regex re(R"(^([0-9]+(?:\.[0-9]+)?)\s*(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)$)");
  std::smatch m;
  if (!std::regex_match(text, m, re)) return std::nullopt;
  double v = std::stod(m[1].str());
  static const std::map<std::string, double> unit = {{"B", 1.0},       {"KiB", 1024.0}, {"MiB", 1048576.0},
                                                     {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
                                                     {"KB", 1e3},      {"MB", 1e6},     {"GB", 1e9}, {"TB", 1e12}};
  return static_cast<std::int64_t>(std::llround(v * unit.at(m[2].str())));
}

std::optional<double> parse_gbps(std::string text) {
  for (const char* suffix : {"GBps", "GB/s"}) {
    auto pos = text.find(suffix);
    if (pos != std::string::npos) text = text.substr(0, pos);
  }
  return parse_double(text);
}

// The `| payload | ... | algbw |` table of a benchmark's markdown output.
struct MarkdownTable {
  std::string source;
  int payload_col = -1, busbw_col = -1, algbw_col = -1;
  int header_line = 0;                                                // 0 until the header is read
  double best_algbw = 0, best_ratio = 0;                              // busbw/algbw at the largest algbw
  std::vector<std::pair<std::int64_t, std::pair<double, int>>> rows;  // bytes -> (algbw, line)

  // A header names the payload (or size) and algbw columns, busbw optionally.
  void read_header(const std::vector<std::string>& cells, int lineno) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      std::string name = lower(cells[c]);
      if (name == "payload" || name == "size") payload_col = static_cast<int>(c);
      if (name == "busbw") busbw_col = static_cast<int>(c);
      if (name == "algbw") algbw_col = static_cast<int>(c);
    }
    if (payload_col >= 0 && algbw_col >= 0) header_line = lineno;
  }

  void add_row(const std::vector<std::string>& cells, int lineno) {
    auto need = [&](int col) -> const std::string& {
      if (col < 0 || static_cast<std::size_t>(col) >= cells.size())
        throw InputError(fmt::format("{}:{}: expected {} cells like the header on line {}", source, lineno,
                                     std::max({payload_col, busbw_col, algbw_col}) + 1, header_line));
      return cells[static_cast<std::size_t>(col)];
    };
    auto bytes = parse_payload(need(payload_col));
    if (!bytes || *bytes <= 0)
      throw InputError(fmt::format("{}:{}: payload '{}' is not a size like 32KiB", source, lineno, need(payload_col)));
    auto algbw = parse_gbps(need(algbw_col));
    if (!algbw || *algbw <= 0)
      throw InputError(fmt::format("{}:{}: algbw '{}' is not a positive GBps value", source, lineno, need(algbw_col)));
    if (busbw_col >= 0) {
      auto busbw = parse_gbps(need(busbw_col));
      if (!busbw) throw InputError(fmt::format("{}:{}: busbw '{}' is not a GBps value", source, lineno, need(busbw_col)));
      if (*algbw > best_algbw) best_algbw = *algbw, best_ratio = *busbw / *algbw;
    }
    rows.push_back({*bytes, {*algbw, lineno}});
  }
};

}  // namespace

std::vector<CollectiveSeries> parse_nccl_tests_text(const std::string& text, const std::string& source) {
  return Parser(source).parse(text);
}

std::vector<CollectiveSeries> parse_bench_markdown(const std::string& text, const std::string& source) {
  auto lines = split_char(text, '\n');
  CollectiveSeries s;
  s.source = source;
  s.label = "markdown table";
  auto hint = kind_from_name(text.substr(0, std::min<std::size_t>(text.size(), 2000)));
  s.kind = hint.value_or(CollectiveKind::AllReduce);
  MarkdownTable table{source};
  for (std::size_t i = 0; i < lines.size(); ++i) {
    int lineno = static_cast<int>(i) + 1;
    std::string_view line = trim(lines[i]);
    if (line.empty() || line.front() != '|') {
      if (table.header_line && !table.rows.empty()) break;  // the table ended
      continue;
    }
    auto cells = markdown_cells(line);
    if (!table.header_line) table.read_header(cells, lineno);
    else if (cells.empty() || cells[0].find("---") == std::string::npos) table.add_row(cells, lineno);  // not the alignment row
  }
  if (table.rows.empty())
    throw InputError(fmt::format("{}: no '| payload | ... | algbw |' table with rows found", source));
  auto ranks = ranks_from_ratio(s.kind, table.best_ratio);
  if (!ranks)
    throw InputError(fmt::format("{}:{}: cannot tell the number of ranks from busbw/algbw = {:.4f}", source,
                                 table.header_line, table.best_ratio));
  s.ranks = *ranks;
  for (const auto& [bytes, v] : table.rows)
    // algbw = S / t with GB = 1e9 B, so t_us = S / (algbw * 1e3).
    s.samples.push_back({Bytes{bytes}, Time::from_us(static_cast<double>(bytes) / (v.first * 1e3)), false, v.second});
  return {s};
}

std::vector<CollectiveSeries> import_collective_log(const std::filesystem::path& file) {
  std::string text = read_text_file(file);
  static const std::regex md_header(R"(\|\s*payload\s*\|)", std::regex::icase);
  if (std::regex_search(text, md_header)) return parse_bench_markdown(text, file.string());
  if (is_galvatron_sp_time(text)) return parse_galvatron_sp_time(text, file.string());
  return parse_nccl_tests_text(text, file.string());
}

}  // namespace stepsim::calib
