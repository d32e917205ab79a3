//===- PlannerTest.cpp - Profiles, predictions and the search -------------===//
//
// Predictions are checked against the formulas of docs/planner.md computed
// here by hand, on a profile built by hand (one contraction and one
// elementwise op per layer and phase); the profile of a synthetic GPT is
// checked against its closed-form parameter and FLOP counts.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/Planner.h"
#include "weft/Planner/Profile.h"

#include "weft/InitAllDialects.h"
#include "weft/Target/Synthetic/SyntheticModel.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <set>

using namespace weft;
using namespace weft::planner;

namespace {

constexpr double kLayerFlops = 1e12; // forward, one sequence
constexpr double kLayerElements = 1e8;
constexpr double kLayerParameters = 1e8;

/// A model of `layers` layers: forward = one contraction, backward = two.
ModelProfile handModel(int64_t layers, int64_t tp = 1) {
  ModelProfile model;
  model.layers = layers;
  model.batch = 1;
  model.seq = 1024;
  model.hidden = 4096;
  model.heads = 32;
  model.vocab = 32000;
  model.forwardFlops = layers * kLayerFlops;
  for (int64_t t = 1; t <= tp; t *= 2) {
    TensorParallelProfile p;
    p.tp = t;
    p.layerForward.ops = {{kLayerFlops / t, kLayerElements / t, true}};
    p.layerBackward.ops = {{2 * kLayerFlops / t, 2 * kLayerElements / t, true}};
    if (t > 1) {
      p.layerForward.collectives = {{Collective::AllReduce, 1e6}};
      p.layerBackward.collectives = {{Collective::AllReduce, 1e6}};
    }
    p.layerParameters = kLayerParameters / t;
    p.otherParameters = 0;
    p.updateParameters = kLayerParameters / t * layers;
    model.tensorParallel.push_back(p);
  }
  model.parameters = kLayerParameters * layers;
  return model;
}

Cluster a100(int64_t nodes) { return *Cluster::preset("dgx-a100-80g", nodes); }

double contractionTime(double flops, const Cluster &c) {
  return flops / (c.gpu.peakBf16 * c.efficiency.contraction);
}

TEST(Predict, ComputeAndBubbleFollowTheSchedule) {
  ModelProfile model = handModel(8);
  Cluster cluster = a100(1);
  TrainingSetup setup{/*globalBatch=*/16, /*mixedPrecision=*/true};
  Plan plan;
  plan.dp = 2;
  plan.pp = 4;
  plan.microbatchSize = 1;
  plan.microbatches = 8;
  std::string error;
  std::optional<Prediction> p = predict(model, cluster, setup, plan, error);
  ASSERT_TRUE(p) << error;
  // Two layers a stage; forward + backward is 3 layer-forwards each.
  double perMicrobatch = 2 * contractionTime(3 * kLayerFlops, cluster);
  EXPECT_NEAR(p->time.compute, 8 * perMicrobatch, 1e-9);
  // 1F1B: (p - 1) micro-batches of idling (plus the sends of each).
  EXPECT_NEAR(p->time.bubble /
                  (p->time.compute / 8 + p->time.pipelineSends / 8),
              3.0, 1e-9);

  // Interleaving with v chunks divides the bubble by v.
  plan.schedule = pipeline::ScheduleKind::Interleaved;
  plan.virtualStages = 2;
  std::optional<Prediction> interleaved =
      predict(model, cluster, setup, plan, error);
  ASSERT_TRUE(interleaved) << error;
  EXPECT_NEAR(interleaved->time.compute, p->time.compute, 1e-9);
  EXPECT_LT(interleaved->time.bubble, p->time.bubble / 1.9);
}

TEST(Predict, FullRecomputationRepeatsTheForward) {
  ModelProfile model = handModel(4);
  Cluster cluster = a100(1);
  TrainingSetup setup{8, true};
  Plan plan{8, 1, 1, 1, 1};
  std::string error;
  std::optional<Prediction> none = predict(model, cluster, setup, plan, error);
  plan.recompute = Recompute::Full;
  std::optional<Prediction> full = predict(model, cluster, setup, plan, error);
  ASSERT_TRUE(none && full) << error;
  EXPECT_NEAR(full->time.compute / none->time.compute, 4.0 / 3.0, 1e-9);
  EXPECT_LT(full->memory.activations, none->memory.activations);
  // Model FLOPs do not count the recomputation; hardware FLOPs do.
  EXPECT_NEAR(full->hardwareTflopsPerGpu / full->modelTflopsPerGpu, 4.0 / 3.0,
              1e-9);
}

TEST(Predict, GradientReductionHidesBehindTheBackwardPassWhenItCan) {
  ModelProfile model = handModel(4);
  Cluster cluster = a100(4);
  TrainingSetup setup{32, true};
  Plan plan{32, 1, 1, 1, 1};
  std::string error;
  cluster.overlapGradientReduction = false;
  std::optional<Prediction> exposed =
      predict(model, cluster, setup, plan, error);
  ASSERT_TRUE(exposed) << error;
  // A hierarchical all-reduce of the f32 gradients: 8 ranks a node, 4 nodes.
  double bytes = 4 * kLayerParameters * 4;
  EXPECT_NEAR(exposed->time.dataParallel,
              hierarchicalAllReduceTime(bytes, 8, 4, cluster.intraNode,
                                        cluster.interNode()),
              1e-12);
  cluster.overlapGradientReduction = true;
  std::optional<Prediction> hidden =
      predict(model, cluster, setup, plan, error);
  double backward = 4 * contractionTime(2 * kLayerFlops, cluster);
  EXPECT_NEAR(hidden->time.dataParallel,
              std::max(0.0, exposed->time.dataParallel - backward), 1e-12);
}

TEST(Predict, MemoryIsModelStatePlusActivationsInFlight) {
  ModelProfile model = handModel(8);
  Cluster cluster = a100(1);
  TrainingSetup setup{32, true};
  Plan plan{2, 1, 4, 1, 16};
  plan.zero = 1;
  std::string error;
  std::optional<Prediction> p = predict(model, cluster, setup, plan, error);
  ASSERT_TRUE(p) << error;
  // The first stage: 2 layers, 1F1B holds min(p, m) = 4 micro-batches.
  MemoryBreakdown state =
      modelState(2 * kLayerParameters, {2, 4, 12}, 1, 2, 1, 1);
  EXPECT_DOUBLE_EQ(p->memory.weights, state.weights);
  EXPECT_DOUBLE_EQ(p->memory.optimizer, state.optimizer);
  EXPECT_NEAR(
      p->memory.activations,
      2 * 4 *
          activationBytesPerLayer(1024, 1, 4096, 32, 1, false, Recompute::None),
      1);
  EXPECT_EQ(p->fits, p->memory.total() <= p->memoryCapacity);
}

TEST(Predict, RanksSharingCoresWaitForThem) {
  // Four CPU ranks of one thread on two cores: data parallelism keeps every
  // rank busy, so the node runs their work two at a time, and collectives
  // pay the latency measured with every rank busy; a pipeline's ranks sleep
  // in its bubble and lend their cores.
  ModelProfile model = handModel(4);
  Cluster cpu = a100(1);
  cpu.gpusPerNode = 4;
  cpu.coresPerNode = 2;
  cpu.threadsPerRank = 1;
  cpu.intraNode.latency = 1e-6;
  cpu.contendedLatency = 1e-3;
  cpu.overlapGradientReduction = false;
  TrainingSetup setup{8, true};
  std::string error;
  std::optional<Prediction> dp =
      predict(model, cpu, setup, Plan{4, 1, 1, 2, 1}, error);
  ASSERT_TRUE(dp) << error;
  EXPECT_NEAR(dp->time.coreSharing, dp->time.compute + dp->time.optimizer,
              1e-9);
  Cluster alone = cpu;
  alone.coresPerNode = 0;
  std::optional<Prediction> own =
      predict(model, alone, setup, Plan{4, 1, 1, 2, 1}, error);
  ASSERT_TRUE(own) << error;
  EXPECT_EQ(own->time.coreSharing, 0);
  // All busy: the all-reduce of the gradients at the contended latency.
  double bytes = 4 * kLayerParameters * 4;
  Link busy{cpu.intraNode.bandwidth, cpu.contendedLatency};
  EXPECT_NEAR(
      dp->time.dataParallel,
      collectiveTime(Collective::AllReduce, Algorithm::Ring, bytes, 4, busy),
      1e-9);
  // A pipeline of 4 with 4 micro-batches: its bubble lends cores, so less
  // than the data-parallel plan is lost to sharing them.
  std::optional<Prediction> pipeline =
      predict(model, cpu, setup, Plan{1, 1, 4, 2, 4}, error);
  ASSERT_TRUE(pipeline) << error;
  EXPECT_NEAR(
      pipeline->time.coreSharing,
      std::max(0.0,
               4.0 / 2 * (pipeline->time.compute + pipeline->time.optimizer) -
                   pipeline->time.compute - pipeline->time.optimizer -
                   pipeline->time.bubble),
      1e-9);
}

TEST(Predict, ElementwiseEfficiencyDividesOnlyElementwiseTime) {
  // Elementwise time E grows to E / e: the extra is E (1/e - 1), three
  // times as much at e = 1/4 as at e = 1/2; contractions keep their time.
  ModelProfile model = handModel(4);
  ModelProfile withElementwise = model;
  for (TensorParallelProfile &p : withElementwise.tensorParallel)
    p.layerForward.ops.push_back({0, kLayerElements, false});
  TrainingSetup setup{8, true};
  std::string error;
  auto compute = [&](const ModelProfile &m, double efficiency) {
    Cluster cluster = a100(1);
    cluster.efficiency.elementwise = efficiency;
    std::optional<Prediction> p =
        predict(m, cluster, setup, Plan{8, 1, 1, 1, 1}, error);
    EXPECT_TRUE(p) << error;
    return p ? p->time.compute : 0.0;
  };
  EXPECT_EQ(compute(model, 0.25), compute(model, 1));
  double atHalf = compute(withElementwise, 0.5) - compute(withElementwise, 1);
  double atQuarter =
      compute(withElementwise, 0.25) - compute(withElementwise, 1);
  EXPECT_GT(atHalf, 0);
  EXPECT_NEAR(atQuarter, 3 * atHalf, 1e-9 * atQuarter);
}

TEST(Predict, FusedAttentionKeepsScoresOffMemory) {
  // A memory-bound op whose elements are all attention scores: with fused
  // attention it moves no bytes, so the step costs what it costs without
  // the op; a cluster without fused attention pays for them.
  ModelProfile model = handModel(4);
  ModelProfile withScores = model;
  for (TensorParallelProfile &p : withScores.tensorParallel)
    p.layerForward.ops.push_back({0, kLayerElements, false, kLayerElements});
  TrainingSetup setup{8, true};
  std::string error;
  auto compute = [&](const ModelProfile &m, bool fused) {
    Cluster cluster = a100(1);
    cluster.fusedAttention = fused;
    std::optional<Prediction> p =
        predict(m, cluster, setup, Plan{8, 1, 1, 1, 1}, error);
    EXPECT_TRUE(p) << error;
    return p ? p->time.compute : 0.0;
  };
  EXPECT_GT(compute(withScores, false), compute(model, false));
  EXPECT_NEAR(compute(withScores, true), compute(model, true),
              1e-9 * compute(model, true));
}

TEST(Predict, TheRingComputesFiveEighthsOfCausalAttentionOnCpuRanks) {
  // A tenth of a layer's forward work is its attention; with a causal mask
  // the ring's head/tail ranks compute (2cp+1)/(4cp) of its blocks, in the
  // forward and in the backward (twice the forward's block products), on
  // CPU ranks, whose kernels compute every score of a whole sequence.
  ModelProfile model = handModel(4);
  for (TensorParallelProfile &p : model.tensorParallel)
    p.layerAttention.ops = {{kLayerFlops / 10, 0, true}};
  // Ranks on CPU cores (an op overhead) run Weft's kernels.
  Cluster cluster = a100(1);
  cluster.gpu.opOverhead = 1e-9;
  TrainingSetup setup{4, true};
  Plan plan{4, 1, 1, 1, 1};
  plan.cp = 2;
  std::string error;
  std::optional<Prediction> full = predict(model, cluster, setup, plan, error);
  ASSERT_TRUE(full) << error;
  model.causal = true;
  std::optional<Prediction> causal =
      predict(model, cluster, setup, plan, error);
  ASSERT_TRUE(causal) << error;
  // Per rank: 4 layers, one micro-batch of one sequence, half its tokens.
  double attention =
      contractionTime(kLayerFlops / 10, cluster) / 2 + cluster.gpu.opOverhead;
  EXPECT_NEAR(full->time.compute - causal->time.compute,
              4 * 3 * (1 - 5.0 / 8) * attention, 1e-9 * full->time.compute);
  // GPU presets keep the 1/cp share: their kernels treat every layout
  // alike.
  Cluster gpus = a100(1);
  std::optional<Prediction> gpuCausal =
      predict(model, gpus, setup, plan, error);
  model.causal = false;
  std::optional<Prediction> gpuFull = predict(model, gpus, setup, plan, error);
  ASSERT_TRUE(gpuCausal && gpuFull) << error;
  EXPECT_DOUBLE_EQ(gpuCausal->time.compute, gpuFull->time.compute);
  model.causal = true;
  // All-to-all (Ulysses) computes whole sequences of fewer heads.
  plan.cpAttention = ContextAttention::AllToAll;
  std::optional<Prediction> ulysses =
      predict(model, cluster, setup, plan, error);
  ASSERT_TRUE(ulysses) << error;
  EXPECT_DOUBLE_EQ(ulysses->time.compute, full->time.compute);
  // The ring's two chunks per rank must divide the sequence.
  model.seq = 1026;
  plan.cpAttention = ContextAttention::Ring;
  EXPECT_FALSE(predict(model, cluster, setup, plan, error));
  EXPECT_EQ(error, "cp=2 (ring) does not divide the sequence of 1026 into 4 "
                   "chunks");
}

TEST(Predict, ElementwiseBytesComeFromTheCacheByFootprint) {
  // One memory-bound op per layer forward. Its bytes come from the cache
  // in the share the cache holds of what a micro-batch's layers keep for
  // their backward (the rank's footprint), the rest from memory.
  ModelProfile model = handModel(4);
  ModelProfile withElementwise = model;
  const double elements = 1e5;
  for (TensorParallelProfile &p : withElementwise.tensorParallel)
    p.layerForward.ops.push_back({0, elements, false});
  TrainingSetup setup{8, true};
  const double footprint =
      4 * activationBytesPerLayer(1024, 1, 4096, 32, 1, false,
                                  Recompute::None) +
      4.0 * 1024 * 32000; // the f32 logits
  auto elementwise = [&](Cluster cluster) {
    cluster.efficiency.memory = 1;
    std::string error;
    std::optional<Prediction> with =
        predict(withElementwise, cluster, setup, Plan{8, 1, 1, 1, 1}, error);
    std::optional<Prediction> without =
        predict(model, cluster, setup, Plan{8, 1, 1, 1, 1}, error);
    EXPECT_TRUE(with && without) << error;
    return with && without ? with->time.compute - without->time.compute : 0;
  };
  Cluster cluster = a100(1);
  const double bytes = 4 * elements * 2; // 4 layers, bf16
  const double memory = cluster.gpu.memoryBandwidth;
  // No cache described: every byte from memory.
  EXPECT_NEAR(elementwise(cluster), bytes / memory, 1e-6 * bytes / memory);
  cluster.gpu.cacheBandwidth = 4 * memory;
  cluster.gpu.cacheBytes = footprint / 4;
  double quarter = 0.25 / (4 * memory) + 0.75 / memory;
  EXPECT_NEAR(elementwise(cluster), bytes * quarter, 1e-6 * bytes * quarter);
  cluster.gpu.cacheBytes = 2 * footprint;
  EXPECT_NEAR(elementwise(cluster), bytes / (4 * memory),
              1e-6 * bytes / memory);
  // CPU ranks that share cores share their caches: 8 ranks on 4 cores get
  // half a core's cache each.
  cluster.gpu.cacheBytes = footprint / 2;
  cluster.coresPerNode = 4;
  cluster.threadsPerRank = 1;
  EXPECT_NEAR(elementwise(cluster), bytes * quarter, 1e-6 * bytes * quarter);
}

TEST(Predict, TheUpdateHasItsOwnEfficiency) {
  // The optimizer's update runs at efficiency.update of its roofline; the
  // layers' elementwise efficiency does not touch it.
  ModelProfile model = handModel(4);
  for (TensorParallelProfile &p : model.tensorParallel)
    p.update.ops.push_back({0, 4 * kLayerParameters, false});
  TrainingSetup setup{8, true};
  auto optimizer = [&](double elementwise, double update) {
    Cluster cluster = a100(1);
    cluster.efficiency.elementwise = elementwise;
    cluster.efficiency.update = update;
    std::string error;
    std::optional<Prediction> p =
        predict(model, cluster, setup, Plan{8, 1, 1, 1, 1}, error);
    EXPECT_TRUE(p) << error;
    return p ? p->time.optimizer : 0.0;
  };
  double atOne = optimizer(1, 1);
  Cluster cluster = a100(1);
  double bytes = 4 * kLayerParameters * 4; // f32 state
  EXPECT_NEAR(atOne,
              bytes / (cluster.gpu.memoryBandwidth * cluster.efficiency.memory),
              1e-9 * atOne);
  EXPECT_EQ(optimizer(0.25, 1), atOne);
  EXPECT_NEAR(optimizer(1, 0.5), 2 * atOne, 1e-9 * atOne);
}

TEST(Predict, RejectsPlansThatAreNotPlans) {
  ModelProfile model = handModel(4, 2);
  Cluster cluster = a100(1);
  TrainingSetup setup{8, true};
  std::string error;
  EXPECT_FALSE(predict(model, cluster, setup, Plan{2, 2, 1, 1, 4}, error));
  EXPECT_NE(error.find("is not the cluster's 8 GPUs"), std::string::npos);
  EXPECT_FALSE(predict(model, cluster, setup, Plan{8, 1, 1, 1, 2}, error));
  EXPECT_NE(error.find("global batch"), std::string::npos);
  EXPECT_FALSE(predict(model, cluster, setup, Plan{1, 1, 8, 1, 8}, error));
  EXPECT_NE(error.find("exceeds the model's 4 layers"), std::string::npos);
  EXPECT_FALSE(predict(model, cluster, setup, Plan{1, 8, 1, 8, 1}, error));
  EXPECT_NE(error.find("not profiled for tp=8"), std::string::npos);
}

TEST(Predict, ExpertParallelismSplitsTheExpertsAndAddsAllToAlls) {
  // Half of a layer's parameters are experts; each layer moves 1e6
  // dispatched elements per sequence forward (2 all-to-alls) and backward
  // (4).
  ModelProfile model = handModel(4);
  model.experts = 8;
  TensorParallelProfile &p = model.tensorParallel[0];
  p.layerExpertParameters = kLayerParameters / 2;
  model.expertForward.collectives.assign(2, {Collective::AllToAll, 1e6});
  model.expertBackward.collectives.assign(4, {Collective::AllToAll, 1e6});
  Cluster cluster = a100(1);
  TrainingSetup setup{16, true};
  Plan dense{8, 1, 1, 1, 2};
  Plan experts = dense;
  experts.ep = 4;
  std::string error;
  std::optional<Prediction> a = predict(model, cluster, setup, dense, error);
  std::optional<Prediction> b = predict(model, cluster, setup, experts, error);
  ASSERT_TRUE(a && b) << error;
  // A rank holds a quarter of the experts' weights.
  double dropped = 4 * kLayerParameters / 2 * (1 - 1.0 / 4);
  EXPECT_NEAR(a->memory.weights - b->memory.weights, dropped * 2,
              1e-9 * dropped);
  EXPECT_DOUBLE_EQ(a->time.compute, b->time.compute);
  EXPECT_EQ(a->time.expertParallel, 0);
  double allToAll =
      groupCollectiveTime(cluster, Collective::AllToAll, 1e6 * 2, 4, 1);
  EXPECT_NEAR(b->time.expertParallel, 2 * 4 * 6 * allToAll, 1e-12);
  EXPECT_EQ(b->plan.str(), dense.str() + ",ep=4");

  experts.ep = 3;
  EXPECT_FALSE(predict(model, cluster, setup, experts, error));
  EXPECT_NE(error.find("ep=3 does not divide the model's 8 experts"),
            std::string::npos);
  // ZeRO shards over the dp/ep ranks that hold the same experts.
  experts.ep = 2;
  experts.zero = 1;
  std::optional<Prediction> sharded =
      predict(model, cluster, setup, experts, error);
  ASSERT_TRUE(sharded) << error;
  double held = 4 * (kLayerParameters / 2 + kLayerParameters / 2 / 2);
  EXPECT_NEAR(sharded->memory.optimizer, held * 12 / 4, 1e-9 * held);
  experts.ep = 8;
  EXPECT_FALSE(predict(model, cluster, setup, experts, error));
  EXPECT_NE(error.find("with ep = dp = 8 there are none"), std::string::npos);
  experts.zero = 0;
  experts.gradSync = runtime::GradSync::Ring;
  EXPECT_FALSE(predict(model, cluster, setup, experts, error));
  EXPECT_NE(error.find("not compiled together with sync="), std::string::npos);
  model.experts = 0;
  EXPECT_FALSE(predict(model, cluster, setup, experts, error));
  EXPECT_NE(error.find("the model has no experts"), std::string::npos);
}

TEST(Search, RanksFittingPlansFastestFirst) {
  ModelProfile model = handModel(8, 8);
  Cluster cluster = a100(2);
  TrainingSetup setup{64, true};
  SearchResult result = search(model, cluster, setup, PlanConstraints());
  ASSERT_FALSE(result.fitting.empty());
  for (size_t i = 1; i < result.fitting.size(); ++i)
    EXPECT_LE(result.fitting[i - 1].stepTime(), result.fitting[i].stepTime());
  for (const Prediction &p : result.fitting) {
    EXPECT_TRUE(p.fits);
    EXPECT_EQ(p.plan.dp * p.plan.tp * p.plan.pp * p.plan.cp, 16);
  }
  std::vector<std::string> why = explain(result, cluster);
  EXPECT_FALSE(why.empty());
}

TEST(Search, SearchesExpertParallelismWithinDataParallelism) {
  ModelProfile model = handModel(4);
  model.experts = 4;
  model.tensorParallel[0].layerExpertParameters = kLayerParameters / 2;
  model.expertForward.collectives.assign(2, {Collective::AllToAll, 1e6});
  model.expertBackward.collectives.assign(4, {Collective::AllToAll, 1e6});
  SearchResult result =
      search(model, a100(1), TrainingSetup{16, true}, PlanConstraints());
  std::set<int64_t> degrees;
  for (const Prediction &p : result.fitting) {
    EXPECT_EQ(p.plan.dp % p.plan.ep, 0);
    EXPECT_TRUE(p.plan.zero == 0 || p.plan.dp > p.plan.ep);
    degrees.insert(p.plan.ep);
  }
  EXPECT_EQ(degrees, (std::set<int64_t>{1, 2, 4}));
}

TEST(Search, FixedChoicesAreKept) {
  ModelProfile model = handModel(8, 8);
  Cluster cluster = a100(2);
  TrainingSetup setup{64, true};
  std::string error;
  std::optional<PlanConstraints> fixed =
      PlanConstraints::parse("tp=4,pp=2,zero=1,recompute=full", error);
  ASSERT_TRUE(fixed) << error;
  SearchResult result = search(model, cluster, setup, *fixed);
  ASSERT_FALSE(result.fitting.empty());
  for (const Prediction &p : result.fitting) {
    EXPECT_EQ(p.plan.tp, 4);
    EXPECT_EQ(p.plan.pp, 2);
    EXPECT_EQ(p.plan.zero, 1);
    EXPECT_EQ(p.plan.recompute, Recompute::Full);
  }
  EXPECT_FALSE(PlanConstraints::parse("tp=two", error));
  EXPECT_NE(error.find("'tp'"), std::string::npos);
  EXPECT_FALSE(PlanConstraints::parse("warp=2", error));
  EXPECT_NE(error.find("unknown key 'warp'"), std::string::npos);
}

TEST(Search, SaysWhyNothingFits) {
  // 1e13 parameters cannot fit on 16 GPUs even fully sharded.
  ModelProfile model = handModel(8, 8);
  for (TensorParallelProfile &p : model.tensorParallel) {
    p.layerParameters *= 1e4;
    p.updateParameters *= 1e4;
  }
  Cluster cluster = a100(2);
  SearchResult result =
      search(model, cluster, TrainingSetup{64, true}, PlanConstraints());
  EXPECT_TRUE(result.fitting.empty());
  ASSERT_FALSE(result.tooLarge.empty());
  for (const Prediction &p : result.tooLarge)
    EXPECT_GE(p.memory.total(), result.tooLarge.front().memory.total());

  // A batch of 3 on 16 GPUs with at most 4 layers of pipeline, tp 2 and
  // no context parallelism: dp is at least 2 and never divides it.
  PlanConstraints noContext;
  noContext.cp = 1;
  SearchResult odd =
      search(handModel(4, 2), cluster, TrainingSetup{3, true}, noContext);
  ASSERT_EQ(odd.reasons.size(), 1u);
  EXPECT_NE(odd.reasons[0].find("not divisible by any possible "
                                "data-parallel degree"),
            std::string::npos);
}

TEST(ClusterFile, YamlAndJsonDescribeTheSameCluster) {
  std::string json = R"({"name": "x", "nodes": 2, "gpus_per_node": 4,
    "gpu": {"peak_bf16_tflops": 100, "peak_fp32_tflops": 10,
            "memory_gb": 40, "memory_bandwidth_gbps": 1500},
    "intra_node": {"bandwidth_gbps": 200, "latency_us": 2},
    "inter_node": {"fabric": "roce", "nics_per_node": 2,
                   "nic_bandwidth_gbps": 25, "latency_us": 10,
                   "oversubscription": 2}})";
  std::string yaml = R"(name: x
