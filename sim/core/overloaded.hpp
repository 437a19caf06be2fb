#pragma once
// The one place that builds a visitor from lambdas for std::visit over the Program's closed
// instruction variant (STYLE.md item 2).

namespace stepsim {

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

}  // namespace stepsim
