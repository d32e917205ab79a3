//===- RuntimeTest.cpp - Tensor files, strided copies, GEMM, allocator ----===//

#include "weft/runtime/Collectives.h"
#include "weft/runtime/Contract.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/TensorFiles.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <unistd.h>

extern "C" {
void memrefCopy(int64_t elementSize, void *source, void *target);
void weft_gemm_f32(int64_t rankA, void *descA, int64_t rankB, void *descB,
                   int64_t rankC, void *descC, int64_t rankBias, void *descBias,
                   int64_t rankAux, void *descAux, int64_t flags);
void weft_gemm_bf16(int64_t rankA, void *descA, int64_t rankB, void *descB,
                    int64_t rankC, void *descC, int64_t rankBias,
                    void *descBias, int64_t rankAux, void *descAux,
                    int64_t flags);
void weft_gemm_f16(int64_t rankA, void *descA, int64_t rankB, void *descB,
                   int64_t rankC, void *descC, int64_t rankBias, void *descBias,
                   int64_t rankAux, void *descAux, int64_t flags);
void weft_gemm_bf16_bf16(int64_t rankA, void *descA, int64_t rankB, void *descB,
                         int64_t rankC, void *descC, int64_t rankBias,
                         void *descBias, int64_t rankAux, void *descAux,
                         int64_t flags);
void weft_emulated_gemm_bf16_bf16(int64_t rankA, void *descA, int64_t rankB,
                                  void *descB, int64_t rankC, void *descC,
                                  int64_t rankBias, void *descBias,
                                  int64_t rankAux, void *descAux,
                                  int64_t flags);
void *_mlir_memref_to_llvm_alloc(size_t bytes);
void _mlir_memref_to_llvm_free(void *pointer);
}

using namespace weft::runtime;

