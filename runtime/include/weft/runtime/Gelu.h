//===- Gelu.h - GELU and its derivative on the host -------------*- C++ -*-===//
//
// The two forms of GELU (PyTorch's `approximate` = "none" and "tanh") and
// their derivatives, as host code computes them: the reference semantics of
// weft.gelu and weft.gelu_grad (in double) and the CPU runtime's GEMM
// epilogues (kGemmGelu, kGemmGeluGradient; in float). Compiled code builds
// the same formulas in IR (weft/Lowering/ScalarMath.h).
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_GELU_H
#define WEFT_RUNTIME_GELU_H

#include <cmath>

namespace weft::runtime {

constexpr double kSqrtTwoOverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;

/// x * Phi(x).
template <typename T> T geluErf(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(M_SQRT1_2)));
}
/// Phi(x) + x * phi(x).
template <typename T> T geluErfDerivative(T x) {
  T cdf = T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
  T pdf = T(0.3989422804014327) * std::exp(T(-0.5) * x * x);
  return cdf + x * pdf;
}

/// 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3).
template <typename T> T geluTanh(T x) {
  T u = T(kSqrtTwoOverPi) * (x + T(kGeluCubic) * x * x * x);
  return T(0.5) * x * (T(1) + std::tanh(u));
}
/// 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) du/dx.
template <typename T> T geluTanhDerivative(T x) {
  T u = T(kSqrtTwoOverPi) * (x + T(kGeluCubic) * x * x * x);
  T th = std::tanh(u);
  T du = T(kSqrtTwoOverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
  return T(0.5) * (T(1) + th) + T(0.5) * x * (T(1) - th * th) * du;
}

} // namespace weft::runtime

#endif // WEFT_RUNTIME_GELU_H
