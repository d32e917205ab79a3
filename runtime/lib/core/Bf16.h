//===- Bf16.h - bf16 values on the CPU --------------------------*- C++ -*-===//
//
// The runtime's own reductions of bf16 data (MPI has no bf16) combine in
// float, rounding once per operation as the compiled code's truncations do;
// fp16 GEMM inputs are widened exactly.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_LIB_CORE_BF16_H
#define WEFT_RUNTIME_LIB_CORE_BF16_H

#include <cstdint>
#include <cstring>

namespace weft::runtime {

inline float bf16ToFloat(uint16_t bits) {
  uint32_t wide = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

/// An IEEE binary16 (fp16) value, exactly (subnormals, infinities and NaNs
/// included).
inline float f16ToFloat(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000) << 16, exponent = (bits >> 10) & 0x1f,
           mantissa = bits & 0x3ff, wide;
  if (exponent == 0x1f) {
    wide = sign | 0x7f800000 | (mantissa << 13);
  } else if (exponent != 0) {
    wide = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    float magnitude = float(mantissa) * 0x1p-24f;
    std::memcpy(&wide, &magnitude, 4);
    wide |= sign;
  }
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

/// Round to nearest even.
inline uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffff) > 0x7f800000)
    return uint16_t((bits >> 16) | 0x40); // a quiet NaN
  bits += 0x7fff + ((bits >> 16) & 1);
  return uint16_t(bits >> 16);
}

} // namespace weft::runtime

#endif // WEFT_RUNTIME_LIB_CORE_BF16_H