namespace {

std::string tempPath(const char *name) {
  return std::string(::testing::TempDir()) + name + std::to_string(getpid());
}

/// A ranked memref descriptor of rank R, as the MLIR LLVM lowering lays it.
template <int R> struct Descriptor {
  float *allocated;
  float *aligned;
  int64_t offset;
  int64_t sizes[R];
  int64_t strides[R];
};
struct Unranked {
  int64_t rank;
  void *descriptor;
};

TEST(TensorFiles, NpyRoundTrip) {
  TensorData tensor{WEFT_I64, {2, 3}, {}};
  for (int64_t v : std::initializer_list<int64_t>{1, -2, 3, 4, 5, INT64_MIN}) {
    const uint8_t *bytes = reinterpret_cast<const uint8_t *>(&v);
    tensor.bytes.insert(tensor.bytes.end(), bytes, bytes + 8);
  }
  std::string path = tempPath("roundtrip") + ".npy", error;
  ASSERT_TRUE(writeNpy(path, tensor, error)) << error;
  TensorData back;
  ASSERT_TRUE(readTensorFile(path, back, error)) << error;
  EXPECT_EQ(back.dtype, WEFT_I64);
  EXPECT_EQ(back.shape, tensor.shape);
  EXPECT_EQ(back.bytes, tensor.bytes);
  std::remove(path.c_str());
}

TEST(TensorFiles, ReadsOnnxTensorProto) {
  // dims: [2, 2] packed (field 1), data_type FLOAT (field 2 = 1),
  // float_data packed (field 4): 1, 2, 3, -4.
  std::string pb = {0x0a, 0x02, 0x02, 0x02, 0x10, 0x01, 0x22, 0x10};
  for (float v : {1.0f, 2.0f, 3.0f, -4.0f})
    pb.append(reinterpret_cast<const char *>(&v), 4);
  std::string path = tempPath("tensor") + ".pb", error;
  std::ofstream(path, std::ios::binary) << pb;
  TensorData tensor;
  ASSERT_TRUE(readTensorFile(path, tensor, error)) << error;
  EXPECT_EQ(tensor.dtype, WEFT_F32);
  EXPECT_EQ(tensor.shape, (std::vector<int64_t>{2, 2}));
  float values[4];
  memcpy(values, tensor.bytes.data(), 16);
  EXPECT_EQ(values[3], -4.0f);
  std::remove(path.c_str());
}

TEST(TensorFiles, RejectsTruncatedFiles) {
  std::string path = tempPath("bad") + ".npy", error;
  std::ofstream(path, std::ios::binary) << "\x93NUMPY\x01";
  TensorData tensor;
  EXPECT_FALSE(readTensorFile(path, tensor, error));
  EXPECT_NE(error.find("bad"), std::string::npos) << error;
  std::remove(path.c_str());
}

TEST(MemrefCopy, CopiesATransposedView) {
  float source[6] = {0, 1, 2, 3, 4, 5}; // 2x3 row-major
  float target[6] = {};
  // Read the source as its 3x2 transpose (strides 1, 3).
  Descriptor<2> src{source, source, 0, {3, 2}, {1, 3}};
  Descriptor<2> dst{target, target, 0, {3, 2}, {2, 1}};
  Unranked s{2, &src}, d{2, &dst};
  memrefCopy(sizeof(float), &s, &d);
  float expected[6] = {0, 3, 1, 4, 2, 5};
  EXPECT_EQ(0, memcmp(target, expected, sizeof(expected)));
}

/// c += a * b (c = a * b without `accumulate`) with the given views,
/// checked against a naive loop.
void checkGemm(Descriptor<3> a, Descriptor<3> b, Descriptor<3> c,
               bool accumulate = true) {
  std::vector<float> before(c.aligned, c.aligned + 4 * 64);
  Unranked ua{3, &a}, ub{3, &b}, uc{3, &c};
  weft_gemm_f32(3, ua.descriptor, 3, ub.descriptor, 3, uc.descriptor, 3,
                uc.descriptor, 3, uc.descriptor, accumulate);
  for (int64_t batch = 0; batch < c.sizes[0]; ++batch)
    for (int64_t i = 0; i < c.sizes[1]; ++i)
      for (int64_t j = 0; j < c.sizes[2]; ++j) {
        float expected =
            accumulate ? before[batch * c.strides[0] + i * c.strides[1] + j]
                       : 0.0f;
        for (int64_t p = 0; p < a.sizes[2]; ++p)
          expected += a.aligned[batch * a.strides[0] + i * a.strides[1] +
                                p * a.strides[2]] *
                      b.aligned[batch * b.strides[0] + p * b.strides[1] +
                                j * b.strides[2]];
        EXPECT_NEAR(c.aligned[batch * c.strides[0] + i * c.strides[1] + j],
                    expected, 1e-4)
            << "batch " << batch << " i " << i << " j " << j;
      }
}

TEST(Gemm, BatchedTransposedAndBroadcast) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> a(256), b(256), c(256);
  for (auto *v : {&a, &b, &c})
    for (float &x : *v)
      x = normal(rng);
  // 2 batches of [3 x 5] * [5 x 4]; b is read transposed and broadcast.
  checkGemm({a.data(), a.data(), 0, {2, 3, 5}, {15, 5, 1}},
            {b.data(), b.data(), 0, {2, 5, 4}, {0, 1, 5}},
            {c.data(), c.data(), 0, {2, 3, 4}, {12, 4, 1}});
  // Neither dim of a contiguous: the loop fallback.
  checkGemm({a.data(), a.data(), 0, {2, 3, 5}, {1, 2, 6}},
            {b.data(), b.data(), 0, {2, 5, 4}, {20, 4, 1}},
            {c.data(), c.data(), 0, {2, 3, 4}, {12, 4, 1}});
}

TEST(Gemm, OverwritesWithoutReadingC) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> a(256), b(256);
  for (auto *v : {&a, &b})
    for (float &x : *v)
      x = normal(rng);
  // beta = 0: what c held (NaN here) must not reach the result, through
  // BLAS and through the loop fallback.
  std::vector<float> c(256, std::numeric_limits<float>::quiet_NaN());
  checkGemm({a.data(), a.data(), 0, {2, 3, 5}, {15, 5, 1}},
            {b.data(), b.data(), 0, {2, 5, 4}, {0, 1, 5}},
            {c.data(), c.data(), 0, {2, 3, 4}, {12, 4, 1}},
            /*accumulate=*/false);
  std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
  checkGemm({a.data(), a.data(), 0, {2, 3, 5}, {1, 2, 6}},
            {b.data(), b.data(), 0, {2, 5, 4}, {20, 4, 1}},
            {c.data(), c.data(), 0, {2, 3, 4}, {12, 4, 1}},
            /*accumulate=*/false);
}

