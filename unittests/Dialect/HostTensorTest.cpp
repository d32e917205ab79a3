//===- HostTensorTest.cpp - Compile-time tensor arithmetic ----------------===//

#include "weft/Dialect/Weft/IR/HostTensor.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/IR/MLIRContext.h"
#include "gtest/gtest.h"

using namespace mlir;
using namespace weft;

namespace {

TEST(BroadcastShapes, NumpyRules) {
  auto shape = broadcastShapes({2, 1, 4}, {3, 1});
  ASSERT_TRUE(succeeded(shape));
  EXPECT_EQ(*shape, (SmallVector<int64_t>{2, 3, 4}));
  EXPECT_TRUE(failed(broadcastShapes({2, 3}, {4})));
  auto dynamic = broadcastShapes({ShapedType::kDynamic, 4}, {5, 1});
  ASSERT_TRUE(succeeded(dynamic));
  EXPECT_EQ(*dynamic, (SmallVector<int64_t>{5, 4}));
}

TEST(HostTensor, StridesAreRowMajor) {
  EXPECT_EQ(stridesOf({2, 3, 4}), (SmallVector<int64_t>{12, 4, 1}));
  EXPECT_EQ(stridesOf({}), (SmallVector<int64_t>{}));
}

TEST(HostTensor, RoundTripsThroughAttributes) {
  MLIRContext ctx;
  HostTensor t = HostTensor::zeros({2, 2}, IntegerType::get(&ctx, 64));
  t.ints = {1, -2, 3, INT64_MAX};
  std::optional<HostTensor> back = HostTensor::fromAttr(t.toAttr());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->ints, t.ints);
  EXPECT_EQ(back->shape, t.shape);
}

TEST(HostTensor, BroadcastMapAddsRowToMatrix) {
  MLIRContext ctx;
  Type f32 = Float32Type::get(&ctx);
  HostTensor m = HostTensor::zeros({2, 3}, f32);
  m.floats = {0, 1, 2, 3, 4, 5};
  HostTensor row = HostTensor::zeros({3}, f32);
  row.floats = {10, 20, 30};
  HostTensor sum = mapBroadcast(
      {&m, &row}, {2, 3}, f32, [](ArrayRef<double> x) { return x[0] + x[1]; },
      [](ArrayRef<int64_t> x) { return x[0] + x[1]; });
  EXPECT_EQ(sum.floats, (std::vector<double>{10, 21, 32, 13, 24, 35}));
}

TEST(HostTensor, CastFloatToIntTruncatesAndToBoolTestsNonZero) {
  MLIRContext ctx;
  HostTensor f = HostTensor::zeros({4}, Float32Type::get(&ctx));
  f.floats = {-1.7, 0.0, 0.4, 2.9};
  EXPECT_EQ(castTo(f, IntegerType::get(&ctx, 64)).ints,
            (std::vector<int64_t>{-1, 0, 0, 2}));
  EXPECT_EQ(castTo(f, IntegerType::get(&ctx, 1)).ints,
            (std::vector<int64_t>{1, 0, 1, 1}));
}

TEST(HostTensor, ToAttrRoundsToElementType) {
  MLIRContext ctx;
  HostTensor t = HostTensor::zeros({1}, Float16Type::get(&ctx));
  t.floats = {0.1};
  std::optional<HostTensor> back = HostTensor::fromAttr(t.toAttr());
  ASSERT_TRUE(back.has_value());
  // 0.1 is not representable in f16: the nearest half is 0.0999755859375.
  EXPECT_DOUBLE_EQ(back->floats[0], 0.0999755859375);
}

} // namespace
