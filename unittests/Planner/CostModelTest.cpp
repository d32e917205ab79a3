//===- CostModelTest.cpp - The planner's formulas -------------------------===//

#include "weft/Planner/CostModel.h"
#include "weft/Dialect/Weft/Transforms/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace weft;
using namespace weft::planner;

namespace {

const Link kLink{100e9, 5e-6}; // 100 GB/s, 5 us

TEST(CollectiveTime, RingAllReduceSendsTwiceWhatEachRankDoesNotHold) {
  // 2 (n-1) alpha + 2 (n-1)/n S / beta, n = 8, S = 1 GB.
  EXPECT_NEAR(
      collectiveTime(Collective::AllReduce, Algorithm::Ring, 1e9, 8, kLink),
      14 * 5e-6 + 2 * 7.0 / 8 * 1e9 / 100e9, 1e-12);
}

TEST(CollectiveTime, GatherScatterAndAllToAllMoveOnce) {
  double expected = 3 * 5e-6 + 3.0 / 4 * 4e8 / 100e9;
  for (Collective kind :
       {Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll})
    EXPECT_NEAR(collectiveTime(kind, Algorithm::Ring, 4e8, 4, kLink), expected,
                1e-12);
}

TEST(CollectiveTime, TreeAllReducePaysLogarithmicLatency) {
  // 2 ceil(log2 n) alpha + 2 S / beta: cheaper than the ring for small
  // messages on many ranks, dearer for large ones.
  EXPECT_NEAR(
      collectiveTime(Collective::AllReduce, Algorithm::Tree, 1e6, 1024, kLink),
      2 * 10 * 5e-6 + 2 * 1e6 / 100e9, 1e-12);
  EXPECT_LT(
      collectiveTime(Collective::AllReduce, Algorithm::Tree, 1e3, 1024, kLink),
      collectiveTime(Collective::AllReduce, Algorithm::Ring, 1e3, 1024, kLink));
  EXPECT_GT(
      collectiveTime(Collective::AllReduce, Algorithm::Tree, 1e9, 8, kLink),
      collectiveTime(Collective::AllReduce, Algorithm::Ring, 1e9, 8, kLink));
}

TEST(CollectiveTime, SendAndOneRank) {
  EXPECT_NEAR(
      collectiveTime(Collective::SendRecv, Algorithm::Ring, 1e8, 2, kLink),
      5e-6 + 1e8 / 100e9, 1e-12);
  EXPECT_EQ(
      collectiveTime(Collective::AllReduce, Algorithm::Ring, 1e9, 1, kLink), 0);
}

TEST(CollectiveTime, HierarchicalAllReduceCrossesNodesWithOnePiece) {
  Link nvlink{300e9, 3e-6}, infiniband{25e9, 5e-6};
  double bytes = 1e9;
  double intra = 7 * 3e-6 + 7.0 / 8 * bytes / 300e9;
  double inter = 2 * 3 * 5e-6 + 2 * 3.0 / 4 * (bytes / 8) / 25e9;
  EXPECT_NEAR(hierarchicalAllReduceTime(bytes, 8, 4, nvlink, infiniband),
              2 * intra + inter, 1e-12);
  // Far cheaper than a flat ring whose every hop pays the slow link.
  EXPECT_LT(hierarchicalAllReduceTime(bytes, 8, 4, nvlink, infiniband),
            collectiveTime(Collective::AllReduce, Algorithm::Ring, bytes, 32,
                           infiniband) /
                4);
}

/// The closed forms agree with the schedules themselves: their simulated
/// timeline's idle fraction (F = 1, B = 2) and peak in flight on rank 0.
TEST(GradientSync, EachAlgorithmOnTheLinksItCrosses) {
  using runtime::GradSync;
  Cluster roce;
  roce.gpusPerNode = 8;
  roce.intraNode = {450e9, 3e-6};
  roce.interFabric = "roce";
  roce.nicsPerNode = 4;
  roce.nicBandwidth = 50e9;
  roce.interLatency = 8e-6;
  roce.oversubscription = 2;
  double bytes = 1e9;
  Link inter = roce.interNode(); // 4 * 50 / 8 / 2 = 12.5 GB/s
  EXPECT_DOUBLE_EQ(inter.bandwidth, 12.5e9);
  // One ring over 32 ranks on 4 nodes, paced by its hops between nodes.
  EXPECT_DOUBLE_EQ(
      gradientSyncTime(roce, GradSync::Ring, bytes, 8, 4),
      collectiveTime(Collective::AllReduce, Algorithm::Ring, bytes, 32, inter));
  EXPECT_DOUBLE_EQ(
      gradientSyncTime(roce, GradSync::Tree, bytes, 8, 4),
      collectiveTime(Collective::AllReduce, Algorithm::Tree, bytes, 32, inter));
  EXPECT_DOUBLE_EQ(
      gradientSyncTime(roce, GradSync::Hierarchical, bytes, 8, 4),
      hierarchicalAllReduceTime(bytes, 8, 4, roce.intraNode, inter));
  EXPECT_DOUBLE_EQ(
      gradientSyncTime(roce, GradSync::Library, bytes, 8, 4),
      groupCollectiveTime(roce, Collective::AllReduce, bytes, 8, 4));
  // Parameter servers: 24/32 of the buffer leaves the node each way, 31
  // messages each way.
  EXPECT_NEAR(gradientSyncTime(roce, GradSync::ParameterServer, bytes, 8, 4),
              2 * (31 * 8e-6 + 24.0 / 32 * bytes / 12.5e9), 1e-12);
  // A DDC is non-blocking: the same NICs without the oversubscription.
  Cluster ddc = roce;
  ddc.interFabric = "ddc";
  EXPECT_DOUBLE_EQ(ddc.interNode().bandwidth, 25e9);
  EXPECT_DOUBLE_EQ(ddc.interNodeAllToAll().bandwidth, 25e9);
  // Rail-optimized wiring helps a ring, not all-to-all traffic.
  Cluster rails = roce;
  rails.railOptimized = true;
  EXPECT_DOUBLE_EQ(rails.interNode().bandwidth, 25e9);
  EXPECT_DOUBLE_EQ(rails.interNodeAllToAll().bandwidth, 12.5e9);
  // One rank: nothing to sum.
  EXPECT_EQ(gradientSyncTime(roce, GradSync::Ring, bytes, 1, 1), 0);
}

TEST(Pipeline, BubbleAndInFlightMatchTheSimulatedSchedules) {
  using pipeline::ScheduleKind;
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved})
    for (int64_t p = 2; p <= 5; ++p)
      for (int64_t m = 1; m <= 12; ++m)
        for (int64_t v = 1; v <= 3; ++v) {
          std::string error;
          std::optional<pipeline::Schedule> schedule =
              pipeline::buildSchedule(kind, p, m, v, error);
          if (!schedule)
            continue;
          pipeline::Timeline timeline = pipeline::simulate(*schedule);
          SCOPED_TRACE(std::string(pipeline::scheduleName(kind)) +
                       " p=" + std::to_string(p) + " m=" + std::to_string(m) +
                       " v=" + std::to_string(v));
          EXPECT_NEAR(bubbleFraction(kind, p, m, v), timeline.idleFraction[0],
                      1e-9);
          double chunks = kind == ScheduleKind::Interleaved ? double(v) : 1.0;
          EXPECT_NEAR(microbatchesInFlight(kind, p, m, v),
                      double(timeline.peakInFlight[0]) / chunks, 1e-9);
        }
}