/// A bf16 input (any bf16 will do: the float's top half) and its value.
uint16_t truncateToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return uint16_t(bits >> 16);
}
double bf16Value(uint16_t bits) {
  uint32_t wide = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

TEST(Gemm, Bf16InputsAccumulateInF32) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> a(64), b(64);
  for (auto *v : {&a, &b})
    for (uint16_t &x : *v)
      x = truncateToBf16(normal(rng));
  std::vector<float> c(64);
  for (float &x : c)
    x = normal(rng);
  std::vector<float> before = c;
  auto bits = [](std::vector<uint16_t> &v) {
    return reinterpret_cast<float *>(v.data());
  };
  // 2 batches of [3 x 5] * [5 x 4]: a starts at element 2, b is read
  // transposed and broadcast over the batch.
  Descriptor<3> da{bits(a), bits(a), 2, {2, 3, 5}, {15, 5, 1}};
  Descriptor<3> db{bits(b), bits(b), 0, {2, 5, 4}, {0, 1, 5}};
  Descriptor<3> dc{c.data(), c.data(), 0, {2, 3, 4}, {12, 4, 1}};
  Unranked ua{3, &da}, ub{3, &db}, uc{3, &dc};
  weft_gemm_bf16(3, ua.descriptor, 3, ub.descriptor, 3, uc.descriptor, 3,
                 uc.descriptor, 3, uc.descriptor, /*accumulate=*/1);
  for (int64_t batch = 0; batch < 2; ++batch)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        double expected = before[batch * 12 + i * 4 + j];
        for (int64_t p = 0; p < 5; ++p)
          expected += bf16Value(a[2 + batch * 15 + i * 5 + p]) *
                      bf16Value(b[p + j * 5]);
        EXPECT_NEAR(c[batch * 12 + i * 4 + j], expected, 1e-5)
            << "batch " << batch << " i " << i << " j " << j;
      }
}

/// fp16 inputs are widened exactly (normals, subnormals, the largest
/// finite value) and accumulated in f32: rows of known binary16 patterns
/// times columns of 1 and 0.5.
TEST(Gemm, F16InputsWidenExactly) {
  std::vector<uint16_t> a = {
      0x3c00, 0x3800, 0x3555,
      0xc500, 0x2e66, 0xbc00, // 1, .5, ~1/3, -5, ~.1, -1
      0x0001, 0x03ff, 0x8001,
      0x0200, 0x0400, 0x0000, // subnormals, 2^-14, 0
      0x7bff, 0xfbff, 0x7bff,
      0x0000, 0x8000, 0x0000, // +-65504, +-0
  };
  std::vector<uint16_t> b(6 * 2);
  for (int64_t p = 0; p < 6; ++p) {
    b[p * 2] = 0x3c00;     // 1
    b[p * 2 + 1] = 0x3800; // 0.5
  }
  std::vector<float> c(3 * 2, 1e6f);
  auto bits = [](std::vector<uint16_t> &v) {
    return reinterpret_cast<float *>(v.data());
  };
  Descriptor<2> da{bits(a), bits(a), 0, {3, 6}, {6, 1}};
  Descriptor<2> db{bits(b), bits(b), 0, {6, 2}, {2, 1}};
  Descriptor<2> dc{c.data(), c.data(), 0, {3, 2}, {2, 1}};
  Unranked ua{2, &da}, ub{2, &db}, uc{2, &dc};
  weft_gemm_f16(2, ua.descriptor, 2, ub.descriptor, 2, uc.descriptor, 2,
                uc.descriptor, 2, uc.descriptor, /*flags=*/0);
  const double rows[3] = {1 + 0.5 + 0.333251953125 - 5 + 0.0999755859375 - 1,
                          std::ldexp(1 + 1023 - 1 + 512 + 1024, -24), 65504};
  const double tolerance[3] = {1e-6, 1e-12, 0};
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(c[i * 2], rows[i], tolerance[i]) << "row " << i;
    EXPECT_NEAR(c[i * 2 + 1], rows[i] / 2, tolerance[i]) << "row " << i;
  }
}

