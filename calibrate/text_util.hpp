#pragma once
// Small text helpers shared by the importers.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stepsim::calib {

std::string read_text_file(const std::filesystem::path& file);  // InputError if unreadable
std::string_view trim(std::string_view s);
std::vector<std::string> split_ws(std::string_view s);
std::vector<std::string> split_char(std::string_view s, char sep);
std::optional<double> parse_double(std::string_view s);
std::optional<long long> parse_int(std::string_view s);
std::string lower(std::string_view s);
// The cells of a markdown table line `| a | b |` (it starts with '|'), trimmed.
std::vector<std::string> markdown_cells(std::string_view line);

}  // namespace stepsim::calib
