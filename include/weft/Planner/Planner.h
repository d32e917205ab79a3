//===- Planner.h - Predict and search parallel training plans ---*- C++ -*-===//
//
// A plan is a point of the 3D + ZeRO space: data, tensor, pipeline,
// context and expert degrees, micro-batch size and count, schedule and
// virtual stages, ZeRO stage, recomputation, sequence parallelism and how
// attention runs over the context axis. `predict` prices one on a
// cluster from a model's profile; `search` prices them all and ranks those
// that fit in memory.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_PLANNER_PLANNER_H
#define WEFT_PLANNER_PLANNER_H

#include "weft/Planner/CostModel.h"
#include "weft/Planner/Profile.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::planner {

/// How attention runs over the context-parallel axis (weftc --cp-attention).
enum class ContextAttention { Ring, AllToAll };
const char *contextAttentionName(ContextAttention attention);

struct Plan {
  int64_t dp = 1, tp = 1, pp = 1;
  int64_t microbatchSize = 1, microbatches = 1;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::OneFOneB;
  int64_t virtualStages = 1;
  int zero = 0;
  Recompute recompute = Recompute::None;
  bool sequenceParallel = false;
  /// How the gradients are all-reduced over dp; unset: predict chooses the
  /// fastest (the library's when none is faster), and its Prediction's plan
  /// says which. Only without ZeRO (which reduce-scatters).
  std::optional<runtime::GradSync> gradSync;
  /// Local SGD (weftc --dp-sync every=K): the replicas step alone and
  /// all-reduce their parameters and optimizer state every K steps instead
  /// of their gradients every step. Never chosen by the search (it trains
  /// a different model): only pinned.
  int64_t dpSyncEvery = 1;
  /// Context parallelism: the sequence split over cp ranks (between tp and
  /// dp in rank order), attention run as a ring or an all-to-all.
  int64_t cp = 1;
  ContextAttention cpAttention = ContextAttention::Ring;
  /// Expert parallelism: a mixture's experts split over ep ranks, a part
  /// of the dp group (ep divides dp; consecutive ranks of it), each
  /// expert's weights replicated over the other dp/ep.
  int64_t ep = 1;

  /// "dp=8,tp=8,pp=16,mbs=1,m=48,schedule=1f1b,v=1,zero=1,recompute=full,
  /// sp=1", then ",sync=tree" when the gradient sync is not the library's,
  /// ",dp_sync=K" for local SGD, ",cp=4,cp_attention=ring" with context
  /// parallelism and ",ep=4" with expert parallelism.
  std::string str() const;
};

/// What the user pins with --fix; unset keys are searched.
struct PlanConstraints {
  std::optional<int64_t> dp, tp, pp, microbatchSize, microbatches,
      virtualStages, zero;
  std::optional<pipeline::ScheduleKind> schedule;
  std::optional<Recompute> recompute;
  std::optional<bool> sequenceParallel;
  std::optional<runtime::GradSync> gradSync;
  std::optional<int64_t> dpSyncEvery;
  std::optional<int64_t> cp;
  std::optional<ContextAttention> cpAttention;
  std::optional<int64_t> ep;
  /// Whether the backend offers selective recomputation as the cost model
  /// prices it (the attention cores, Korthikanti et al.); Weft's CPU
  /// backend recomputes elementwise work instead, so weftc leaves it out.
  bool selectiveRecompute = true;
  /// "dp=8,tp=8,pp=16,mbs=1,m=32,schedule=interleaved,v=2,zero=1,
  /// recompute=selective,sp=1,sync=hierarchical,dp_sync=8,cp=2,
  /// cp_attention=all-to-all,ep=8"; `error` names
  /// a bad key or value.
  static std::optional<PlanConstraints> parse(const std::string &text,
                                              std::string &error);
};

/// How the model is trained: numbers, not choices of the plan.
struct TrainingSetup {
  int64_t globalBatch = 0; // sequences per step
  /// 16-bit activations and contractions with f32 master weights and Adam
  /// state (2 + 4 + 12 bytes per parameter, as the ZeRO paper counts with
  /// f32 gradients), or everything f32 (4 + 4 + 8), as Weft's CPU backend
  /// runs today.
  bool mixedPrecision = true;
};

struct TimeBreakdown {
  double compute = 0;        // forward, backward and recomputation
  double bubble = 0;         // the pipeline's idle time
  double tensorParallel = 0; // the tp collectives (blocking)
  double pipelineSends = 0;  // activations and gradients between stages
  double dataParallel = 0;   // gradient reduction not hidden by backward
  double zeroGathers = 0;    // ZeRO-3's parameter gathers
  double contextParallel = 0; // the cp ring's shifts or all-to-alls
  double expertParallel = 0;  // the experts' dispatch and combine
  double coreSharing = 0;    // ranks waiting for cores they share
  double optimizer = 0;
  double total() const {
    return compute + bubble + tensorParallel + pipelineSends + dataParallel +
           zeroGathers + contextParallel + expertParallel + coreSharing +
           optimizer;
  }
};

struct Prediction {
  Plan plan;
  TimeBreakdown time;
  MemoryBreakdown memory; // of the rank that holds the most
  double memoryCapacity = 0;
  bool fits = false;
  double tokensPerSecond = 0;
  /// Model FLOPs (3× the forward's contractions, no recomputation) and
  /// hardware FLOPs (with recomputation) per GPU per second.
  double modelTflopsPerGpu = 0, hardwareTflopsPerGpu = 0;
  double mfu = 0;
  /// With dp > 1 and no ZeRO: each gradient sync's all-reduce time over
  /// the stages (before overlap with the backward pass), in GradSync order.
  std::vector<std::pair<runtime::GradSync, double>> gradSyncTimes;
  double stepTime() const { return time.total(); }
};

/// Prices `plan`; std::nullopt with `error` when it is not a valid plan for
/// the model and cluster (degrees that do not multiply to the GPU count, a
/// batch that does not divide, a tp degree the model cannot be split by).
std::optional<Prediction> predict(const ModelProfile &model,
                                  const Cluster &cluster,
                                  const TrainingSetup &setup, const Plan &plan,
                                  std::string &error);

struct SearchResult {
  std::vector<Prediction> fitting;  // fastest first
  std::vector<Prediction> tooLarge; // smallest memory first
  int64_t evaluated = 0;
  /// Why no plan was possible at all, if none was.
  std::vector<std::string> reasons;
};

SearchResult search(const ModelProfile &model, const Cluster &cluster,
                    const TrainingSetup &setup,
                    const PlanConstraints &constraints);

/// Where each degree's ranks lie: "tp=8 inside a node, dp=16 across nodes,
/// pp=8 across nodes" (tp innermost, then cp, dp, pp; ep the inner part
/// of dp).
std::string placement(const Plan &plan, const Cluster &cluster);

/// Why the best fitting plans of each other choice lost to `best`, a line
/// per choice ("tp=16 (across nodes): 1.42x slower: tensor-parallel
/// collectives +2.1 s").
std::vector<std::string> explain(const SearchResult &result,
                                 const Cluster &cluster);

} // namespace weft::planner

#endif // WEFT_PLANNER_PLANNER_H