/// Under kGemmTf32 the f32 GEMM reads its inputs as tensor cores read TF32:
/// 10 mantissa bits, to nearest, ties to even (a column of ones sums them).
TEST(Gemm, Tf32RoundsInputsToNearestEven) {
  const float ulp = std::ldexp(1.0f, -10); // TF32's spacing above 1
  // Below half an ulp, half an ulp (to the even 1), an ulp and a half (to
  // the even 1 + 2 ulp), and beyond half an ulp.
  std::vector<float> a = {1 + ulp / 4, 1 + ulp / 2, 1 + 1.5f * ulp,
                          1 + 0.625f * ulp};
  std::vector<float> b = {1, 1, 1, 1}, c = {-1};
  float expected = 1 + 1 + (1 + 2 * ulp) + (1 + ulp);
  Descriptor<3> da{a.data(), a.data(), 0, {1, 1, 4}, {4, 4, 1}};
  Descriptor<3> db{b.data(), b.data(), 0, {1, 4, 1}, {4, 1, 1}};
  Descriptor<3> dc{c.data(), c.data(), 0, {1, 1, 1}, {1, 1, 1}};
  Unranked ua{3, &da}, ub{3, &db}, uc{3, &dc};
  weft_gemm_f32(3, ua.descriptor, 3, ub.descriptor, 3, uc.descriptor, 3,
                uc.descriptor, 3, uc.descriptor, kGemmTf32);
  EXPECT_EQ(c[0], expected);
  // Without it, f32.
  weft_gemm_f32(3, ua.descriptor, 3, ub.descriptor, 3, uc.descriptor, 3,
                uc.descriptor, 3, uc.descriptor, 0);
  EXPECT_EQ(c[0], a[0] + a[1] + a[2] + a[3]);
}

/// Under kGemmBias the bias vector is added to every row of c, after the
/// product (and c, when accumulating), over every batch.
TEST(Gemm, BiasAddsToEveryRow) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> a(2 * 3 * 5), b(5 * 4), c(2 * 3 * 4), bias(4);
  for (auto *v : {&a, &b, &c, &bias})
    for (float &x : *v)
      x = normal(rng);
  Descriptor<3> da{a.data(), a.data(), 0, {2, 3, 5}, {15, 5, 1}};
  Descriptor<3> db{b.data(), b.data(), 0, {2, 5, 4}, {0, 4, 1}};
  Descriptor<3> dc{c.data(), c.data(), 0, {2, 3, 4}, {12, 4, 1}};
  Descriptor<1> dbias{bias.data(), bias.data(), 0, {4}, {1}};
  Unranked ua{3, &da}, ub{3, &db}, uc{3, &dc}, ubias{1, &dbias};
  for (int64_t flags : {kGemmBias, kGemmBias | kGemmAccumulate}) {
    std::vector<float> before = c;
    weft_gemm_f32(3, ua.descriptor, 3, ub.descriptor, 3, uc.descriptor, 1,
                  ubias.descriptor, 3, uc.descriptor, flags);
    for (int64_t batch = 0; batch < 2; ++batch)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 4; ++j) {
          double expected = bias[j];
          if (flags & kGemmAccumulate)
            expected += before[batch * 12 + i * 4 + j];
          for (int64_t p = 0; p < 5; ++p)
            expected += double(a[batch * 15 + i * 5 + p]) * b[p * 4 + j];
          EXPECT_NEAR(c[batch * 12 + i * 4 + j], expected, 1e-5)
              << "flags " << flags << " batch " << batch << " i " << i << " j "
              << j;
        }
  }
}

