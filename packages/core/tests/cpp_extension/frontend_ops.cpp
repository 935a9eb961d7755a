// A PyTorch-style C++ extension (test_cpp_extension.py builds it with load_inline): the
// <torch/extension.h> names an extension uses, each checked from Python against the same
// computation in ember and, where installed, torch.
#include <torch/extension.h>

#include <atomic>
#include <vector>

// LLTM cell (the classic extension example): ops, chunk, operators, a vector result.
std::vector<torch::Tensor> lltm_forward(torch::Tensor input, torch::Tensor weights,
                                        torch::Tensor bias, torch::Tensor old_h,
                                        torch::Tensor old_cell) {
  auto X = torch::cat({old_h, input}, /*dim=*/1);
  auto gate_weights = torch::addmm(bias, X, weights.transpose(0, 1));
  auto gates = gate_weights.chunk(3, /*dim=*/1);
  auto input_gate = torch::sigmoid(gates[0]);
  auto output_gate = torch::sigmoid(gates[1]);
  auto candidate_cell = torch::elu(gates[2], /*alpha=*/1.0);
  auto new_cell = old_cell + candidate_cell * input_gate;
  auto new_h = torch::tanh(new_cell) * output_gate;
  return {new_h, new_cell, input_gate};
}

// A hand-written element loop over raw memory, for every floating dtype.
template <class T>
void softclip_loop(const T* in, T* out, int64_t n, double limit) {
  for (int64_t i = 0; i < n; ++i) {
    double v = static_cast<double>(static_cast<float>(in[i]));
    out[i] = static_cast<T>(static_cast<float>(v / (1.0 + std::abs(v) / limit)));
  }
}
torch::Tensor softclip(const torch::Tensor& x, double limit) {
  TORCH_CHECK(limit > 0, "softclip: limit must be positive, got ", limit);
  TORCH_CHECK(x.device().is_cpu(), "softclip: expected a CPU tensor");
  auto xc = x.contiguous();
  auto out = torch::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(xc.scalar_type(), "softclip", [&] {
    softclip_loop<scalar_t>(xc.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), xc.numel(), limit);
  });
  return out;
}

// Row sums through a 2-d accessor (strided input).
torch::Tensor row_sums(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 2, "row_sums: expected a 2-d tensor, got ", x.dim(), " dims");
  auto out = torch::zeros({x.size(0)}, x.options());
  AT_DISPATCH_ALL_TYPES(x.scalar_type(), "row_sums", [&] {
    auto a = x.accessor<scalar_t, 2>();
    auto o = out.accessor<scalar_t, 1>();
    for (int64_t i = 0; i < a.size(0); ++i)
      for (int64_t j = 0; j < a.size(1); ++j) o[i] += a[i][j];
  });
  return out;
}

// Overloads and defaults of generated functions and methods.
std::vector<torch::Tensor> reductions(const torch::Tensor& x) {
  auto mx = x.max(/*dim=*/1);
  return {x.sum(),
          x.sum(1),
          x.sum({0, 1}, /*keepdim=*/true),
          x.mean(-1, true),
          std::get<0>(mx),
          std::get<1>(mx),
          torch::softmax(x, -1),
          x.argmax(0),
          x.norm(),
          torch::logsumexp(x, {1})};
}
std::vector<torch::Tensor> shapes(const torch::Tensor& x) {
  return {x.view({-1}),
          x.reshape({x.size(1), x.size(0)}),
          x.t().contiguous(),
          x.unsqueeze(0).squeeze(0),
          x.permute({1, 0}),
          x[1],
          x.narrow(1, 0, 2),
          torch::stack({x, x}, 0),
          x.index_select(0, torch::arange(1, torch::kLong)),
          torch::where(x > 0, x, torch::zeros_like(x)),
          x.clamp(-0.5, 0.5),
          x.flatten()};
}

// Factories and options.
std::vector<torch::Tensor> factories(const torch::Tensor& like) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  return {torch::zeros({2, 3}, opts),
          torch::ones({2}, torch::kInt32),
          torch::full({2, 2}, 1.5),
          torch::arange(5),
          torch::arange(1, 7, 2, torch::dtype(torch::kFloat32)),
          torch::empty({0}, like.options()),
          torch::eye(3),
          torch::linspace(0, 1, 5),
          torch::zeros({3}, torch::requires_grad())};
}

// Metadata as the frontend reports it.
py::dict describe(const torch::Tensor& x) {
  py::dict d;
  d["dim"] = x.dim();
  d["numel"] = x.numel();
  d["sizes"] = x.sizes().vec();
  d["strides"] = x.strides().vec();
  d["last"] = x.size(-1);
  d["dtype"] = std::string(c10::toString(x.scalar_type()));
  d["element_size"] = x.element_size();
  d["device"] = x.device().str();
  d["contiguous"] = x.is_contiguous();
  d["requires_grad"] = x.requires_grad();
  d["is_float"] = x.scalar_type() == at::kFloat;
  return d;
}