nodes: 2
gpus_per_node: 4
gpu:
  peak_bf16_tflops: 100
  peak_fp32_tflops: 10
  memory_gb: 40
  memory_bandwidth_gbps: 1500
intra_node: {bandwidth_gbps: 200, latency_us: 2}
inter_node:
  fabric: roce
  nics_per_node: 2
  nic_bandwidth_gbps: 25
  latency_us: 10
  oversubscription: 2
)";
  std::string error;
  std::optional<Cluster> a = Cluster::parseJSON(json, error);
  ASSERT_TRUE(a) << error;
  std::optional<Cluster> b = Cluster::parseYAML(yaml, error);
  ASSERT_TRUE(b) << error;
  EXPECT_EQ(a->gpus(), b->gpus());
  EXPECT_EQ(b->interFabric, "roce");
  EXPECT_DOUBLE_EQ(a->interNode().bandwidth, b->interNode().bandwidth);
  EXPECT_DOUBLE_EQ(b->interNode().bandwidth, 2 * 25e9 / 4 / 2);
  EXPECT_DOUBLE_EQ(a->gpu.memoryBandwidth, b->gpu.memoryBandwidth);
  EXPECT_FALSE(Cluster::parseYAML("nodes: [1, 2", error));
  EXPECT_FALSE(Cluster::parseYAML("nodes: 2\ngpus_per_node: 8\n", error));
  EXPECT_NE(error.find("gpu"), std::string::npos);
}

