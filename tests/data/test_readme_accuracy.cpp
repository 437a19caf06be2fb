// The README's accuracy table is the committed validation baseline's test split, row for row:
// neither may drift from the other (and validate's baseline gate keeps the baseline equal to the
// build). Fit rows (the calibration split `fit --suite` reads) never appear in it.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace {
const std::string kSrc = STEPSIM_SOURCE_DIR;

std::string slurp(const std::string& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("README's 'How accurate is it' table equals validation/baseline.json", "[validate][docs]") {
  std::string readme = slurp(kSrc + "/README.md");
  auto begin = readme.find("<!-- validate-summary");
  auto end = readme.find("<!-- /validate-summary -->");
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  std::string table = readme.substr(begin, end - begin);
  nlohmann::json base = nlohmann::json::parse(slurp(kSrc + "/validation/baseline.json"));
  // | source (optional description) | metric | cases | median % | p90 % | bias % |
  std::regex row(R"(\| ([a-z0-9-]+)[^|]* \| ([a-z_]+) \| (\d+) \| ([\d.]+) % \| ([\d.]+) % \| ([+-]?[\d.]+) % \|)");
  int rows = 0;
  std::set<std::string> step_time_sources;
  for (std::sregex_iterator it(table.begin(), table.end(), row), stop; it != stop; ++it) {
    const auto& m = *it;
    ++rows;
    INFO(m.str());
    const nlohmann::json* found = nullptr;
    for (const auto& s : base["summaries"])
      if (s["split"] == "test" && s["source"] == m[1].str() && s["metric"] == m[2].str()) found = &s;
    REQUIRE(found);
    CHECK(std::stoi(m[3]) == (*found)["cases"].get<int>());
    CHECK(m[4].str() == fmt::format("{:.1f}", (*found)["median_abs"].get<double>()));
    CHECK(m[5].str() == fmt::format("{:.1f}", (*found)["p90_abs"].get<double>()));
    CHECK(m[6].str() == fmt::format("{:+.1f}", (*found)["bias"].get<double>()));
    if (m[2].str() == "step_time") step_time_sources.insert(m[1].str());
  }
  CHECK(rows >= 5);
  // Every source's test step time is in the table.
  for (const auto& s : base["summaries"])
    if (s["split"] == "test" && s["metric"] == "step_time") CHECK(step_time_sources.count(s["source"].get<std::string>()));
  // The pair count quoted in the prose.
  CHECK_THAT(readme, Catch::Contains(fmt::format("measured sign in {} of the {} pairs", base["pairs"]["sign_right"].get<int>(),
                                                 base["pairs"]["counted"].get<int>())));
}