// In-place methods, out= functions, operators with a number first, conversions.
torch::Tensor in_place(torch::Tensor x) {
  x.mul_(2).add_(1);
  x += 1;
  x -= torch::ones_like(x);
  x *= 3;
  x /= 3;
  return x;
}
torch::Tensor numbers_first(const torch::Tensor& x) { return 1 - 2 * x + 3 / (x + 4); }
torch::Tensor out_variant(const torch::Tensor& x, torch::Tensor out) {
  torch::exp_out(out, x);
  return out;
}
torch::Tensor to_double(const torch::Tensor& x) { return x.to(torch::kDouble); }
double item_of(const torch::Tensor& x) { return x.sum().item<double>(); }

// None and identity: an undefined tensor is None, an optional argument may be None, and a
// tensor returned as is keeps its Python object.
torch::Tensor maybe_add(const torch::Tensor& x, c10::optional<torch::Tensor> y) {
  return y ? x + *y : x;
}
torch::Tensor undefined() { return torch::Tensor(); }
std::tuple<torch::Tensor, int64_t> pair(const torch::Tensor& x) { return {x, x.numel()}; }

// Autograd from C++: a leaf, a graph, backward and the leaf's grad.
torch::Tensor grad_of_cube(const torch::Tensor& x) {
  auto leaf = x.detach().requires_grad_(true);
  (leaf * leaf * leaf).sum().backward();
  return leaf.grad();
}

// Memory an extension owns, shared without a copy; the deleter runs when the last reference
// goes away.
std::atomic<int> g_freed{0};
torch::Tensor blob(int64_t n) {
  auto* data = new float[n];
  for (int64_t i = 0; i < n; ++i) data[i] = static_cast<float>(i);
  return torch::from_blob(
      data, {n},
      [](void* p) {
        delete[] static_cast<float*>(p);
        g_freed.fetch_add(1);
      },
      torch::kFloat);
}
int freed() { return g_freed.load(); }

// Errors: TORCH_CHECK, an ember op refusing its input, an index out of range, a dtype the
// dispatch macro lacks.
torch::Tensor check_positive(const torch::Tensor& x) {
  TORCH_CHECK((x > 0).all().item<bool>(), "check_positive: expected positive values");
  return x;
}
torch::Tensor bad_matmul(const torch::Tensor& a, const torch::Tensor& b) { return torch::mm(a, b); }
int64_t size_of(const torch::Tensor& x, int64_t d) { return x.size(d); }
torch::Tensor value_check(int64_t n) {
  TORCH_CHECK_VALUE(n >= 0, "value_check: n must be >= 0, got ", n);
  return torch::zeros({n});
}

// torch::indexing: basic indices make one view; tensor indices and masks index it.
std::vector<torch::Tensor> indexed(const torch::Tensor& x) {
  using namespace torch::indexing;
  return {x.index({Slice(), 0}), x.index({"...", Slice(1, None, 2)}),
          x.index({None, -1}),   x.index({Slice(None, 2), torch::tensor({0, 2})}),
          x.index({x > 0}),      x.index({Ellipsis, None})};
}
torch::Tensor index_put(torch::Tensor x) {
  using namespace torch::indexing;
  x.index_put_({Slice(), 0}, 0.5);
  x.index_put_({x < 0}, torch::zeros({1}, x.options()));
  return x;
}

// A custom autograd function in C++: saved tensors, saved data, a non-tensor argument.
struct ScaledSquare : public torch::autograd::Function<ScaledSquare> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x,
                               double scale) {
    ctx->save_for_backward({x});
    ctx->saved_data["scale"] = scale;
    return x * x * scale;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto x = ctx->get_saved_variables()[0];
    double s = ctx->saved_data["scale"].toDouble();
    return {grad[0] * 2 * s * x, torch::Tensor()};
  }
};
torch::Tensor scaled_square(torch::Tensor x, double scale) { return ScaledSquare::apply(x, scale); }

// Two outputs, one of them not differentiable; an output saved for backward.
struct ExpAndArgmax : public torch::autograd::Function<ExpAndArgmax> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                torch::Tensor x) {
    auto e = torch::exp(x);
    auto idx = x.argmax();
    ctx->mark_non_differentiable({idx});
    ctx->save_for_backward({e});
    return {e, idx};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    return {grad[0] * ctx->get_saved_variables()[0]};
  }
};
std::vector<torch::Tensor> exp_and_argmax(torch::Tensor x) { return ExpAndArgmax::apply(x); }

// A backward that returns the wrong number of gradients.
struct BadBackward : public torch::autograd::Function<BadBackward> {
  static torch::Tensor forward(torch::autograd::AutogradContext*, torch::Tensor x) { return x * 2; }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grad) {
    return {grad[0], grad[0]};
  }
};
torch::Tensor bad_backward(torch::Tensor x) { return BadBackward::apply(x); }
