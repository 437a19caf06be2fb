#pragma once
// The Markdown reference of a key catalog (config_keys.hpp) under another document's title and
// introduction: the hardware profile reference, docs/profile-keys.md. `header` is Markdown
// ending in a newline; the "since" column is left out when no key of the catalog names a
// release. markdown_reference(catalog) (config_keys.hpp) is this with the experiment file's
// header. Defined in config_keys.cpp.

#include <string>

#include "sim/core/config_keys.hpp"

namespace stepsim {

std::string markdown_reference(const ConfigCatalog& catalog, const std::string& header);

}  // namespace stepsim
