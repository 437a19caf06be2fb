#include "sim/core/text_pool.hpp"

#include <nlohmann/json.hpp>

namespace stepsim {

void to_json(nlohmann::json& j, Text t) { j = std::string(t.view()); }

}  // namespace stepsim
