#include "kernels/random_rules.h"

#include <cmath>
#include <sstream>
#include <type_traits>

#include "core/dispatch.h"
#include "core/error.h"
#include "core/out_tensor.h"
#include "kernels/int_bounds.h"
#include "kernels/iterator.h"

namespace ember {

void check_uniform_range(double from, double to) {
  EMBER_CHECK(from <= to, "uniform_: expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  EMBER_CHECK(std::isfinite(to - from),
              "uniform_: expects to - from to be finite, but got from=", from, ", to=", to);
}

void check_exponential_lambda(double lambd) {
  EMBER_CHECK(lambd > 0.0, "exponential_: expects lambda > 0.0, but found lambda=", lambd);
}

void check_normal_std(double std) {
  EMBER_CHECK(std >= 0.0, "normal_: expects std >= 0.0, but found std ", std);
}

namespace {

// An explicit [from, to) of a floating dtype may reach past the integers it holds exactly, up to
// its largest finite value (PyTorch only warns there): the draws then round.
template <class T>
bool float_holds(int64_t v) {
  if constexpr (std::is_same_v<T, Half>)
    return v >= -65504 && v <= 65504;  // half's largest finite value
  else
    return true;  // float, double and bfloat16 reach past every int64
}

}  // namespace

uint64_t random_range(int64_t from, std::optional<int64_t> to, ScalarType dtype) {
  uint64_t range = 0;
  EMBER_DISPATCH_ALL(dtype, "random_", [&] {
    const auto [lo, hi] = int_bounds<scalar_t>();
    if (to) {
      EMBER_CHECK(from < *to, "random_: expects 'from' to be less than 'to', but got from=", from,
                  " >= to=", *to);
      if constexpr (std::is_integral_v<scalar_t>) {
        EMBER_CHECK(*to - 1 <= 0 || static_cast<uint64_t>(*to - 1) <= hi, "random_: to - 1 (",
                    *to - 1, ") is out of bounds for ", dtype_name(dtype));
        EMBER_CHECK(from >= lo, "random_: from=", from, " is out of bounds for ",
                    dtype_name(dtype));
      } else {
        EMBER_CHECK(float_holds<scalar_t>(*to - 1), "random_: to - 1 (", *to - 1,
                    ") is out of bounds for ", dtype_name(dtype));
        EMBER_CHECK(float_holds<scalar_t>(from), "random_: from=", from, " is out of bounds for ",
                    dtype_name(dtype));
        const auto exact = [&](int64_t v) {
          return v >= lo && (v <= 0 || static_cast<uint64_t>(v) <= hi);
        };
        if (!exact(from) || !exact(*to - 1)) {
          std::ostringstream os;
          os << "random_: the range [" << from << ", " << *to << ") reaches past +-" << hi
             << ", the integers " << dtype_name(dtype)
             << " holds exactly; the values drawn are rounded";
          warn(os.str());
        }
      }
      range = static_cast<uint64_t>(*to) - static_cast<uint64_t>(from);
    } else {
      EMBER_CHECK(from < 0 || static_cast<uint64_t>(from) <= hi, "random_: from=", from,
                  " is out of bounds for ", dtype_name(dtype));
      EMBER_CHECK(from >= lo, "random_: from=", from, " is out of bounds for ", dtype_name(dtype));
      range = hi - static_cast<uint64_t>(from) + 1;  // wraps to 0 for the full 2^64
    }
  });
  return range;
}

void check_bernoulli_self(const Tensor& self) {
  EMBER_CHECK_KIND(is_floating(self->dtype()), DtypeNotImplemented,
                   "bernoulli: expected a floating-point tensor of probabilities, but got ",
                   dtype_name(self->dtype()));
}

void check_bernoulli_p_shape(const Tensor& self, const Tensor& p) {
  EMBER_CHECK(broadcast_shapes(p->sizes(), self->sizes(), "bernoulli_") == self->sizes(),
              "bernoulli_: probability tensor of shape ", shape_str(p->sizes()),
              " can't be broadcast to self's shape ", shape_str(self->sizes()));
}

void check_bernoulli_p(double p) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "bernoulli_: expects p to be in [0, 1], but got p=", p);
}

void check_probs(const double* d, int64_t n, const char* op) {
  for (int64_t i = 0; i < n; ++i)
    EMBER_CHECK(d[i] >= 0.0 && d[i] <= 1.0, op,
                ": expects all probabilities to be in [0, 1], but got ", d[i]);
}

void check_multinomial_probs(const double* p, int64_t rows, int64_t ncat) {
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < ncat; ++c) {
      const double v = p[r * ncat + c];
      EMBER_CHECK(std::isfinite(v) && v >= 0.0,
                  "multinomial: probability tensor contains either `inf`, `nan` or element < 0");
      sum += v;
    }
    EMBER_CHECK(sum > 0.0,
                "multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
  }
}

}  // namespace ember
