// Derivatives of the matrix factorizations (ops/linalg.yaml, "factorizations"): solve and inv,
// det and slogdet, SVD, the symmetric eigendecomposition, QR and least squares, for real
// matrices and (solve, det, slogdet, SVD, eigh, QR, Cholesky, triangular solves, least squares)
// complex ones, in PyTorch's convention (the gradient of a real loss is dL/dRe + i dL/dIm): the
// real formulas with transposes made conjugate transposes (mH), plus the imaginary diagonal
// terms of SVD and QR; SVD and eigh raise when the loss depends on the singular vectors' or
// eigenvectors' phases. Written on ops::, so gradients of gradients work. Where the textbook
// formula divides by a difference of (squared) singular values or eigenvalues, or by a singular
// value, a zero divisor gives 0 instead of inf: those terms are multiplied by a zero gradient in
// the cases that reach them (svdvals of a rank-deficient matrix, eigvalsh with repeated
// eigenvalues), and with a nonzero one the derivative does not exist anyway.
#pragma once
#include <algorithm>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/formulas_base.h"

namespace ember {
namespace autograd {
namespace formulas {

inline Tensor mT(const Tensor& t) { return ops::transpose(t, -2, -1); }
// A value of a 0-d bool tensor on the host (false on meta).
inline bool host_flag(const Tensor& t) {
  if (t->device().is_meta()) return false;
  Tensor c = t->device().is_cpu() ? t : ops::_to_copy(t, std::nullopt, cpu_device(), false);
  return *c->data_as<bool>();
}
// The conjugate transpose (mT for real t).
inline Tensor mH(const Tensor& t) {
  Tensor x = mT(t);
  return is_complex(t->dtype()) ? ops::conj_physical(x, Tensor()) : x;
}
// conj(t) for complex t, else t.
inline Tensor conj_of(const Tensor& t) {
  return is_complex(t->dtype()) ? ops::conj_physical(t, Tensor()) : t;
}
// i * x for a real x, as a complex tensor.
inline Tensor times_i(const Tensor& x) {
  return ops::complex(ops::zeros_like(x, std::nullopt, std::nullopt), x, Tensor());
}
// Whether every |x| <= atol + rtol |ref| (x, ref real; true on meta).
inline bool all_small(const Tensor& x, const Tensor& ref, double tol) {
  Tensor bound = add(mul(ops::abs(ref, Tensor()), Scalar(tol)), Scalar(tol));
  return !host_flag(ops::any(ops::gt(ops::abs(x, Tensor()), TensorOrScalar(bound), Tensor()),
                             std::nullopt, false));
}
inline Tensor mmul(const Tensor& a, const Tensor& b) { return ops::matmul(a, b); }
// The n x n identity in t's dtype and device.
inline Tensor eye_of(const Tensor& t, int64_t n) {
  if (!is_complex(t->dtype())) return ops::eye(n, std::nullopt, t->dtype(), t->device());
  // (eye makes real dtypes only)
  return ops::_to_dtype(ops::eye(n, std::nullopt, to_real(t->dtype()), t->device()), t->dtype(),
                        false);
}
// X with A X = B (batch dims broadcast).
inline Tensor lsolve(const Tensor& A, const Tensor& B) {
  return std::get<0>(ops::_linalg_solve_ex(A, B));
}
// 1 / x where x != 0, else 0; differentiable everywhere.
inline Tensor safe_reciprocal(const Tensor& x) {
  Tensor zero =
      ops::_to_dtype(ops::eq(x, TensorOrScalar(Scalar(0.0)), Tensor()), x->dtype(), false);
  return div(x, add(mul(x, x), zero));
}
// 1 / (v_j - v_i) off the diagonal and 0 on it (and where v_j == v_i), for v (..., k).
inline Tensor difference_reciprocals(const Tensor& v) {
  Tensor e = sub(ops::unsqueeze(v, -2), ops::unsqueeze(v, -1));
  return safe_reciprocal(e);
}
// The diagonal matrices of v (..., k).
inline Tensor diag_of(const Tensor& v) {
  return mul(ops::unsqueeze(v, -1), eye_of(v, v->size(v->dim() - 1)));
}
inline Tensor as_matrix_scale(const Tensor& g) { return ops::unsqueeze(ops::unsqueeze(g, -1), -1); }

// solve: X = A^-1 B. dB = A^-H g, dA = -dB X^H.
inline Tensor linalg_solve_backward(const Tensor& grad, const Tensor& A, const Tensor& X,
                                    bool wrt_A) {
  Tensor gB = lsolve(mH(A), grad);
  return wrt_A ? neg(mmul(gB, mH(X))) : gB;
}

// Rows of x (*, n, c) permuted by the row interchanges of an LU factorization (pivots (*, k),
// 1-based, as getrf gives them; A = P L U): P x when `apply_p`, else P^T x.
inline Tensor permute_rows(const Tensor& x, const Tensor& pivots, bool apply_p) {
  const int64_t n = x->size(x->dim() - 2), c = x->size(x->dim() - 1);
  const int64_t k = pivots->size(pivots->dim() - 1);
  if (x->device().is_meta() || x->numel() == 0) return x;
  Tensor piv =
      pivots->device().is_cpu() ? pivots : ops::_to_copy(pivots, std::nullopt, cpu_device(), false);
  DimVector psizes(x->sizes().begin(), x->sizes().end() - 2);
  psizes.push_back(k);
  piv = ops::contiguous(ops::expand(ops::_to_dtype(piv, ScalarType::Int64, false), psizes));
  DimVector sizes = x->sizes();
  Tensor index = ember::empty(sizes, ScalarType::Int64, cpu_device());
  const int64_t* p = piv->data_as<int64_t>();
  int64_t* out = index->data_as<int64_t>();
  std::vector<int64_t> perm(n), inv(n);
  const int64_t xcount = index->numel() / (n * c);
  for (int64_t b = 0; b < xcount; ++b) {
    for (int64_t i = 0; i < n; ++i) perm[i] = i;
    for (int64_t i = 0; i < k; ++i) std::swap(perm[i], perm[p[b * k + i] - 1]);
    // A[perm[i]] = (L U)[i]: (P y)[perm[i]] = y[i], (P^T y)[i] = y[perm[i]]
    for (int64_t i = 0; i < n; ++i) inv[perm[i]] = i;
    const std::vector<int64_t>& src = apply_p ? inv : perm;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < c; ++j) out[(b * n + i) * c + j] = src[i];
  }
  if (!x->device().is_cpu()) index = ops::_to_copy(index, std::nullopt, x->device(), false);
  return ops::gather(x, -2, index, false, Tensor());
}

inline Tensor tri_solve(const Tensor& A, const Tensor& B, bool upper, bool unit = false) {
  return ops::_linalg_solve_triangular(A, B, upper, unit);
}

// The square LU derivative without the permutation: for A' = L U (n x n),
// gA' = L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T (conjugate transposes for complex: LU is
// holomorphic in A, so all of its derivatives below are the real ones with T -> H).
inline Tensor lu_square_backward(const Tensor& gL, const Tensor& gU, const Tensor& L,
                                 const Tensor& U) {
  Tensor phi = add(ops::tril(mmul(mH(L), ops::tril(gL, -1, Tensor())), -1, Tensor()),
                   ops::triu(mmul(ops::triu(gU, 0, Tensor()), mH(U)), 0, Tensor()));
  Tensor x = tri_solve(mH(L), phi, true, true);
  return mH(tri_solve(U, mH(x), true));  // x U^-T
}

// lu_factor: A = P L U with LU = L - I + U packed. Square: the formula above, then P. Wide
// (m < n, U = [U1 U2]): U2 = L^-1 P^T A2 also moves with L, so gL gains -L^-T gU2 U2^T, and
// gA2 = P L^-T gU2. Tall (m > n, L = [L1; L2]): L2 = (P^T A)_2 U^-1 moves with U, so gU gains
// -L2^T gL2 U^-T, and gA2 = P gL2 U^-T.
inline Tensor linalg_lu_factor_backward(const Tensor& grad, const Tensor& LU,
                                        const Tensor& pivots) {
  const int64_t m = LU->size(LU->dim() - 2), n = LU->size(LU->dim() - 1), k = std::min(m, n);
  if (LU->numel() == 0) return ops::zeros_like(LU, std::nullopt, std::nullopt);
  const int64_t r = LU->dim() - 2, c = LU->dim() - 1;
  Tensor eye = ops::eye(m, k, to_real(LU->dtype()), LU->device());
  Tensor L = add(ops::tril(ops::narrow(LU, c, 0, k), -1, Tensor()),
                 ops::_to_dtype(eye, LU->dtype(), false));
  Tensor U = ops::triu(ops::narrow(LU, r, 0, k), 0, Tensor());
  Tensor gL = ops::tril(ops::narrow(grad, c, 0, k), -1, Tensor());
  Tensor gU = ops::triu(ops::narrow(grad, r, 0, k), 0, Tensor());
  Tensor x;
  if (m == n) {
    x = lu_square_backward(gL, gU, L, U);
  } else if (m < n) {
    Tensor U1 = ops::narrow(U, c, 0, m), U2 = ops::narrow(U, c, m, n - m);
    Tensor gU1 = ops::narrow(gU, c, 0, m), gU2 = ops::narrow(gU, c, m, n - m);
    Tensor t = tri_solve(mH(L), gU2, true, true);  // L^-T gU2
    x = ops::cat({lu_square_backward(sub(gL, mmul(t, mH(U2))), gU1, L, U1), t}, -1, Tensor());
  } else {
    Tensor L1 = ops::narrow(L, r, 0, n), L2 = ops::narrow(L, r, n, m - n);
    Tensor gL1 = ops::narrow(gL, r, 0, n), gL2 = ops::narrow(gL, r, n, m - n);
    Tensor t = mH(tri_solve(U, mH(gL2), true));  // gL2 U^-T
    x = ops::cat({lu_square_backward(gL1, sub(gU, mmul(mH(L2), t)), L1, U), t}, -2, Tensor());
  }
  return permute_rows(x, pivots, true);
}

// lu_solve's derivative with respect to LU: gA of X = A^-1 B (A^-T B with trans) taken back
// through A = P L U: gLU = tril(P^T gA U^T, -1) + triu(L^T P^T gA).
inline Tensor lu_solve_backward_LU(const Tensor& grad, const Tensor& LU, const Tensor& pivots,
                                   const Tensor& X, bool trans) {
  const int64_t n = LU->size(LU->dim() - 1);
  // A^-H gX (conj(A)^-1 gX with trans): for complex A, conj(A^-T conj(gX))
  Tensor Y = conj_of(ops::_lu_solve(LU, pivots, conj_of(grad), !trans));
  Tensor gA = trans ? neg(mmul(conj_of(X), mT(Y))) : neg(mmul(Y, mH(X)));
  Tensor L = add(ops::tril(LU, -1, Tensor()), eye_of(LU, n));
  Tensor U = ops::triu(LU, 0, Tensor());
  Tensor pg = permute_rows(gA, pivots, false);
  return add(ops::tril(mmul(pg, mH(U)), -1, Tensor()), ops::triu(mmul(mH(L), pg), 0, Tensor()));
}

// Cholesky A = L L^T (U^T U with upper): with Phi(M) = tril(M) with its diagonal halved,
// S = L^-T Phi(L^T gL) L^-1 and gA = (S + S^T) / 2 (A's two triangles share each entry).
// Complex: A = L L^H, with conjugate transposes (see below).
inline Tensor linalg_cholesky_backward(const Tensor& grad, const Tensor& factor, bool upper) {
  if (factor->numel() == 0) return ops::zeros_like(factor, std::nullopt, std::nullopt);
  Tensor L = upper ? mH(factor) : factor;
  Tensor gL = ops::tril(upper ? mH(grad) : grad, 0, Tensor());
  Tensor M = mmul(mH(L), gL);
  if (is_complex(M->dtype())) {
    // as PyTorch: L^-H (tril(M) + tril(M, -1)^H) / 2 L^-1, whose diagonal keeps its imaginary
    // part (for real matrices the same as below)
    Tensor mid = mul(add(ops::tril(M, 0, Tensor()), mH(ops::tril(M, -1, Tensor()))), Scalar(0.5));
    Tensor X = ops::_linalg_solve_triangular(mH(L), mid, true, false);    // L^-H mid
    return mH(ops::_linalg_solve_triangular(mH(L), mH(X), true, false));  // X L^-1
  }
  Tensor phi =
      sub(ops::tril(M, 0, Tensor()), mul(diag_of(ops::diagonal(M, 0, -2, -1)), Scalar(0.5)));
  Tensor S = ops::_linalg_solve_triangular(mH(L), phi, true, false);  // L^-H phi
  S = mH(ops::_linalg_solve_triangular(mH(L), mH(S), true, false));   // (L^-H S^H)^H = S L^-1
  return mul(add(S, mH(S)), Scalar(0.5));
}

// Triangular solve X = A^-1 B: gB = A^-T gX, gA = -gB X^T on A's triangle (strictly, for a
// unit diagonal).
inline Tensor linalg_solve_triangular_backward(const Tensor& grad, const Tensor& A, const Tensor& X,
                                               bool upper, bool unitriangular, bool wrt_A) {
  Tensor gB = ops::_linalg_solve_triangular(mH(A), grad, !upper, unitriangular);
  if (!wrt_A) return gB;
  Tensor g = neg(mmul(gB, mH(X)));
  const int64_t d = unitriangular ? 1 : 0;
  return upper ? ops::triu(g, d, Tensor()) : ops::tril(g, -d, Tensor());
}

inline Tensor lu_solve_backward_B(const Tensor& grad, const Tensor& LU, const Tensor& pivots,
                                  bool trans) {
  return conj_of(ops::_lu_solve(LU, pivots, conj_of(grad), !trans));
}

// slogdet: d log|det A| / dA = A^-T (A^-H for complex A).
inline Tensor linalg_slogdet_backward(const Tensor& grad, const Tensor& A) {
  const int64_t n = A->size(A->dim() - 1);
  return mul(as_matrix_scale(grad), lsolve(mH(A), eye_of(A, n)));
}

// slogdet with the sign's gradient too: the sign is piecewise constant for real A; for complex
// A, d sign = i sign Im tr(A^-1 dA), so the loss's gradient is c A^-H with
// c = g_logabsdet - i Im(conj(g_sign) sign).
inline Tensor linalg_slogdet_backward(const std::vector<Tensor>& grads, const Tensor& A,
                                      const Tensor& sign) {
  Tensor g = grads[0] ? grads[0] : ops::zeros(sign->sizes(), to_real(A->dtype()), A->device());
  if (is_complex(A->dtype()) && grads[1])
    g = ops::complex(g, neg(ops::imag(mul(conj_of(grads[1]), sign))), Tensor());
  return linalg_slogdet_backward(g, A);
}

// det: d det A / dA = adj(A)^T, which is det(A) A^-T for an invertible A; when some matrix of
// the batch is singular, adj(A)^T is taken from the SVD A = U S V^T instead:
// det(U) det(V) U diag(prod_{j != i} s_j) V^T, which is defined for every A.
inline Tensor linalg_det_backward(const Tensor& grad, const Tensor& A, const Tensor& det) {
  const int64_t n = A->size(A->dim() - 1);
  if (n == 0) return ops::zeros_like(A, std::nullopt, std::nullopt);
  if (!host_flag(
          ops::any(ops::eq(det, TensorOrScalar(Scalar(0.0)), Tensor()), std::nullopt, false)))
    return mul(as_matrix_scale(mul(grad, conj_of(det))), lsolve(mH(A), eye_of(A, n)));
  auto svd = ops::_linalg_svd(A, false, true);
  const Tensor &U = std::get<0>(svd), &S = std::get<1>(svd), &Vh = std::get<2>(svd);
  Tensor eye_b = ops::_to_dtype(eye_of(A, n), ScalarType::Bool, false);
  DimVector square = S->sizes();
  square.insert(square.size() - 1, n);
  Tensor others = ops::where(eye_b, TensorOrScalar(Scalar(1.0)),
                             TensorOrScalar(ops::expand(ops::unsqueeze(S, -2), square)), Tensor());
  Tensor p = ops::prod(others, int64_t{-1}, false, std::nullopt);  // prod_{j != i} s_j
  Tensor orient = std::get<0>(ops::_linalg_det(mmul(U, Vh)));      // det(U) det(V)
  Tensor adjT = mmul(mul(U, ops::unsqueeze(p, -2)), Vh);           // conj(adj(A)^T) / conj(orient)
  return mul(as_matrix_scale(mul(grad, conj_of(orient))), adjT);
}

inline Tensor svd_backward_reduced(const Tensor& gU, const Tensor& gS, const Tensor& gVh,
                                   const Tensor& U, const Tensor& S, const Tensor& Vh, int64_t m,
                                   int64_t n, int64_t k) {
  Tensor V = mH(Vh), gV = mH(gVh);
  Tensor F = difference_reciprocals(mul(S, S));
  Tensor UtgU = mmul(mH(U), gU), VtgV = mmul(mH(V), gV);
  Tensor J = mul(F, sub(UtgU, mH(UtgU))), K = mul(F, sub(VtgV, mH(VtgV)));
  Tensor inner =
      add(add(mul(J, ops::unsqueeze(S, -2)), mul(ops::unsqueeze(S, -1), K)), diag_of(gS));
  Tensor Sinv = safe_reciprocal(S);
  if (is_complex(U->dtype())) {
    // U and V are determined up to U e^{i phi}, V e^{i phi}: a loss is well defined only when
    // Im diag(U^H gU) + Im diag(V^H gV) == 0. Then the phases' term is i Im diag(U^H gU) / S.
    Tensor du = ops::imag(ops::diagonal(UtgU, 0, -2, -1));
    Tensor dv = ops::imag(ops::diagonal(VtgV, 0, -2, -1));
    EMBER_CHECK(all_small(add(du, dv), du, 1e-2), "linalg_svd_backward: The singular vectors ",
                "in the complex case are specified up to multiplication by e^{i phi}. The ",
                "specified loss function depends on this phase term, making it ill-defined.");
    inner = add(inner, diag_of(times_i(mul(du, Sinv))));
  }
  Tensor gA = mmul(mmul(U, inner), Vh);
  if (m > k) {
    Tensor proj = sub(gU, mmul(U, UtgU));
    gA = add(gA, mmul(mul(proj, ops::unsqueeze(Sinv, -2)), Vh));
  }
  if (n > k) {
    Tensor proj = sub(gVh, mmul(mmul(gVh, V), Vh));
    gA = add(gA, mmul(U, mul(ops::unsqueeze(Sinv, -1), proj)));
  }
  return gA;
}

// SVD A = U diag(S) Vh, on the reduced factors. With F_ij = 1/(s_j^2 - s_i^2)
// off the diagonal, J = F o (U^T gU - gU^T U) and K = F o (V^T gV - gV^T V):
// gA = U (J S + S K + diag(gS)) Vh + (I - U U^T) gU S^-1 Vh + U S^-1 (gVh - gVh V Vh).
inline Tensor linalg_svd_backward(const std::vector<Tensor>& grads, const Tensor& U,
                                  const Tensor& S, const Tensor& Vh, bool full_matrices,
                                  bool compute_uv) {
  EMBER_CHECK(compute_uv, "linalg.svd: the derivative needs the singular vectors; call it with ",
              "compute_uv=True");
  const int64_t m = U->size(U->dim() - 2), n = Vh->size(Vh->dim() - 1);
  const int64_t k = S->size(S->dim() - 1);
  DimVector shape(S->sizes().begin(), S->sizes().end() - 1);
  shape.push_back(m);
  shape.push_back(n);
  if (k == 0) return ops::zeros(shape, U->dtype(), S->device());
  Tensor gU = grads[0], gVh = grads[2];
  const Tensor& gS = grads[1];
  // With full_matrices, the columns of U (rows of Vh) past k are not determined by A (any
  // orthonormal completion): as in PyTorch, the loss is taken not to depend on them.
  Tensor U_ = U, Vh_ = Vh;
  if (full_matrices && m != n) {
    U_ = ops::narrow(U, U->dim() - 1, 0, k);
    gU = ops::narrow(gU, gU->dim() - 1, 0, k);
    Vh_ = ops::narrow(Vh, Vh->dim() - 2, 0, k);
    gVh = ops::narrow(gVh, gVh->dim() - 2, 0, k);
  }
  return svd_backward_reduced(gU, gS, gVh, U_, S, Vh_, m, n, k);
}

// eigh A = V diag(L) V^T: gA = V (diag(gL) + F o skew(V^T gV)) V^T, F_ij = 1/(L_j - L_i) off the
// diagonal, skew(X) = (X - X^T) / 2 (A's perturbations are symmetric).
// Complex (A = V diag(L) V^H): the same with V^H, when the loss does not depend on the
// eigenvectors' phases (Im diag(V^H gV) == 0).
inline Tensor linalg_eigh_backward(const std::vector<Tensor>& grads, const Tensor& L,
                                   const Tensor& V, bool compute_v) {
  EMBER_CHECK(compute_v, "linalg.eigh: the derivative needs the eigenvectors; call ",
              "linalg.eigh rather than eigvalsh with compute_v=False");
  const Tensor &gL = grads[0], &gV = grads[1];
  Tensor VhgV = mmul(mH(V), gV);
  if (is_complex(V->dtype())) {
    Tensor d = ops::imag(ops::diagonal(VhgV, 0, -2, -1));
    EMBER_CHECK(all_small(d, d, 1e-2), "linalg_eigh_backward: The eigenvectors in the complex ",
                "case are specified up to multiplication by e^{i phi}. The specified loss ",
                "function depends on this quantity, so it is ill-defined.");
  }
  // as PyTorch, the skew-Hermitian (skew-symmetric) part: the gradient is then Hermitian
  VhgV = mul(sub(VhgV, mH(VhgV)), Scalar(0.5));
  Tensor inner = add(mul(difference_reciprocals(L), VhgV), diag_of(gL));
  return mmul(mmul(V, inner), mH(V));
}

// The general eigendecomposition A V = V diag(L): computed on complex values by the
// _linalg_eig_backward kernel (the real part for a real A). An unused output's gradient is 0.
inline Tensor linalg_eig_backward(const std::vector<Tensor>& grads, const Tensor& L,
                                  const Tensor& V, const InputMeta& A_meta, bool compute_v) {
  EMBER_CHECK(compute_v, "linalg.eig: the derivative needs the eigenvectors; call linalg.eig ",
              "rather than eigvals with compute_v=False");
  Tensor gL = grads[0] ? grads[0] : ops::zeros_like(L, std::nullopt, std::nullopt);
  Tensor gV = grads[1] ? grads[1] : ops::zeros_like(V, std::nullopt, std::nullopt);
  return ops::_linalg_eig_backward(gL, gV, L, V, !is_complex(A_meta.dtype));
}

// QR A = Q R with m >= n (Q m x n, R n x n upper): M = R gR^T - gQ^T Q,
// gA = (gQ + Q copyltu(M)) R^-T with copyltu(M) = tril(M) + tril(M, -1)^T.
// Complex (R's diagonal real): M = R gR^H - gQ^H Q and
// copyltu(M) = tril(M, -1) + tril(M, -1)^H + Re diag(M), gA = (gQ + Q copyltu(M)) R^-H.
inline Tensor qr_backward_tall(const Tensor& gQ, const Tensor& gR, const Tensor& Q,
                               const Tensor& R) {
  Tensor M = sub(mmul(R, mH(gR)), mmul(mH(gQ), Q));
  Tensor sym;
  if (is_complex(M->dtype())) {
    Tensor low = ops::tril(M, -1, Tensor());
    sym = add(add(low, mH(low)), diag_of(ops::real(ops::diagonal(M, 0, -2, -1))));
  } else {
    sym = add(ops::tril(M, 0, Tensor()), mT(ops::tril(M, -1, Tensor())));
  }
  Tensor b = add(gQ, mmul(Q, sym));
  return mH(lsolve(R, mH(b)));
}

// QR: the tall case above; for m < n, A = [X | Y] with X = Q U square, Y = Q V:
// gX from (gQ + Y gV^T, gU) as above and gY = Q gV.
inline Tensor linalg_qr_backward(const std::vector<Tensor>& grads, const Tensor& Q, const Tensor& R,
                                 const std::string& mode) {
  EMBER_CHECK(mode != "r", "The derivative of linalg.qr depends on Q, which is not computed ",
              "when mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to ",
              "differentiate through linalg.qr.");
  const int64_t m = Q->size(Q->dim() - 2), n = R->size(R->dim() - 1);
  EMBER_CHECK(!(mode == "complete" && m > n), "The QR decomposition is not differentiable ",
              "when mode='complete' and nrows > ncols.");
  const Tensor &gQ = grads[0], &gR = grads[1];
  if (m >= n) return qr_backward_tall(gQ, gR, Q, R);
  const int64_t d = R->dim() - 1;
  Tensor Ru = ops::narrow(R, d, 0, m), Rv = ops::narrow(R, d, m, n - m);
  Tensor gU = ops::narrow(gR, d, 0, m), gV = ops::narrow(gR, d, m, n - m);
  Tensor Y = mmul(Q, Rv);
  Tensor gX = qr_backward_tall(add(gQ, mmul(Y, mH(gV))), gU, Q, Ru);
  return ops::cat({gX, mmul(Q, gV)}, -1, Tensor());
}

// The pseudoinverse from the SVD (singular values below max(m, n) * eps * the largest are
// dropped), for the least-squares derivative.
inline Tensor pinv_by_svd(const Tensor& A) {
  const int64_t m = A->size(A->dim() - 2), n = A->size(A->dim() - 1);
  auto svd = ops::_linalg_svd(A, false, true);
  const Tensor &U = std::get<0>(svd), &S = std::get<1>(svd), &Vh = std::get<2>(svd);
  const double eps = to_real(A->dtype()) == ScalarType::Float64
                         ? std::numeric_limits<double>::epsilon()
                         : std::numeric_limits<float>::epsilon();
  Tensor smax = ops::narrow(S, S->dim() - 1, 0, std::min<int64_t>(1, S->size(S->dim() - 1)));
  Tensor tol = mul(smax, Scalar(eps * double(std::max(m, n))));
  Tensor keep = ops::_to_dtype(ops::gt(S, TensorOrScalar(tol), Tensor()), S->dtype(), false);
  Tensor sinv = mul(safe_reciprocal(S), keep);
  return mmul(mul(mH(Vh), ops::unsqueeze(sinv, -2)), mH(U));
}

// lstsq: X = pinv(A) B, so gB = P^T gX and, with gP = gX B^T,
// gA = -P^T gP P^T + (I - A P) gP^T P P^T + P^T P gP^T (I - P A).
inline Tensor linalg_lstsq_backward(const Tensor& grad, const Tensor& A, const Tensor& B,
                                    bool wrt_A) {
  Tensor P = pinv_by_svd(A);
  if (!wrt_A) return mmul(mH(P), grad);
  Tensor gP = mmul(grad, mH(B));
  Tensor PT = mH(P), gPT = mH(gP);
  Tensor t1 = neg(mmul(mmul(PT, gP), PT));
  Tensor AP = mmul(A, P), PA = mmul(P, A);
  Tensor t2 = mmul(sub(gPT, mmul(AP, gPT)), mmul(P, PT));
  Tensor t3 = mmul(mmul(PT, P), sub(gPT, mmul(gPT, PA)));
  return add(add(t1, t2), t3);
}

// ---- tangents (forward mode) ----------------------------------------------------------------

inline Tensor trace_of(const Tensor& m) {
  return ops::sum(ops::diagonal(m, 0, -2, -1), DimVector{-1}, false, std::nullopt);
}
// a + b where either may be undefined (absent tangents).
inline Tensor add_defined(const Tensor& a, const Tensor& b) {
  return !a ? b : (!b ? a : add(a, b));
}

// solve: dX = A^-1 (dB - dA X).
inline Tensor linalg_solve_jvp(const Tensor& A, const Tensor& X, const Tensor& A_t,
                               const Tensor& B_t) {
  return lsolve(A, add_defined(B_t, A_t ? neg(mmul(A_t, X)) : Tensor()));
}
// det: d det = det tr(A^-1 dA); slogdet: d log|det| = tr(A^-1 dA).
inline Tensor linalg_det_jvp(const Tensor& A, const Tensor& det, const Tensor& A_t) {
  return mul(det, trace_of(lsolve(A, A_t)));
}
inline Tensor linalg_slogdet_jvp(const Tensor& A, const Tensor& A_t) {
  Tensor t = trace_of(lsolve(A, A_t));
  return is_complex(t->dtype()) ? ops::real(t) : t;
}
// Cholesky: dL = L Phi(L^-1 dA L^-T), dA the symmetric matrix of the triangle that is read.
inline Tensor linalg_cholesky_jvp(const Tensor& factor, const Tensor& A_t, bool upper) {
  Tensor dA = upper ? add(ops::triu(A_t, 0, Tensor()), mH(ops::triu(A_t, 1, Tensor())))
                    : add(ops::tril(A_t, 0, Tensor()), mH(ops::tril(A_t, -1, Tensor())));
  Tensor L = upper ? mH(factor) : factor;
  Tensor X = tri_solve(L, dA, false);
  Tensor Y = mH(tri_solve(L, mH(X), false));  // L^-1 dA L^-H
  Tensor phi =
      sub(ops::tril(Y, 0, Tensor()), mul(diag_of(ops::diagonal(Y, 0, -2, -1)), Scalar(0.5)));
  Tensor dL = mmul(L, phi);
  return upper ? mH(dL) : dL;
}
// Triangular solve: dX = A^-1 (dB - tri(dA) X), tri the part of A that is read.
inline Tensor linalg_solve_triangular_jvp(const Tensor& A, const Tensor& X, const Tensor& A_t,
                                          const Tensor& B_t, bool upper, bool unitriangular) {
  Tensor dA;
  if (A_t) {
    const int64_t d = unitriangular ? 1 : 0;
    dA = upper ? ops::triu(A_t, d, Tensor()) : ops::tril(A_t, -d, Tensor());
  }
  return tri_solve(A, add_defined(B_t, dA ? neg(mmul(dA, X)) : Tensor()), upper, unitriangular);
}

}  // namespace formulas
}  // namespace autograd
}  // namespace ember
