// fmt's compiled half, for the static `stepsim` binary (STEPSIM_STATIC_CLI, the top
// CMakeLists.txt). Debian ships fmt as a shared library only, and a static executable cannot
// link it; fmt's header-only mode instead has every file that formats compile the formatting
// machinery again (+50 % on the build, docs/limits.md). So the libraries keep fmt's ordinary
// headers, whose non-template functions and `extern template`s they call, and this one file
// defines them from fmt's own implementation header, as libfmt does: the functions that
// format-inl.h defines outright (vformat, format_error, is_printable, throw_format_error, ...)
// and the instantiations the headers declare extern or call (the locale queries for char,
// dragonbox's shortest decimal for float and double). A symbol missing here fails the link.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;

}  // namespace detail
FMT_END_NAMESPACE