/// A bf16 c (rows of 6 with 4 used, from element 2) gets its bf16 bias
/// added in f32 to the f32 product and is rounded once; the elements
/// between its rows stay as they were.
TEST(Gemm, Bf16BiasIntoBf16Rows) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> a(3 * 5), b(5 * 4), bias(4), c(2 + 3 * 6, 0x7fc0);
  for (auto *v : {&a, &b, &bias})
    for (uint16_t &x : *v)
      x = truncateToBf16(normal(rng));
  auto bits = [](std::vector<uint16_t> &v) {
    return reinterpret_cast<float *>(v.data());
  };
  Descriptor<3> da{bits(a), bits(a), 0, {1, 3, 5}, {15, 5, 1}};
  Descriptor<3> db{bits(b), bits(b), 0, {1, 5, 4}, {20, 4, 1}};
  Descriptor<3> dc{bits(c), bits(c), 2, {1, 3, 4}, {18, 6, 1}};
  Descriptor<1> dbias{bits(bias), bits(bias), 0, {4}, {1}};
  Unranked ua{3, &da}, ub{3, &db}, uc{3, &dc}, ubias{1, &dbias};
  weft_gemm_bf16_bf16(3, ua.descriptor, 3, ub.descriptor, 3, uc.descriptor, 1,
                      ubias.descriptor, 3, uc.descriptor, kGemmBias);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 6; ++j) {
      uint16_t got = c[2 + i * 6 + j];
      if (j >= 4) {
        EXPECT_EQ(got, 0x7fc0) << "padding " << i << ", " << j;
        continue;
      }
      double expected = bf16Value(bias[j]);
      for (int64_t p = 0; p < 5; ++p)
        expected += bf16Value(a[i * 5 + p]) * bf16Value(b[p * 4 + j]);
      // One rounding of an f32 sum: within one bf16 step of the exact sum.
      EXPECT_NEAR(bf16Value(got), expected, std::abs(expected) / 128 + 1e-6)
          << "row " << i << " column " << j;
    }
}

/// Under kGemmBiasGradient the bias vector is written (not added to) with
/// the sums of b's columns over k, b read through its strides (here the
/// transpose of a [6 x 5] matrix), and c is the plain product.
TEST(Gemm, BiasGradientSumsColumnsOfB) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal;
  std::vector<float> a(3 * 6), b(6 * 5), c(3 * 5), sums(5, 1e6f);
  for (auto *v : {&a, &b})
    for (float &x : *v)
      x = normal(rng);
  // b [k = 6, n = 5] is the transpose of a row-major [5 x 6] matrix.
  Descriptor<2> da{a.data(), a.data(), 0, {3, 6}, {6, 1}};
  Descriptor<2> db{b.data(), b.data(), 0, {6, 5}, {1, 6}};
  Descriptor<2> dc{c.data(), c.data(), 0, {3, 5}, {5, 1}};
  Descriptor<1> dsums{sums.data(), sums.data(), 0, {5}, {1}};
  Unranked ua{2, &da}, ub{2, &db}, uc{2, &dc}, usums{1, &dsums};
  weft_gemm_f32(2, ua.descriptor, 2, ub.descriptor, 2, uc.descriptor, 1,
                usums.descriptor, 2, uc.descriptor, kGemmBiasGradient);
  for (int64_t j = 0; j < 5; ++j) {
    double expected = 0;
    for (int64_t p = 0; p < 6; ++p)
      expected += b[p + j * 6];
    EXPECT_NEAR(sums[j], expected, 1e-5) << "column " << j;
    for (int64_t i = 0; i < 3; ++i) {
      double product = 0;
      for (int64_t p = 0; p < 6; ++p)
        product += double(a[i * 6 + p]) * b[p + j * 6];
      EXPECT_NEAR(c[i * 5 + j], product, 1e-5) << "c " << i << ", " << j;
    }
  }
}

/// A bf16 c's bias gradient: each column of b summed in f32 and rounded
/// once to bf16, the vector's type (c's).
TEST(Gemm, Bf16BiasGradientRoundedOnce) {
  std::mt19937 rng(19);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> a(3 * 40), b(40 * 16), c(3 * 16), sums(16, 0x7fc0);
  for (auto *v : {&a, &b})
    for (uint16_t &x : *v)
      x = truncateToBf16(normal(rng));
  auto bits = [](std::vector<uint16_t> &v) {
    return reinterpret_cast<float *>(v.data());
  };
  Descriptor<2> da{bits(a), bits(a), 0, {3, 40}, {40, 1}};
  Descriptor<2> db{bits(b), bits(b), 0, {40, 16}, {16, 1}};
  Descriptor<2> dc{bits(c), bits(c), 0, {3, 16}, {16, 1}};
  Descriptor<1> dsums{bits(sums), bits(sums), 0, {16}, {1}};
  Unranked ua{2, &da}, ub{2, &db}, uc{2, &dc}, usums{1, &dsums};
  weft_gemm_bf16_bf16(2, ua.descriptor, 2, ub.descriptor, 2, uc.descriptor, 1,
                      usums.descriptor, 2, uc.descriptor, kGemmBiasGradient);
  for (int64_t j = 0; j < 16; ++j) {
    double expected = 0;
    for (int64_t p = 0; p < 40; ++p)
      expected += bf16Value(b[p * 16 + j]);
    // Rounded once to nearest: within half a bf16 step (8 significant
    // bits) of the exact sum, and the f32 sum's error.
    int exponent;
    std::frexp(expected, &exponent);
    EXPECT_NEAR(bf16Value(sums[j]), expected,
                std::ldexp(1.0, exponent - 9) + 1e-5)
        << "column " << j;
  }
}