class SyntheticProfile : public ::testing::Test {
protected:
  SyntheticProfile() {
    weft::registerAllDialects(registry);
    context = std::make_unique<mlir::MLIRContext>(registry);
  }
  mlir::DialectRegistry registry;
  std::unique_ptr<mlir::MLIRContext> context;
};

TEST_F(SyntheticProfile, CountsTheModelsParametersAndFlops) {
  std::string error;
  std::optional<SyntheticModelSpec> spec = SyntheticModelSpec::parse(
      "gpt:layers=2,hidden=64,heads=4,vocab=128,seq=16,batch=2", error);
  ASSERT_TRUE(spec) << error;
  auto module = buildSyntheticModel(*spec, context.get());
  ASSERT_TRUE(module);
  std::optional<ModelProfile> model = profileModel(*module, {1, 2}, 6, error);
  ASSERT_TRUE(model) << error;
  EXPECT_EQ(model->layers, 6);
  SyntheticModelSpec deep = *spec;
  deep.layers = 6;
  EXPECT_DOUBLE_EQ(model->parameters, double(deep.parameters()));
  // Forward contractions per sequence: 2 s (12 h^2 L + h V) for the
  // projections and head, plus 2 s^2 h L for both attention products
  // (causal attention counted whole, as Megatron counts it).
  double s = 16, h = 64, L = 6, V = 128;
  double expected = 2 * s * (12 * h * h * L + h * V) + 4 * s * s * h * L / 2;
  EXPECT_NEAR(model->forwardFlops / model->batch, expected, 0.26 * expected);

  const TensorParallelProfile *whole = model->find(1, false);
  const TensorParallelProfile *split = model->find(2, false);
  ASSERT_TRUE(whole && split);
  auto contractions = [](const Work &w) {
    double flops = 0;
    for (const OpWork &op : w.ops)
      flops += op.contraction ? op.flops : 0;
    return flops;
  };
  EXPECT_DOUBLE_EQ(contractions(split->layerForward),
                   contractions(whole->layerForward) / 2);
  // Megatron: one all-reduce after attention and one after the MLP, of the
  // layer's activation [b, s, h].
  ASSERT_EQ(split->layerForward.collectives.size(), 2u);
  for (const CollectiveWork &c : split->layerForward.collectives) {
    EXPECT_EQ(c.kind, Collective::AllReduce);
    EXPECT_DOUBLE_EQ(c.elements, 2 * 16 * 64);
  }
  EXPECT_TRUE(whole->layerForward.collectives.empty());
  EXPECT_DOUBLE_EQ(split->layerParameters * 2 - whole->layerParameters,
                   4 * 64 + 2 * 64); // norms and the row-parallel biases
}

