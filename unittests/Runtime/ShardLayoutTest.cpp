//===- ShardLayoutTest.cpp - Shards of a global tensor --------------------===//

#include "weft/ShardLayout.h"

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

} // namespace