/// GELU's tanh form, written here apart from the runtime's.
double referenceGelu(double x) {
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

/// Within one rounding to bf16 (8 significant bits) of `exact`, plus the
/// f32 sum's error.
double bf16Tolerance(double exact) { return std::abs(exact) / 128 + 1e-5; }

/// kGemmGelu: aux gets the bf16 sum a * b + bias, c its GELU (tanh form),
/// both from the f32 sum; kGemmGeluGradient then multiplies a product by
/// GELU's derivative at aux.
TEST(Gemm, Bf16GeluEpilogues) {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> a(3 * 24), b(24 * 16), bias(16), c(3 * 16),
      aux(3 * 16, 0x7fc0), gradient(3 * 16);
  for (auto *v : {&a, &b, &bias})
    for (uint16_t &x : *v)
      x = truncateToBf16(normal(rng) * 0.5f);
  auto bits = [](std::vector<uint16_t> &v) {
    return reinterpret_cast<float *>(v.data());
  };
  Descriptor<2> da{bits(a), bits(a), 0, {3, 24}, {24, 1}};
  Descriptor<2> db{bits(b), bits(b), 0, {24, 16}, {16, 1}};
  Descriptor<2> dc{bits(c), bits(c), 0, {3, 16}, {16, 1}};
  Descriptor<2> daux{bits(aux), bits(aux), 0, {3, 16}, {16, 1}};
  Descriptor<2> dgrad{bits(gradient), bits(gradient), 0, {3, 16}, {16, 1}};
  Descriptor<1> dbias{bits(bias), bits(bias), 0, {16}, {1}};
  Unranked ua{2, &da}, ub{2, &db}, uc{2, &dc}, uaux{2, &daux}, ugrad{2, &dgrad},
      ubias{1, &dbias};
  weft_gemm_bf16_bf16(2, ua.descriptor, 2, ub.descriptor, 2, uc.descriptor, 1,
                      ubias.descriptor, 2, uaux.descriptor,
                      kGemmBias | kGemmGelu);
  // The same product, times GELU's derivative at the stored aux.
  weft_gemm_bf16_bf16(2, ua.descriptor, 2, ub.descriptor, 2, ugrad.descriptor,
                      2, ugrad.descriptor, 2, uaux.descriptor,
                      kGemmGeluGradient);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 16; ++j) {
      double product = 0;
      for (int64_t p = 0; p < 24; ++p)
        product += bf16Value(a[i * 24 + p]) * bf16Value(b[p * 16 + j]);
      double sum = product + bf16Value(bias[j]);
      EXPECT_NEAR(bf16Value(aux[i * 16 + j]), sum, bf16Tolerance(sum))
          << "aux " << i << ", " << j;
      double gelu = referenceGelu(sum);
      EXPECT_NEAR(bf16Value(c[i * 16 + j]), gelu, bf16Tolerance(gelu) + 1e-5)
          << "c " << i << ", " << j;
      double x = bf16Value(aux[i * 16 + j]), h = 1e-4;
      double derivative =
          (referenceGelu(x + h) - referenceGelu(x - h)) / (2 * h);
      double expected = product * derivative;
      EXPECT_NEAR(bf16Value(gradient[i * 16 + j]), expected,
                  bf16Tolerance(expected) + 1e-5)
          << "gradient " << i << ", " << j;
    }
}

