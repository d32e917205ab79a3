//===- ShardLayoutTest.cpp - Shards of a global tensor --------------------===//

#include "weft/runtime/ShardLayout.h"

#include <gtest/gtest.h>

#include <numeric>

using namespace weft::runtime;

namespace {

MeshShape mesh(std::vector<int64_t> sizes) {
  MeshShape shape;
  for (size_t i = 0; i < sizes.size(); ++i)
    shape.names.push_back("a" + std::to_string(i));
  shape.sizes = std::move(sizes);
  return shape;
}

std::vector<float> iota(size_t n) {
  std::vector<float> values(n);
  std::iota(values.begin(), values.end(), 0.0f);
  return values;
}

/// The one parser of mesh text (the compiler's weft::Mesh::parse calls
/// it): describe()'s form round-trips, spaces around items are allowed, and
/// each malformed form is refused with why.
TEST(ShardLayout, ParsesMeshText) {
  MeshShape shape;
  std::string error;
  ASSERT_TRUE(MeshShape::parse("dp=2, tp = 4", shape, &error)) << error;
  EXPECT_EQ(shape.describe(), "dp=2,tp=4");
  ASSERT_TRUE(MeshShape::parse(shape.describe(), shape));
  EXPECT_EQ(shape.numRanks(), 8);
  EXPECT_TRUE(MeshShape::parse("", shape)); // no mesh
  EXPECT_TRUE(shape.names.empty());
  for (auto [text, why] :
       std::initializer_list<std::pair<const char *, const char *>>{
           {"dp=0", "bad mesh axis 'dp=0' (expected NAME=SIZE with SIZE >= 1)"},
           {"dp", "bad mesh axis 'dp' (expected NAME=SIZE with SIZE >= 1)"},
           {"=2", "bad mesh axis '=2' (expected NAME=SIZE with SIZE >= 1)"},
           {"dp=2x",
            "bad mesh axis 'dp=2x' (expected NAME=SIZE with SIZE >= 1)"},
           {"dp=2,,tp=2",
            "bad mesh axis '' (expected NAME=SIZE with SIZE >= 1)"},
           {"dp=2,", "bad mesh axis '' (expected NAME=SIZE with SIZE >= 1)"},
           {"dp=2,dp=2", "mesh axis 'dp' appears twice"}}) {
    error.clear();
    EXPECT_FALSE(MeshShape::parse(text, shape, &error)) << text;
    EXPECT_EQ(error, why) << text;
  }
}

TEST(ShardLayout, ParsesAndPrintsSpecs) {
  ShardSpec spec;
  ASSERT_TRUE(ShardSpec::parse("-,1x3", 2, spec));
  EXPECT_EQ(spec.str(), "-,1x3");
  EXPECT_EQ(spec.dims[1].axes, std::vector<int>{1});
  EXPECT_EQ(spec.dims[1].blocks, 3);
  ASSERT_TRUE(ShardSpec::parse("0.1,-", 2, spec));
  EXPECT_EQ(spec.dims[0].axes, (std::vector<int>{0, 1}));
  EXPECT_FALSE(ShardSpec::parse("-", 2, spec));   // rank mismatch
  EXPECT_FALSE(ShardSpec::parse("x,-", 2, spec)); // not an axis
  EXPECT_TRUE(ShardSpec::parse("", 0, spec));     // a scalar
}

TEST(ShardLayout, RowMajorCoordinatesAndShardIndex) {
  MeshShape m = mesh({2, 3});
  EXPECT_EQ(m.coordinates(4), (std::vector<int64_t>{1, 1}));
  ShardSpec spec;
  ASSERT_TRUE(ShardSpec::parse("1,-", 2, spec));
  // Ranks that differ only on axis 0 hold the same shard.
  EXPECT_EQ(spec.shardIndex(m.coordinates(1), m), 1);
  EXPECT_EQ(spec.shardIndex(m.coordinates(4), m), 1);
  EXPECT_EQ(spec.numShards(m), 3);
}

TEST(ShardLayout, InterleavedBlocksGiveEachRankItsSliceOfEveryPart) {
  // A fused [2, 6] projection: three parts of 2 columns, split over 2 ranks.
  MeshShape m = mesh({2});
  ShardSpec spec;
  ASSERT_TRUE(ShardSpec::parse("-,0x3", 2, spec));
  std::vector<float> global = iota(12);
  std::vector<float> local(6);
  spec.extract(global.data(), local.data(), {2, 6}, sizeof(float), 1, m);
  // Rank 1 holds column 1 of each part: columns 1, 3, 5.
  EXPECT_EQ(local, (std::vector<float>{1, 3, 5, 7, 9, 11}));
}

TEST(ShardLayout, ZigzagPairsAHeadChunkWithATailChunk) {
  // A sequence of 8 over 2 ranks in chunks of 2: rank 0 holds chunks 0 and 3,
  // rank 1 chunks 1 and 2.
  MeshShape m = mesh({2});
  ShardSpec spec;
  ASSERT_TRUE(ShardSpec::parse("-,0z", 2, spec));
  EXPECT_EQ(spec.str(), "-,0z");
  EXPECT_TRUE(spec.dims[1].zigzag);
  EXPECT_FALSE(ShardSpec::parse("0.1z", 1, spec)); // one axis only
  EXPECT_FALSE(ShardSpec::parse("0x3z", 1, spec)); // not with blocks
  ASSERT_TRUE(ShardSpec::parse("-,0z", 2, spec));
  EXPECT_EQ(spec.localShape({2, 8}, m), (std::vector<int64_t>{2, 4}));
  std::vector<float> global = iota(16);
  std::vector<float> shard0(8), shard1(8);
  spec.extract(global.data(), shard0.data(), {2, 8}, sizeof(float), 0, m);
  spec.extract(global.data(), shard1.data(), {2, 8}, sizeof(float), 1, m);
  EXPECT_EQ(shard0, (std::vector<float>{0, 1, 6, 7, 8, 9, 14, 15}));
  EXPECT_EQ(shard1, (std::vector<float>{2, 3, 4, 5, 10, 11, 12, 13}));
  std::vector<float> assembled(16, -1.0f);
  spec.insert(shard0.data(), assembled.data(), {2, 8}, sizeof(float), 0, m);
  spec.insert(shard1.data(), assembled.data(), {2, 8}, sizeof(float), 1, m);
  EXPECT_EQ(assembled, global);
  // Four ranks: rank 1 holds chunks 1 and 6 of 8.
  MeshShape m4 = mesh({4});
  ASSERT_TRUE(ShardSpec::parse("0z", 1, spec));
  std::vector<float> rank1(4);
  spec.extract(global.data(), rank1.data(), {16}, sizeof(float), 1, m4);
  EXPECT_EQ(rank1, (std::vector<float>{2, 3, 12, 13}));
}

TEST(ShardLayout, UnevenSplitsArePaddedAndInsertedBack) {
  // 5 rows over 2 ranks: 3 each, the last row of rank 1 is padding.
  MeshShape m = mesh({2});
  ShardSpec spec;
  ASSERT_TRUE(ShardSpec::parse("0,-", 2, spec));
  EXPECT_EQ(spec.localShape({5, 2}, m), (std::vector<int64_t>{3, 2}));
  std::vector<float> global = iota(10);
  std::vector<float> shard1(6, -1.0f);
  spec.extract(global.data(), shard1.data(), {5, 2}, sizeof(float), 1, m);
  EXPECT_EQ(shard1, (std::vector<float>{6, 7, 8, 9, 0, 0}));
  std::vector<float> assembled(10, -1.0f), shard0(6);
  spec.extract(global.data(), shard0.data(), {5, 2}, sizeof(float), 0, m);
  spec.insert(shard0.data(), assembled.data(), {5, 2}, sizeof(float), 0, m);
  spec.insert(shard1.data(), assembled.data(), {5, 2}, sizeof(float), 1, m);
  EXPECT_EQ(assembled, global);
}

TEST(ShardLayout, AShardCanBeAllPadding) {
  // 1 row over 4 ranks: ranks 1-3 hold only padding.
  MeshShape m = mesh({4});
  ShardSpec spec;
  ASSERT_TRUE(ShardSpec::parse("0", 1, spec));
  std::vector<float> global{42}, local{-1};
  spec.extract(global.data(), local.data(), {1}, sizeof(float), 3, m);
  EXPECT_EQ(local[0], 0);
  spec.extract(global.data(), local.data(), {1}, sizeof(float), 0, m);
  EXPECT_EQ(local[0], 42);
}

/// Element-by-element copy of a box, the definition copyStrided must meet.
void copyOneByOne(const float *source, const std::vector<int64_t> &from,
                  float *dest, const std::vector<int64_t> &to,
                  const std::vector<int64_t> &sizes) {
  int64_t count = 1;
  for (int64_t size : sizes)
    count *= size;
  for (int64_t linear = 0; linear < count; ++linear) {
    int64_t rest = linear, sourceAt = 0, destAt = 0;
    for (size_t d = sizes.size(); d-- > 0;) {
      int64_t i = rest % sizes[d];
      rest /= sizes[d];
      sourceAt += i * from[d];
      destAt += i * to[d];
    }
    dest[destAt] = source[sourceAt];
  }
}

struct StridedCase {
  std::vector<int64_t> sizes, from, to;
  size_t sourceSize, destSize;
};

TEST(ShardLayout, StridedCopiesMatchTheElementwiseDefinition) {
  const std::vector<StridedCase> cases = {
      // Dense row-major: folds into one memcpy.
      {{4, 1, 3, 5}, {15, 15, 5, 1}, {15, 15, 5, 1}, 60, 60},
      // The blocks a reduce-scatter sends: [parts, outer, n, inner] out of
      // [outer, parts * n, inner], with unit dims.
      {{4, 1, 6, 1}, {6, 24, 1, 1}, {6, 6, 1, 1}, 24, 24},
      {{2, 3, 4, 5}, {20, 40, 5, 1}, {60, 20, 5, 1}, 120, 120},
      // A transpose: no dim folds, the inner loop is strided.
      {{7, 9}, {1, 7}, {9, 1}, 63, 63},
      // A box inside a larger array on both sides.
      {{3, 4}, {10, 1}, {8, 2}, 30, 32},
  };
  for (const StridedCase &c : cases) {
    std::vector<float> source = iota(c.sourceSize);
    std::vector<float> expected(c.destSize, -1.0f), actual(c.destSize, -1.0f);
    copyOneByOne(source.data(), c.from, expected.data(), c.to, c.sizes);
    copyStrided(reinterpret_cast<const char *>(source.data()), c.from.data(),
                reinterpret_cast<char *>(actual.data()), c.to.data(),
                c.sizes.data(), int(c.sizes.size()), sizeof(float));
    EXPECT_EQ(actual, expected);
  }
  // A scalar, and an empty box that writes nothing.
  float one = 3.0f, into = 0.0f;
  copyStrided(reinterpret_cast<const char *>(&one), nullptr,
              reinterpret_cast<char *>(&into), nullptr, nullptr, 0,
              sizeof(float));
  EXPECT_EQ(into, 3.0f);
  int64_t empty[2] = {2, 0}, strides[2] = {1, 1};
  copyStrided(reinterpret_cast<const char *>(&one), strides,
              reinterpret_cast<char *>(&into), strides, empty, 2,
              sizeof(float));
  EXPECT_EQ(into, 3.0f);
}

} // namespace