TEST(Memory, ZeroStagesShardStateOverDataParallelRanks) {
  // Mixed precision as in the ZeRO paper: 2 + 2 + 12 bytes per parameter.
  StateBytes mixed{2, 2, 12};
  double psi = 7.5e9; // the paper's 7.5B model on 64 GPUs: 120 GB unsharded
  MemoryBreakdown none = modelState(psi, mixed, 0, 64, 1, 1);
  EXPECT_NEAR(none.total(), 16 * psi, 1);
  EXPECT_NEAR(modelState(psi, mixed, 1, 64, 1, 1).total(),
              4 * psi + 12 * psi / 64, 1);
  EXPECT_NEAR(modelState(psi, mixed, 2, 64, 1, 1).total(),
              2 * psi + 14 * psi / 64, 1);
  EXPECT_NEAR(modelState(psi, mixed, 3, 64, 1, 1).total(), 16 * psi / 64, 1);
  // Tensor and pipeline parallelism split everything first.
  MemoryBreakdown split = modelState(psi, mixed, 1, 8, 4, 2);
  EXPECT_NEAR(split.weights, 2 * psi / 8, 1);
  EXPECT_NEAR(split.optimizer, 12 * psi / 8 / 8, 1);
}

TEST(Memory, ActivationsPerLayerAsKorthikantiEtAl) {
  // GPT-3 175B: s = 2048, b = 1, h = 12288, a = 96, t = 8.
  double sbh = 2048.0 * 1 * 12288;
  // 5 a s / (h t) = 10: sbh (10 + 24/8 + 10).
  EXPECT_NEAR(
      activationBytesPerLayer(2048, 1, 12288, 96, 8, false, Recompute::None),
      23 * sbh, 1);
  // sbh/t (34 + 5 a s / h) = sbh/8 (34 + 80).
  EXPECT_NEAR(
      activationBytesPerLayer(2048, 1, 12288, 96, 8, true, Recompute::None),
      114 * sbh / 8, 1);
  EXPECT_NEAR(activationBytesPerLayer(2048, 1, 12288, 96, 8, true,
                                      Recompute::Selective),
              34 * sbh / 8, 1);
  EXPECT_NEAR(
      activationBytesPerLayer(2048, 1, 12288, 96, 8, false, Recompute::Full),
      2 * sbh, 1);
  // One GPU, no recomputation: the paper's 34 sbh + 5 a s^2 b.
  EXPECT_NEAR(
      activationBytesPerLayer(2048, 1, 12288, 96, 1, false, Recompute::None),
      34 * sbh + 5 * 96.0 * 2048 * 2048, 1);
}