/// The GELU epilogues are for a bf16 c: an f32 GEMM asked for one ends the
/// run with one line.
TEST(GemmDeathTest, GeluEpilogueNeedsABf16Result) {
  std::vector<float> m(8 * 8, 1.0f);
  Descriptor<2> d{m.data(), m.data(), 0, {8, 8}, {8, 1}};
  Unranked u{2, &d};
  EXPECT_EXIT(weft_gemm_f32(2, u.descriptor, 2, u.descriptor, 2, u.descriptor,
                            2, u.descriptor, 2, u.descriptor, kGemmGelu),
              ::testing::ExitedWithCode(1),
              "error: a GEMM's GELU epilogue needs a bf16 c");
}

/// The emulation refuses what cuBLASLt may not be given: a GELU epilogue
/// whose aux matrix shares bytes with c, named in one line.
TEST(GemmDeathTest, EmulatedGeluAuxMayNotOverlapC) {
  std::vector<uint16_t> a(8 * 8), b(8 * 16), m(8 * 16 + 8);
  auto bits = [](std::vector<uint16_t> &v) {
    return reinterpret_cast<float *>(v.data());
  };
  Descriptor<2> da{bits(a), bits(a), 0, {8, 8}, {8, 1}};
  Descriptor<2> db{bits(b), bits(b), 0, {8, 16}, {16, 1}};
  // c's last row and aux's first share bytes.
  Descriptor<2> dc{bits(m), bits(m), 0, {8, 16}, {16, 1}};
  Descriptor<2> daux{bits(m), bits(m), 8, {8, 16}, {16, 1}};
  Unranked ua{2, &da}, ub{2, &db}, uc{2, &dc}, uaux{2, &daux};
  EXPECT_EXIT(weft_emulated_gemm_bf16_bf16(
                  2, ua.descriptor, 2, ub.descriptor, 2, uc.descriptor, 2,
                  uc.descriptor, 2, uaux.descriptor, kGemmGeluGradient),
              ::testing::ExitedWithCode(1),
              "error: emulated CUDA GEMM \\(cuBLASLt\\) GELU epilogue's aux "
              "matrix shares bytes with c");
}

// The unit tests link the CPU and emulation backends (unittests/
// CMakeLists.txt), not the CUDA one.
TEST(Backends, DevicesComeFromTheLinkedBackends) {
  std::string error;
  std::unique_ptr<Device> cpu = createDevice(kCpuDevice, error);
  ASSERT_TRUE(cpu) << error;
  EXPECT_STREQ(cpu->name(), kCpuDevice);
  std::unique_ptr<Device> emulated = createDevice(kEmulatedCudaDevice, error);
  ASSERT_TRUE(emulated) << error;
  EXPECT_STREQ(emulated->name(), kEmulatedCudaDevice);
  ASSERT_TRUE(findBackend(kEmulatedCudaDevice));
  EXPECT_TRUE(findBackend(kEmulatedCudaDevice)->prepareProcess);
  EXPECT_FALSE(createDevice(kCudaDevice, error));
  EXPECT_EQ(error, "this executable has no runtime backend for the device "
                   "'cuda' (libweft_runtime_cuda.a is not linked)");
  EXPECT_FALSE(createDevice("tpu", error));
  EXPECT_EQ(error, "this executable has no runtime backend for the device "
                   "'tpu'");
}

TEST(Collectives, OneRankIsTheIdentity) {
  std::unique_ptr<Communicator> comm = createSingleRankCommunicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  float data[3] = {1, 2, 3};
  comm->allReduce(data, 3, WEFT_F32, ReduceOp::Sum);
  EXPECT_EQ(data[2], 3.0f);
  float gathered[3] = {};
  comm->allGather(data, gathered, 3, WEFT_F32);
  EXPECT_EQ(0, memcmp(data, gathered, sizeof(data)));
  float scattered[3] = {};
  comm->reduceScatter(data, scattered, 3, WEFT_F32, ReduceOp::Max);
  EXPECT_EQ(scattered[1], 2.0f);
  EXPECT_EXIT(comm->send(data, 3, WEFT_F32, 1, 0), ::testing::ExitedWithCode(1),
              "send to rank 1 in a one-rank program");
}

