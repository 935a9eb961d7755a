// The C++ frontend, part 2: how the generated functions (frontend_ops.h) pass optional operands
// to ops:: and turn its results back into api::Tensor. Included by frontend_ops.h once
// api::Tensor is complete.
#pragma once
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace ember {
namespace api {

namespace detail {
inline ember::Tensor core(const std::optional<Tensor>& t) {
  return t && t->defined() ? t->impl() : ember::Tensor();
}
inline ember::TensorOrScalar core(const std::optional<TensorOrScalarArg>& v) {
  return v ? v->core() : ember::TensorOrScalar();
}
inline std::vector<ember::Tensor> core(const std::vector<std::optional<Tensor>>& ts) {
  std::vector<ember::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(core(t));
  return out;
}
inline std::optional<DimVector> core(const OptionalIntArrayRef& v) {
  return v ? std::optional<DimVector>(v->core()) : std::nullopt;
}
inline std::optional<ember::ScalarType> core(const std::optional<ScalarType>& t) {
  return t ? std::optional<ember::ScalarType>(to_core(*t)) : std::nullopt;
}
inline std::optional<ember::Device> core(const std::optional<Device>& d) {
  return d ? std::optional<ember::Device>(d->core()) : std::nullopt;
}

// Results: engine tensors become api::Tensor, everything else passes through.
inline Tensor wrap(ember::Tensor t) { return Tensor(std::move(t)); }
inline std::vector<Tensor> wrap(std::vector<ember::Tensor> ts) {
  return std::vector<Tensor>(std::make_move_iterator(ts.begin()),
                             std::make_move_iterator(ts.end()));
}
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T> || std::is_same_v<T, Scalar>>>
T wrap(T v) {
  return v;
}
template <class... Ts>
auto wrap(std::tuple<Ts...> t) {
  return std::apply([](auto&&... v) { return std::make_tuple(wrap(std::move(v))...); },
                    std::move(t));
}
}  // namespace detail

}  // namespace api
}  // namespace ember