TEST(Roofline, TheSlowerOfComputeAndMemory) {
  EXPECT_NEAR(rooflineTime(1e12, 1e6, 100e12, 2e12, 0.5), 0.02, 1e-12);
  EXPECT_NEAR(rooflineTime(1e6, 1e10, 100e12, 2e12, 0.5), 0.005, 1e-12);
}

TEST(Cluster, PresetsAndTheLinkBetweenNodes) {
  std::optional<Cluster> a100 = Cluster::preset("dgx-a100-80g", 128);
  ASSERT_TRUE(a100);
  EXPECT_EQ(a100->gpus(), 1024);
  EXPECT_NEAR(a100->gpu.peakBf16, 312e12, 1);
  // Eight 200 Gb/s NICs for eight GPUs: 25 GB/s each.
  EXPECT_NEAR(a100->interNode().bandwidth, 25e9, 1);
  a100->railOptimized = false;
  a100->oversubscription = 2;
  EXPECT_NEAR(a100->interNode().bandwidth, 12.5e9, 1);
  EXPECT_TRUE(Cluster::preset("dgx-h100", 1));
  EXPECT_NEAR(Cluster::preset("h200", 1)->gpu.memoryBytes, 141e9, 1);
  EXPECT_FALSE(Cluster::preset("tpu-v5", 1));
}

TEST(Cluster, ParsesJSONAndNamesWhatIsWrong) {
  const char *text = R"({
    "name": "roce-cluster", "nodes": 16, "gpus_per_node": 8,
    "gpu": {"model": "H100", "peak_bf16_tflops": 989, "peak_fp32_tflops": 67,
            "memory_gb": 80, "memory_bandwidth_gbps": 3350},
    "intra_node": {"bandwidth_gbps": 450, "latency_us": 3},
    "inter_node": {"fabric": "roce", "nics_per_node": 4,
                   "nic_bandwidth_gbps": 50, "latency_us": 8,
                   "oversubscription": 2}
  })";
  std::string error;
  std::optional<Cluster> cluster = Cluster::parseJSON(text, error);
  ASSERT_TRUE(cluster) << error;
  EXPECT_EQ(cluster->gpus(), 128);
  EXPECT_EQ(cluster->interFabric, "roce");
  // 4 NICs x 50 GB/s over 8 GPUs, halved by the oversubscription.
  EXPECT_NEAR(cluster->interNode().bandwidth, 12.5e9, 1);
  EXPECT_NEAR(cluster->interNode().latency, 8e-6, 1e-12);

  EXPECT_FALSE(Cluster::parseJSON(R"({"nodes": 1})", error));
  EXPECT_EQ(error, "missing number 'gpus_per_node'");
  std::string bad = text;
  bad.replace(bad.find("\"roce\""), 6, "\"ethernet\"");
  EXPECT_FALSE(Cluster::parseJSON(bad, error));
  EXPECT_EQ(error, "inter_node.fabric must be \"infiniband\", \"roce\" or "
                   "\"ddc\", not \"ethernet\"");
  EXPECT_FALSE(Cluster::parseJSON("{nodes", error));
  EXPECT_EQ(error.rfind("not JSON", 0), 0u);
}

} // namespace