TEST(Allocator, ReusesFreedBlocksOfTheSameSize) {
  void *first = _mlir_memref_to_llvm_alloc(1000);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  _mlir_memref_to_llvm_free(first);
  void *second = _mlir_memref_to_llvm_alloc(1000);
  EXPECT_EQ(first, second);
  void *other = _mlir_memref_to_llvm_alloc(5000);
  EXPECT_NE(other, second);
  _mlir_memref_to_llvm_free(second);
  _mlir_memref_to_llvm_free(other);
}

} // namespace

namespace {

// A one-parameter "training step" for the model API: w_next = w + x,
// sum = the sum of w_next. Buffers in manifest order: x, w, w_next, sum.
void addStep(void **buffers) {
  auto *x = static_cast<const float *>(buffers[0]);
  auto *w = static_cast<const float *>(buffers[1]);
  auto *next = static_cast<float *>(buffers[2]);
  auto *sum = static_cast<float *>(buffers[3]);
  *sum = 0;
  for (int i = 0; i < 4; ++i)
    *sum += next[i] = w[i] + x[i];
}

std::string addStepManifest(const char *device) {
  Manifest manifest;
  manifest.device = device;
  manifest.buffers.push_back({WEFT_INPUT, "x", WEFT_F32, {4}, "-", 0, 0});
  manifest.buffers.push_back({WEFT_PARAM, "w", WEFT_F32, {4}, "-", 0, 0});
  manifest.buffers.push_back(
      {WEFT_OUTPUT, "param:w", WEFT_F32, {4}, "-", 0, 0});
  manifest.buffers.push_back({WEFT_OUTPUT, "sum", WEFT_F32, {}, "", 0, 0});
  return manifest.toJson();
}

} // namespace

// weft_model_feed_back: the update takes the parameter's place when the
// next run starts or at a download, on the host and on a device of its own
// alike; only the input goes to the device each run and only the sum comes
// back; a host write after a run must wait for the download.
TEST(Model, FedBackUpdatesStayOnTheDevice) {
  for (const char *device : {kCpuDevice, kEmulatedCudaDevice}) {
    SCOPED_TRACE(device);
    std::string manifest = addStepManifest(device);
    char error[256] = "";
    weft_model *model =
        weft_model_open(manifest.c_str(), nullptr, error, sizeof(error));
    ASSERT_TRUE(model) << error;
    float x[4] = {1, 1, 1, 1}, w[4] = {0, 1, 2, 3};
    weft_model_set_input(model, 0, x);
    weft_model_bind(model, 1, w);
    EXPECT_EQ(weft_model_feed_back(model, 3, 1, error, sizeof(error)), -1);
    EXPECT_EQ(weft_model_feed_back(model, 2, 1, error, sizeof(error)), 0)
        << error;
    EXPECT_EQ(weft_model_feed_back(model, 2, 1, error, sizeof(error)), -1);
    EXPECT_STREQ(error, "output 'param:w' cannot be fed back to 'w': it is "
                        "fed back already");
    weft_device_stats before{}, after{};
    for (int step = 1; step <= 3; ++step) {
      weft_model_device_stats(model, &before);
      ASSERT_GE(weft_model_run(model, addStep, error, sizeof(error)), 0);
      weft_model_device_stats(model, &after);
      // w after `step` steps is w0 + step: the sum 6 + 4 * step.
      EXPECT_EQ(*static_cast<float *>(weft_model_output(model, 3)),
                6 + 4 * step);
      bool onDevice = std::string(device) != kCpuDevice;
      EXPECT_EQ(after.host_to_device_bytes - before.host_to_device_bytes,
                onDevice ? (step == 1 ? 32u : 16u) : 0u);
      EXPECT_EQ(after.device_to_host_bytes - before.device_to_host_bytes,
                onDevice ? 4u : 0u);
    }
    // The last update is not in place until the download.
    EXPECT_EQ(weft_model_host_changed(model, 1), -1);
    weft_model_download(model);
    EXPECT_EQ(w[3], 6.0f);
    // A host write goes to the device before the next run.
    w[0] = 100;
    EXPECT_EQ(weft_model_host_changed(model, 1), 0);
    ASSERT_GE(weft_model_run(model, addStep, error, sizeof(error)), 0);
    EXPECT_EQ(*static_cast<float *>(weft_model_output(model, 3)),
              100 + 1 + (4 + 5 + 6) + 3);
    weft_model_close(model);
  }
}
