#pragma once
// The one place that builds a visitor from lambdas for std::visit over a closed variant: the
// Program's instructions, a scope's collective model (STYLE.md item 2).

namespace stepsim {

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

}  // namespace stepsim