TEST_F(SyntheticProfile, NamesATensorParallelDegreeTheModelCannotTake) {
  std::string error;
  std::optional<SyntheticModelSpec> spec = SyntheticModelSpec::parse(
      "llama:layers=1,hidden=96,heads=6,kv-heads=2,ffn=256,vocab=128,seq=8",
      error);
  ASSERT_TRUE(spec) << error;
  auto module = buildSyntheticModel(*spec, context.get());
  ASSERT_TRUE(module);
  std::optional<ModelProfile> model =
      profileModel(*module, {1, 2, 4}, 0, error);
  ASSERT_TRUE(model) << error;
  EXPECT_TRUE(model->find(2, false));
  EXPECT_FALSE(model->find(4, false));
  ASSERT_FALSE(model->rejectedDegrees.empty());
  EXPECT_EQ(model->rejectedDegrees[0].rfind("tp=4", 0), 0u);
  EXPECT_DOUBLE_EQ(model->parameters, double(spec->parameters()));
}

TEST_F(SyntheticProfile, ProfilesAMixtureOfExperts) {
  std::string error;
  std::optional<SyntheticModelSpec> spec = SyntheticModelSpec::parse(
      "gpt:layers=2,hidden=64,heads=4,vocab=128,seq=16,batch=2,experts=4",
      error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(spec->topK, 2);
  EXPECT_EQ(spec->capacity, 10); // ceil(1.25 * 2 * 16 / 4)
  auto module = buildSyntheticModel(*spec, context.get());
  ASSERT_TRUE(module);
  std::optional<ModelProfile> model = profileModel(*module, {1, 2}, 0, error);
  ASSERT_TRUE(model) << error;
  EXPECT_EQ(model->experts, 4);
  EXPECT_TRUE(model->expertError.empty()) << model->expertError;
  EXPECT_DOUBLE_EQ(model->parameters, double(spec->parameters()));
  EXPECT_DOUBLE_EQ(model->find(1, false)->layerExpertParameters,
                   2.0 * 4 * 64 * 256);
  // Dispatch and combine move the dispatched tokens [experts, batch *
  // capacity, hidden], for the whole batch.
  ASSERT_EQ(model->expertForward.collectives.size(), 2u);
  for (const CollectiveWork &c : model->expertForward.collectives)
    EXPECT_DOUBLE_EQ(c.elements, 4.0 * 2 * 10 * 64);
  EXPECT_FALSE(model->expertBackward.collectives.empty());
  // The experts' forward products read both stacked weights, which
  // expert parallelism divides and the batch does not grow.
  double expertWeights = 0;
  for (const OpWork &op : model->find(1, false)->layerForward.ops)
    expertWeights += op.expertWeightElements;
  EXPECT_DOUBLE_EQ(expertWeights, 2.0 * 4 * 64 * 256);
}

} // namespace
