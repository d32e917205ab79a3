//===- ShardingConsistencyTest.cpp - Compiler and runtime agree on shards -===//
//
// weftc sizes each rank's buffers with TensorSharding::localShape and writes
// the sharding into the manifest as a runtime spec; the runtime sizes and
// slices the same buffers with ShardSpec::localShape. The two are written
// separately (the runtime does not link MLIR), so this test holds them to
// the same answer, uneven and interleaved splits included.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/Transforms/Sharding.h"
#include "weft/runtime/ShardLayout.h"

#include <gtest/gtest.h>

namespace {

struct Case {
  std::vector<int64_t> meshSizes;
  std::vector<int64_t> shape;
  // Per dim: the mesh axes that split it and its interleaved blocks.
  std::vector<std::pair<std::vector<int64_t>, int64_t>> dims;
};

TEST(ShardingConsistency, CompilerAndRuntimeLocalShapesAgree) {
  std::vector<Case> cases = {
      {{2, 2}, {8, 6}, {{{0}, 1}, {{1}, 1}}},
      {{4}, {10, 3}, {{{0}, 1}, {{}, 1}}},         // uneven: 10 over 4
      {{2}, {64, 192}, {{{}, 1}, {{0}, 3}}},       // fused QKV, 3 blocks
      {{2, 3}, {12, 7}, {{{0, 1}, 1}, {{}, 1}}},   // two axes on one dim
      {{3}, {5}, {{{0}, 1}}},                      // uneven: 5 over 3
      {{2, 2}, {4, 30, 9}, {{{1}, 1}, {{}, 1}, {{0}, 1}}},
      {{2}, {}, {}},                               // a scalar
  };
  for (const Case &c : cases) {
    weft::Mesh mesh;
    weft::runtime::MeshShape runtimeMesh;
    for (size_t a = 0; a < c.meshSizes.size(); ++a) {
      mesh.names.push_back("a" + std::to_string(a));
      mesh.sizes.push_back(c.meshSizes[a]);
      runtimeMesh.names.push_back(mesh.names.back());
      runtimeMesh.sizes.push_back(c.meshSizes[a]);
    }
    weft::TensorSharding sharding =
        weft::TensorSharding::replicated(c.shape.size());
    for (size_t d = 0; d < c.dims.size(); ++d) {
      for (int64_t axis : c.dims[d].first)
        sharding.dims[d].axes.push_back(axis);
      sharding.dims[d].blocks = c.dims[d].second;
    }
    weft::runtime::ShardSpec spec;
    ASSERT_TRUE(weft::runtime::ShardSpec::parse(sharding.runtimeSpec(mesh),
                                                c.shape.size(), spec))
        << sharding.runtimeSpec(mesh);
    llvm::SmallVector<int64_t> compiler = sharding.localShape(c.shape, mesh);
    std::vector<int64_t> runtime = spec.localShape(c.shape, runtimeMesh);
    EXPECT_EQ(std::vector<int64_t>(compiler.begin(), compiler.end()), runtime)
        << "spec " << sharding.runtimeSpec(mesh);
  }
}

TEST(ShardingConsistency, TheRingsSequenceIsWrittenInHeadTailPairs) {
  weft::Mesh mesh;
  mesh.names = {"dp", "cp"};
  mesh.sizes = {2, 4};
  mesh.contextAxis = 1;
  weft::TensorSharding sharding = weft::TensorSharding::replicated(3);
  sharding.dims[0].axes = {0};
  sharding.dims[1].axes = {1};
  EXPECT_EQ(sharding.runtimeSpec(mesh), "0,1,-");
  mesh.contextRing = mesh.contextZigzag = true;
  EXPECT_EQ(sharding.runtimeSpec(mesh), "0,1z,-");
  weft::runtime::ShardSpec spec;
  ASSERT_TRUE(
      weft::runtime::ShardSpec::parse(sharding.runtimeSpec(mesh), 3, spec));
  weft::runtime::MeshShape runtimeMesh{{"dp", "cp"}, {2, 4}};
  EXPECT_EQ(spec.localShape({4, 64, 8}, runtimeMesh),
            (std::vector<int64_t>{2, 16, 8}));
}

} // namespace
