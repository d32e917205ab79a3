//===- Planner.cpp - Predict and search parallel training plans -----------===//
//
// Ranks are laid out as Megatron-LM does: tp innermost (consecutive ranks,
// inside a node while it fits), then dp, then pp outermost. A step on the
// rank that works the longest is
//   m micro-batches of its stage (forward, backward, recomputation and the
//   blocking tp collectives) + the bubble ((p-1)/v of a micro-batch)
//   + the sends between stages + the gradient reduction the backward pass
//   does not hide + ZeRO-3's gathers + the optimizer.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/Planner.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace weft::planner {

using llvm::formatv;
using pipeline::ScheduleKind;

static const char *recomputeName(Recompute r) {
  return r == Recompute::None        ? "none"
         : r == Recompute::Selective ? "selective"
                                     : "full";
}

const char *contextAttentionName(ContextAttention attention) {
  return attention == ContextAttention::Ring ? "ring" : "all-to-all";
}

std::string Plan::str() const {
  return formatv("dp={0},tp={1},pp={2},mbs={3},m={4},schedule={5},v={6},"
                 "zero={7},recompute={8},sp={9}",
                 dp, tp, pp, microbatchSize, microbatches,
                 pipeline::scheduleName(schedule), virtualStages, zero,
                 recomputeName(recompute), sequenceParallel ? 1 : 0)
             .str() +
         (gradSync && *gradSync != runtime::GradSync::Library
              ? std::string(",sync=") + runtime::gradSyncName(*gradSync)
              : std::string()) +
         (dpSyncEvery > 1 ? ",dp_sync=" + std::to_string(dpSyncEvery)
                          : std::string()) +
         (cp > 1 ? ",cp=" + std::to_string(cp) +
                       ",cp_attention=" + contextAttentionName(cpAttention)
                 : std::string()) +
         (ep > 1 ? ",ep=" + std::to_string(ep) : std::string());
}

/// What expert parallelism is not compiled with, if `gradSync`,
/// `dpSyncEvery` or `cp` asks for it; else nullptr.
static const char *
expertParallelConflict(std::optional<runtime::GradSync> gradSync,
                       int64_t dpSyncEvery, int64_t cp) {
  return gradSync && *gradSync != runtime::GradSync::Library
             ? "sync= (the runtime's own all-reduces sum over dp alone)"
         : dpSyncEvery > 1 ? "dp_sync="
         : cp > 1          ? "cp= above 1"
                           : nullptr;
}

std::optional<PlanConstraints> PlanConstraints::parse(const std::string &text,
                                                      std::string &error) {
  PlanConstraints c;
  llvm::SmallVector<llvm::StringRef> items;
  llvm::StringRef(text).split(items, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items) {
    // Named variables, not structured bindings: C++17 lambdas cannot
    // capture those.
    std::pair<llvm::StringRef, llvm::StringRef> split = item.split('=');
    llvm::StringRef key = split.first.trim(), value = split.second.trim();
    auto integer = [&](std::optional<int64_t> &into, int64_t least) {
      int64_t n;
      if (value.getAsInteger(10, n) || n < least) {
        error = formatv("'{0}' must be an integer of at least {1}, not '{2}'",
                        key, least, value);
        return false;
      }
      into = n;
      return true;
    };
    bool ok = true;
    if (key == "dp")
      ok = integer(c.dp, 1);
    else if (key == "tp")
      ok = integer(c.tp, 1);
    else if (key == "pp")
      ok = integer(c.pp, 1);
    else if (key == "mbs")
      ok = integer(c.microbatchSize, 1);
    else if (key == "m")
      ok = integer(c.microbatches, 1);
    else if (key == "v")
      ok = integer(c.virtualStages, 1);
    else if (key == "zero") {
      std::optional<int64_t> stage;
      ok = integer(stage, 0);
      if (ok && *stage > 3) {
        error = "'zero' must be 0, 1, 2 or 3";
        ok = false;
      }
      if (ok)
        c.zero = *stage;
    } else if (key == "schedule") {
      c.schedule = pipeline::parseScheduleKind(value.str());
      if (!c.schedule) {
        error = "'schedule' must be gpipe, 1f1b, interleaved or zb-h1, not '" +
                value.str() + "'";
        ok = false;
      }
    } else if (key == "recompute") {
      if (value == "none")
        c.recompute = Recompute::None;
      else if (value == "selective")
        c.recompute = Recompute::Selective;
      else if (value == "full")
        c.recompute = Recompute::Full;
      else {
        error = "'recompute' must be none, selective or full, not '" +
                value.str() + "'";
        ok = false;
      }
    } else if (key == "sp") {
      if (value != "0" && value != "1") {
        error = "'sp' must be 0 or 1, not '" + value.str() + "'";
        ok = false;
      }
      c.sequenceParallel = value == "1";
    } else if (key == "dp_sync") {
      ok = integer(c.dpSyncEvery, 1);
    } else if (key == "cp") {
      ok = integer(c.cp, 1);
    } else if (key == "ep") {
      ok = integer(c.ep, 1);
    } else if (key == "cp_attention") {
      if (value == "ring")
        c.cpAttention = ContextAttention::Ring;
      else if (value == "all-to-all")
        c.cpAttention = ContextAttention::AllToAll;
      else {
        error = "'cp_attention' must be ring or all-to-all, not '" +
                value.str() + "'";
        ok = false;
      }
    } else if (key == "sync") {
      c.gradSync = runtime::parseGradSync(value.str());
      if (!c.gradSync) {
        error = "'sync' must be library, ring, tree, ps or hierarchical, not "
                "'" +
                value.str() + "'";
        ok = false;
      }
    } else {
      error = "unknown key '" + key.str() +
              "' (dp, tp, pp, mbs, m, schedule, v, zero, recompute, sp, sync, "
              "dp_sync, cp, cp_attention, ep)";
      ok = false;
    }
    if (!ok)
      return std::nullopt;
  }
  if (c.gradSync && *c.gradSync != runtime::GradSync::Library && c.zero &&
      *c.zero > 0) {
    error =
        std::string("sync=") + runtime::gradSyncName(*c.gradSync) +
        " all-reduces whole gradients, and zero=" + std::to_string(*c.zero) +
        " reduce-scatters them: pin one";
    return std::nullopt;
  }
  if (c.dpSyncEvery && *c.dpSyncEvery > 1 &&
      ((c.zero && *c.zero > 0) ||
       (c.gradSync && *c.gradSync != runtime::GradSync::Library))) {
    error = "dp_sync=" + std::to_string(*c.dpSyncEvery) +
            " lets the replicas step alone: it takes neither zero= above 0 "
            "nor sync=";
    return std::nullopt;
  }
  if (c.ep && *c.ep > 1) {
    if (const char *conflict = expertParallelConflict(
            c.gradSync, c.dpSyncEvery.value_or(1), c.cp.value_or(1))) {
      error = "ep=" + std::to_string(*c.ep) +
              " is not compiled together with " + conflict;
      return std::nullopt;
    }
  }
  return c;
}

namespace {

/// Seconds of one part of the step for `scale` times the profiled batch.
struct Pricer {
  const Cluster &cluster;
  const TrainingSetup &setup;
  const Efficiency &efficiency;

  double activationBytes() const { return setup.mixedPrecision ? 2 : 4; }

  /// The cache one rank's data gets (a CPU's is its cores' caches): ranks
  /// that share a core share its cache, each evicting the other's data
  /// when it runs.
  double rankCache() const {
    if (cluster.coresPerNode == 0)
      return cluster.gpu.cacheBytes;
    double cores =
        std::min(double(std::max<int64_t>(1, cluster.threadsPerRank)),
                 double(cluster.coresPerNode) /
                     double(std::max<int64_t>(1, cluster.gpusPerNode)));
    return cluster.gpu.cacheBytes * cores;
  }

  /// The share of an op's bytes the cache serves when a rank's ops reuse
  /// `footprint` bytes: what a backward op reads, its forward op wrote a
  /// whole footprint of other data ago.
  double cacheHit(double footprint) const {
    if (cluster.gpu.cacheBytes <= 0 || cluster.gpu.cacheBandwidth <= 0)
      return 0;
    return footprint <= 0 ? 1 : std::min(1.0, rankCache() / footprint);
  }

  /// Seconds of `work`, its elementwise ops at `elementwise` of their
  /// roofline. `experts`, when given, is the share of the stacked expert
  /// weights a rank holds (1/ep): their bytes do not scale with the batch.
  double compute(const Work &work, double scale, double elementBytes,
                 double hit, double elementwise,
                 std::optional<double> experts = std::nullopt) const {
    double peak =
        setup.mixedPrecision ? cluster.gpu.peakBf16 : cluster.gpu.peakFp32;
    double seconds = cluster.gpu.opOverhead * double(work.ops.size());
    for (const OpWork &op : work.ops) {
      double elements =
          op.elements - (cluster.fusedAttention ? op.scoreElements : 0);
      double bytes = elements * scale * elementBytes;
      if (experts)
        bytes += op.expertWeightElements * (*experts - scale) * elementBytes;
      // An op larger than the cache streams all of it from memory.
      double cached = bytes <= rankCache() ? hit : 0;
      double secondsPerByte = (1 - cached) / cluster.gpu.memoryBandwidth;
      if (cached > 0)
        secondsPerByte += cached / cluster.gpu.cacheBandwidth;
      double bandwidth = efficiency.memory / secondsPerByte;
      seconds += op.contraction
                     ? rooflineTime(op.flops * scale, bytes, peak, bandwidth,
                                    efficiency.contraction)
                     : rooflineTime(op.flops * scale, bytes,
                                    cluster.gpu.peakFp32, bandwidth, 1.0) /
                           elementwise;
    }
    return seconds;
  }

  Link tensorParallelLink(int64_t tp) const {
    return tp <= cluster.gpusPerNode ? cluster.intraNode : cluster.interNode();
  }

  double collectives(const Work &work, double scale, double elementBytes,
                     int64_t ranks, const Link &link) const {
    double seconds = 0;
    for (const CollectiveWork &c : work.collectives)
      seconds += collectiveTime(c.kind, Algorithm::Ring,
                                c.elements * scale * elementBytes, ranks, link);
    return seconds;
  }

  /// A collective over the dp group: ranks tp apart, as many per node as
  /// the node holds.
  double dataParallel(Collective kind, double bytes, int64_t dp,
                      int64_t tp) const {
    if (dp == 1)
      return 0;
    int64_t local =
        std::min<int64_t>(dp, std::max<int64_t>(1, cluster.gpusPerNode / tp));
    return groupCollectiveTime(cluster, kind, bytes, local, dp / local);
  }

  /// The dp group's gradient all-reduce by `sync`.
  double gradientSync(runtime::GradSync sync, double bytes, int64_t dp,
                      int64_t tp) const {
    int64_t local =
        std::min<int64_t>(dp, std::max<int64_t>(1, cluster.gpusPerNode / tp));
    return gradientSyncTime(cluster, sync, bytes, local, dp / local);
  }
};

struct Stage {
  double compute = 0, tensorParallel = 0, backward = 0;
  double parameters = 0;
  /// Of `parameters`, the experts' weights split over ep (their gradients
  /// sum over dp/ep ranks, the others' over dp).
  double splitExpertParameters = 0;
  double activations = 0;
};

} // namespace

/// Why `plan`'s expert parallelism does not apply to `model`; empty when it
/// does (or ep is 1).
static std::string expertParallelError(const ModelProfile &model,
                                       const Plan &plan) {
  if (plan.ep == 1)
    return "";
  if (model.experts == 0)
    return formatv("ep={0}: the model has no experts (3-D parameters "
                   "[experts, ...] read by a batched matmul)",
                   plan.ep);
  if (model.experts % plan.ep != 0)
    return formatv("ep={0} does not divide the model's {1} experts", plan.ep,
                   model.experts);
  if (plan.dp % plan.ep != 0)
    return formatv("ep={0} does not divide dp={1}: the experts' ranks are a "
                   "part of the data-parallel group",
                   plan.ep, plan.dp);
  if (!model.expertError.empty())
    return "ep=" + std::to_string(plan.ep) +
           ": expert parallelism could not be profiled at ep=2: " +
           model.expertError;
  if (const char *conflict =
          expertParallelConflict(plan.gradSync, plan.dpSyncEvery, plan.cp))
    return formatv("ep={0} is not compiled together with {1}", plan.ep,
                   conflict);
  if (plan.zero > 0 && plan.dp == plan.ep)
    return formatv("zero={0} shards over the replicas of each expert, and "
                   "with ep = dp = {1} there are none",
                   plan.zero, plan.ep);
  return "";
}

/// The prediction on `cluster` as described (its links' latencies as
/// given).
static std::optional<Prediction> predictOnLinks(const ModelProfile &model,
                                                const Cluster &cluster,
                                                const TrainingSetup &setup,
                                                const Plan &plan,
                                                std::string &error) {
  const int64_t gpus = cluster.gpus();
  if (plan.dp * plan.tp * plan.pp * plan.cp != gpus) {
    error = formatv("dp·tp·pp·cp = {0}·{1}·{2}·{3} is not the cluster's {4} "
                    "GPUs",
                    plan.dp, plan.tp, plan.pp, plan.cp, gpus);
    return std::nullopt;
  }
  const bool ring = plan.cpAttention == ContextAttention::Ring;
  // The ring holds a head and a tail chunk of the sequence per rank.
  const int64_t sequenceChunks = ring ? 2 * plan.cp : plan.cp;
  if (plan.cp > 1 && model.seq % sequenceChunks != 0) {
    error = formatv("cp={0} ({1}) does not divide the sequence of {2} into "
                    "{3} chunks",
                    plan.cp, contextAttentionName(plan.cpAttention), model.seq,
                    sequenceChunks);
    return std::nullopt;
  }
  if (plan.cp > 1 && !ring &&
      (model.heads % (plan.tp * plan.cp) != 0 ||
       model.kvHeads % (plan.tp * plan.cp) != 0)) {
    error = formatv("all-to-all context parallelism splits the heads over "
                    "tp·cp = {0}·{1}: {2} query and {3} key/value heads do "
                    "not divide",
                    plan.tp, plan.cp, model.heads, model.kvHeads);
    return std::nullopt;
  }
  error = expertParallelError(model, plan);
  if (!error.empty())
    return std::nullopt;
  if (setup.globalBatch % (plan.dp * plan.microbatchSize) != 0 ||
      setup.globalBatch / (plan.dp * plan.microbatchSize) !=
          plan.microbatches) {
    error = formatv("a global batch of {0} is not dp·mbs·m = {1}·{2}·{3}",
                    setup.globalBatch, plan.dp, plan.microbatchSize,
                    plan.microbatches);
    return std::nullopt;
  }
  if (plan.pp > model.layers) {
    error =
        formatv("pp={0} exceeds the model's {1} layers", plan.pp, model.layers);
    return std::nullopt;
  }
  bool interleaved = plan.schedule == ScheduleKind::Interleaved;
  if (interleaved != (plan.virtualStages > 1) ||
      (interleaved && (plan.pp < 2 || plan.microbatches % plan.pp != 0 ||
                       plan.pp * plan.virtualStages > model.layers))) {
    error = "the interleaved schedule needs v >= 2 chunks per rank, pp >= 2, "
            "m a multiple of pp and pp·v at most the layers (other schedules "
            "take v=1)";
    return std::nullopt;
  }
  if (plan.sequenceParallel && plan.tp == 1) {
    error = "sequence parallelism needs tp > 1";
    return std::nullopt;
  }
  const TensorParallelProfile *profile =
      model.find(plan.tp, plan.sequenceParallel);
  if (!profile) {
    error = formatv("the model was not profiled for tp={0}", plan.tp);
    for (const std::string &why : model.rejectedDegrees)
      if (llvm::StringRef(why).starts_with("tp=" + std::to_string(plan.tp) +
                                           (plan.sequenceParallel ? " " : ":")))
        error = why;
    return std::nullopt;
  }

  const Efficiency &efficiency = cluster.efficiency;
  Pricer price{cluster, setup, efficiency};
  // Each cp rank holds a 1/cp share of every micro-batch's tokens: its
  // work (attention's too: its queries against every key) and activations
  // scale with them.
  const double scale = double(plan.microbatchSize) / model.batch / plan.cp;
  // Under a causal mask the ring's ranks compute (2cp+1)/(4cp) of the
  // score blocks a contiguous chunk would (the diagonal's three needed
  // quarters, half a block per later step), while Weft's CPU kernels
  // compute every score of a whole sequence. GPU presets keep the 1/cp
  // share, the balance the head/tail layout gives: fused kernels skip
  // masked tiles in any layout, and the unfused A100 calibration prices
  // attention as the published runs' kernels did it, every score.
  const double ringAttentionShare =
      plan.cp > 1 && ring && model.causal && cluster.cpuRanks()
          ? (2.0 * plan.cp + 1) / (4.0 * plan.cp)
          : 1.0;
  const int64_t seqPerRank = model.seq / plan.cp;
  const double act = price.activationBytes();
  const Link tpLink = price.tensorParallelLink(plan.tp);
  auto tpTime = [&](const Work &w) {
    return price.collectives(w, scale, act, plan.tp, tpLink);
  };

  double layerTpForward = tpTime(profile->layerForward);
  double layerTpBackward = tpTime(profile->layerBackward);
  if (plan.recompute == Recompute::Full)
    layerTpBackward += layerTpForward;
  const int64_t layersPerStage = (model.layers + plan.pp - 1) / plan.pp;
  // Fused attention (FlashAttention) keeps no score tensor for the
  // backward: without recomputation a layer holds what selective
  // recomputation leaves.
  const Recompute held =
      cluster.fusedAttention && plan.recompute == Recompute::None
          ? Recompute::Selective
          : plan.recompute;
  const double activationPerLayer =
      activationBytesPerLayer(seqPerRank, plan.microbatchSize, model.hidden,
                              model.heads, plan.tp, plan.sequenceParallel,
                              held) *
      (setup.mixedPrecision ? 1 : 2);
  const double inFlight =
      plan.pp == 1
          ? 1
          : microbatchesInFlight(plan.schedule, plan.pp, plan.microbatches,
                                 plan.virtualStages);
  // Cross-entropy keeps f32 logits, split over tp (Korthikanti: 4sbv/t).
  const double logits =
      4.0 * seqPerRank * plan.microbatchSize * model.vocab / plan.tp;
  StateBytes bytes =
      setup.mixedPrecision ? StateBytes{2, 4, 12} : StateBytes{4, 4, 8};

  auto stage = [&](bool first, bool last) {
    Stage s;
    if (plan.ep > 1)
      s.splitExpertParameters =
          layersPerStage * profile->layerExpertParameters / plan.ep;
    s.parameters =
        layersPerStage *
            (profile->layerParameters - profile->layerExpertParameters) +
        (plan.ep > 1 ? s.splitExpertParameters
                     : layersPerStage * profile->layerExpertParameters);
    if (first && last)
      s.parameters += profile->otherParameters;
    else
      s.parameters += first ? profile->preParameters : profile->postParameters;
    double held = first ? inFlight : 1;
    s.activations =
        layersPerStage * activationPerLayer * held + (last ? logits : 0);
    // A backward op reads what its forward op wrote: in between, the rank
    // touched the activations of the layers between them for this
    // micro-batch and, on average, half of the others it holds.
    double hit = price.cacheHit(s.activations / held * (held + 1) / 2);
    auto computeTime = [&](const Work &w) {
      return price.compute(w, scale, act, hit, efficiency.elementwise,
                           1.0 / plan.ep);
    };
    // One micro-batch of one layer. The ring's share of the attention
    // applies to the forward's and the backward's (twice the forward's
    // block products).
    double layerForward = computeTime(profile->layerForward);
    double layerBackward = computeTime(profile->layerBackward);
    const double attention = computeTime(profile->layerAttention);
    const double attentionSaved = (1 - ringAttentionShare) * attention;
    layerForward -= attentionSaved;
    layerBackward -= 2 * attentionSaved;
    if (plan.recompute == Recompute::Full)
      layerBackward += layerForward;
    else if (plan.recompute == Recompute::Selective)
      layerBackward += ringAttentionShare * attention;
    s.compute = layersPerStage * (layerForward + layerBackward);
    s.backward = layersPerStage * layerBackward;
    s.tensorParallel = layersPerStage * (layerTpForward + layerTpBackward);
    if (first) {
      s.compute +=
          computeTime(profile->preForward) + computeTime(profile->preBackward);
      s.tensorParallel +=
          tpTime(profile->preForward) + tpTime(profile->preBackward);
    }
    if (last) {
      double backward = computeTime(profile->postBackward);
      s.compute += computeTime(profile->postForward) + backward;
      s.backward += backward;
      s.tensorParallel +=
          tpTime(profile->postForward) + tpTime(profile->postBackward);
    }
    return s;
  };
  llvm::SmallVector<Stage, 2> stages;
  if (plan.pp == 1)
    stages.push_back(stage(true, true));
  else
    stages = {stage(true, false), stage(false, true)};

  Prediction prediction;
  prediction.plan = plan;
  prediction.memoryCapacity = cluster.gpu.memoryBytes * efficiency.usableMemory;
  const int64_t m = plan.microbatches;
  const int64_t v = plan.virtualStages;
  const Link ppLink = plan.tp * plan.cp * plan.dp < cluster.gpusPerNode
                          ? cluster.intraNode
                          : cluster.interNode();
  const double boundary = plan.microbatchSize * seqPerRank * model.hidden *
                          act / (plan.sequenceParallel ? plan.tp : 1);
  Link sendLink = ppLink;
  if (cluster.sendLatency > 0)
    sendLink.latency = cluster.sendLatency;
  const double sendsPerMicrobatch =
      plan.pp == 1 ? 0
                   : 2 * v *
                         collectiveTime(Collective::SendRecv, Algorithm::Ring,
                                        boundary, 2, sendLink);
  // Context parallelism's messages, per layer and micro-batch. The ring
  // shifts key/value chunks: cp - 1 of each in the forward; in the
  // backward the keys turn once more (the log-sum-exp), then values and
  // the key and value gradients, which take one more step home. Ulysses
  // moves q, k, v and the output to heads and back, and in the backward
  // the output's gradient in and q, k and v's gradients out. On GPUs the
  // ring's shifts overlap the blocks' attention (as TransformerEngine's
  // does); Weft's CPU runtime waits for them.
  double contextPerLayer = 0, contextHidden = 0;
  if (plan.cp > 1) {
    const Link cpLink = plan.tp * plan.cp <= cluster.gpusPerNode
                            ? cluster.intraNode
                            : cluster.interNode();
    const double tokens = double(plan.microbatchSize) * seqPerRank;
    const double headDim = double(model.hidden) / model.heads;
    const double queryBytes = tokens * model.hidden / plan.tp * act;
    const double kvBytes = tokens * headDim * model.kvHeads / plan.tp * act;
    double forward, backward;
    if (ring) {
      double shift = collectiveTime(Collective::SendRecv, Algorithm::Ring,
                                    kvBytes, 2, cpLink);
      forward = 2.0 * (plan.cp - 1) * shift;
      backward = (4.0 * (plan.cp - 1) + 2) * shift;
    } else {
      auto allToAll = [&](double bytes) {
        return collectiveTime(Collective::AllToAll, Algorithm::Ring, bytes,
                              plan.cp, cpLink);
      };
      forward = 2 * allToAll(queryBytes) + 2 * allToAll(kvBytes);
      backward = 2 * allToAll(queryBytes) + 2 * allToAll(kvBytes);
    }
    contextPerLayer = forward + backward;
    if (plan.recompute == Recompute::Full)
      contextPerLayer += forward;
    if (ring && !cluster.cpuRanks())
      contextHidden = 3 * ringAttentionShare *
                      price.compute(profile->layerAttention, scale, act, 0,
                                    efficiency.elementwise);
  }
  const double contextPerMicrobatch =
      layersPerStage * std::max(0.0, contextPerLayer - contextHidden);
  // Expert parallelism's dispatch and combine all-to-alls, per layer and
  // micro-batch, over ep ranks tp apart; they block: the experts wait for
  // their tokens.
  double expertPerMicrobatch = 0;
  if (plan.ep > 1) {
    auto allToAlls = [&](const Work &w) {
      double seconds = 0;
      for (const CollectiveWork &c : w.collectives)
        seconds += price.dataParallel(
            Collective::AllToAll, c.elements * scale * act, plan.ep, plan.tp);
      return seconds;
    };
    double forward = allToAlls(model.expertForward);
    double perLayer = forward + allToAlls(model.expertBackward);
    if (plan.recompute == Recompute::Full)
      perLayer += forward;
    expertPerMicrobatch = layersPerStage * perLayer;
  }

  // The gradient sync: the one given, else the fastest over the stages
  // (the library's unless another is faster), priced for each. Ranks on
  // CPUs keep the library's unless told: weft-calibrate measured MPI's
  // all-reduce, not the runtime's algorithms, which wait on messages as
  // pipeline receives do.
  // The weight gradients are partial sums over dp and cp: without ZeRO one
  // all-reduce over both (cp ranks tp apart, dp ranks tp·cp apart). The
  // runtime's own algorithms sum over dp alone, so with cp the library's
  // all-reduce runs.
  runtime::GradSync sync = plan.gradSync.value_or(runtime::GradSync::Library);
  bool chooseSync =
      !plan.gradSync && !cluster.cpuRanks() && plan.cp == 1 && plan.ep == 1;
  bool localSteps = plan.dpSyncEvery > 1;
  const int64_t dpStride = plan.tp * plan.cp;
  // ZeRO shards over the ranks that hold the same weights: the dp group's
  // dp/ep replicas of each expert (ranks tp·cp·ep apart).
  const int64_t zeroDp = plan.dp / plan.ep;
  const int64_t zeroStride = dpStride * plan.ep;
  if (plan.dp > 1 && plan.zero == 0 && !localSteps && plan.cp == 1 &&
      plan.ep == 1) {
    double best = 0;
    for (int mode = 0; mode <= int(runtime::GradSync::Hierarchical); ++mode) {
      double seconds = 0;
      for (const Stage &s : stages)
        seconds += price.gradientSync(runtime::GradSync(mode),
                                      s.parameters * bytes.gradients, plan.dp,
                                      plan.tp);
      prediction.gradSyncTimes.push_back({runtime::GradSync(mode), seconds});
      if (chooseSync && (mode == 0 || seconds < best)) {
        best = seconds;
        sync = runtime::GradSync(mode);
      }
    }
  }
  prediction.plan.gradSync = sync;
  for (const Stage &s : stages) {
    TimeBreakdown t;
    double perMicrobatch = s.compute + s.tensorParallel + sendsPerMicrobatch +
                           contextPerMicrobatch + expertPerMicrobatch;
    t.compute = m * s.compute;
    t.tensorParallel = m * s.tensorParallel;
    t.pipelineSends = m * sendsPerMicrobatch;
    t.contextParallel = m * contextPerMicrobatch;
    t.expertParallel = m * expertPerMicrobatch;
    // ZB-H1 fills all but one pass of each of 1F1B's p-1 slots with
    // deferred weight-gradient passes (forward, input gradient and weight
    // gradient a third of a micro-batch each).
    double slots = plan.schedule == ScheduleKind::ZeroBubbleH1 ? 3.0 : v;
    t.bubble = plan.pp == 1 ? 0 : double(plan.pp - 1) / slots * perMicrobatch;

    double gradientBytes =
        (s.parameters - s.splitExpertParameters) * bytes.gradients;
    double weightBytes = s.parameters * bytes.weights;
    double reduce =
        plan.zero >= 1 ? price.dataParallel(Collective::ReduceScatter,
                                            gradientBytes, zeroDp, zeroStride) +
                             price.dataParallel(Collective::AllReduce,
                                                gradientBytes / zeroDp,
                                                plan.cp * plan.ep, plan.tp)
        : plan.cp > 1
            ? price.dataParallel(Collective::AllReduce, gradientBytes,
                                 plan.dp * plan.cp, plan.tp)
            : price.gradientSync(sync, gradientBytes, plan.dp, plan.tp);
    if (s.splitExpertParameters > 0)
      reduce += price.dataParallel(
          plan.zero >= 1 ? Collective::ReduceScatter : Collective::AllReduce,
          s.splitExpertParameters * bytes.gradients, zeroDp, zeroStride);
    double hidden = cluster.overlapGradientReduction ? s.backward : 0;
    t.dataParallel = std::max(0.0, reduce - hidden);
    // Local SGD: no gradient sum; the weights and optimizer state are
    // averaged after every K-th step, past the backward pass.
    if (localSteps)
      t.dataParallel =
          price.dataParallel(Collective::AllReduce,
                             s.parameters * (bytes.weights + bytes.optimizer),
                             plan.dp, dpStride) /
              double(plan.dpSyncEvery) +
          std::max(0.0, price.dataParallel(Collective::AllReduce, gradientBytes,
                                           plan.cp, plan.tp) -
                            hidden);
    if (plan.zero >= 1)
      t.dataParallel += price.dataParallel(Collective::AllGather, weightBytes,
                                           zeroDp, zeroStride);
    if (plan.zero == 3)
      t.zeroGathers = 2.0 * m *
                      price.dataParallel(Collective::AllGather, weightBytes,
                                         zeroDp, zeroStride);
    // The update streams f32 state: price the profiled optimizer per
    // parameter it updates.
    double updated = s.parameters / (plan.zero >= 1 ? zeroDp : 1);
    if (profile->updateParameters > 0) {
      double share = updated / profile->updateParameters;
      double state =
          updated * (bytes.weights + bytes.gradients + bytes.optimizer);
      t.optimizer = price.compute(profile->update, share, 4,
                                  price.cacheHit(state), efficiency.update) +
                    price.collectives(profile->update, 1, 4, plan.tp, tpLink);
    }
    // Ranks that share cores: the node runs `concurrency` ranks' threads at
    // once, so its ranks' work takes at least their sum over that; a
    // pipeline's idle ranks lend theirs to the busy ones.
    if (cluster.coresPerNode > 0) {
      double concurrency = double(cluster.coresPerNode) /
                           std::max<int64_t>(1, cluster.threadsPerRank);
      double ranksPerNode = double(cluster.gpusPerNode);
      if (ranksPerNode > concurrency) {
        double work = t.compute + t.optimizer;
        double shared = ranksPerNode / concurrency * work;
        t.coreSharing = std::max(0.0, shared - work - t.bubble);
      }
    }
    MemoryBreakdown memory =
        modelState(s.parameters, bytes, plan.zero, zeroDp, 1, 1);
    memory.activations = s.activations;
    if (t.total() > prediction.time.total())
      prediction.time = t;
    if (memory.total() > prediction.memory.total())
      prediction.memory = memory;
  }
  prediction.fits = prediction.memory.total() <= prediction.memoryCapacity;

  double step = prediction.stepTime();
  double sequences = double(setup.globalBatch);
  double modelFlops = 3 * model.forwardFlops / model.batch * sequences;
  double recomputed = 0;
  if (plan.recompute != Recompute::None) {
    double layerFlops = 0;
    const Work &w = plan.recompute == Recompute::Full
                        ? model.find(1, false)->layerForward
                        : model.find(1, false)->layerAttention;
    for (const OpWork &op : w.ops)
      layerFlops += op.contraction ? op.flops : 0;
    recomputed = layerFlops * model.layers / model.batch * sequences;
  }
  prediction.tokensPerSecond = sequences * model.seq / step;
  prediction.modelTflopsPerGpu = modelFlops / step / gpus / 1e12;
  prediction.hardwareTflopsPerGpu =
      (modelFlops + recomputed) / step / gpus / 1e12;
  double peak =
      setup.mixedPrecision ? cluster.gpu.peakBf16 : cluster.gpu.peakFp32;
  prediction.mfu = modelFlops / step / gpus / peak;
  return prediction;
}

std::optional<Prediction> predict(const ModelProfile &model,
                                  const Cluster &cluster,
                                  const TrainingSetup &setup, const Plan &plan,
                                  std::string &error) {
  // Ranks that share cores: a collective waits until its ranks run. Price
  // it first as if every rank were busy (the contended latency), then at
  // the share of the step the ranks are busy: a pipeline's ranks sleep in
  // its bubble and while they wait for a stage's sends, and leave the cores
  // to the others.
  double concurrency = double(cluster.coresPerNode) /
                       std::max<int64_t>(1, cluster.threadsPerRank);
  double ranks = double(cluster.gpusPerNode);
  if (cluster.coresPerNode == 0 || cluster.contendedLatency <= 0 ||
      ranks <= concurrency)
    return predictOnLinks(model, cluster, setup, plan, error);
  Cluster contended = cluster;
  contended.intraNode.latency = cluster.contendedLatency;
  std::optional<Prediction> busy =
      predictOnLinks(model, contended, setup, plan, error);
  if (!busy)
    return busy;
  const TimeBreakdown &t = busy->time;
  double busyShare = 1 - (t.bubble + t.pipelineSends) / busy->stepTime();
  double excess = std::clamp(
      (ranks * busyShare - concurrency) / (ranks - concurrency), 0.0, 1.0);
  Cluster shared = cluster;
  shared.intraNode.latency +=
      excess * (cluster.contendedLatency - cluster.intraNode.latency);
  return predictOnLinks(model, shared, setup, plan, error);
}

/// Context parallelism past this degree is searched only when pinned
/// (Megatron runs use 2 to 16).
constexpr int64_t kLargestSearchedCp = 16;

static llvm::SmallVector<int64_t> divisorsOf(int64_t n) {
  llvm::SmallVector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0)
      out.push_back(d);
  return out;
}

namespace {
/// The degrees of a plan, and how attention runs over cp.
struct Degrees {
  int64_t tp, cp, pp, dp, ep;
  ContextAttention cpAttention;
};
} // namespace

SearchResult search(const ModelProfile &model, const Cluster &cluster,
                    const TrainingSetup &setup,
                    const PlanConstraints &constraints) {
  SearchResult result;
  const int64_t gpus = cluster.gpus();
  auto allowed = [](const std::optional<int64_t> &fixed, int64_t value) {
    return !fixed || *fixed == value;
  };
  bool anyDegrees = false, anyBatch = false;
  std::string firstError;
  // The runtime's own gradient-sync algorithms sum over dp alone.
  const bool cpAllowed = !constraints.gradSync ||
                         *constraints.gradSync == runtime::GradSync::Library;
  const bool epAllowed =
      model.experts > 0 && model.expertError.empty() &&
      !expertParallelConflict(constraints.gradSync,
                              constraints.dpSyncEvery.value_or(1), 1);
  std::vector<Degrees> degrees;
  for (int64_t tp : divisorsOf(gpus)) {
    if (!allowed(constraints.tp, tp))
      continue;
    for (int64_t cp : divisorsOf(gpus / tp)) {
      if (!allowed(constraints.cp, cp) ||
          (cp > 1 && (!cpAllowed || model.seq % cp != 0 ||
                      (!constraints.cp && cp > kLargestSearchedCp))))
        continue;
      for (int64_t pp : divisorsOf(gpus / tp / cp)) {
        int64_t dp = gpus / tp / cp / pp;
        if (!allowed(constraints.pp, pp) || !allowed(constraints.dp, dp) ||
            pp > model.layers || !model.find(tp, false))
          continue;
        for (int64_t ep : divisorsOf(dp)) {
          if (!allowed(constraints.ep, ep) ||
              (ep > 1 && (!epAllowed || cp > 1 || model.experts % ep != 0)))
            continue;
          for (ContextAttention attention :
               {ContextAttention::Ring, ContextAttention::AllToAll})
            if ((cp > 1 || attention == ContextAttention::Ring) &&
                (cp == 1 || attention != ContextAttention::Ring ||
                 model.seq % (2 * cp) == 0) &&
                (!constraints.cpAttention || cp == 1 ||
                 *constraints.cpAttention == attention))
              degrees.push_back({tp, cp, pp, dp, ep, attention});
        }
      }
    }
  }
  // ZeRO reduce-scatters: no all-reduce for a sync to run.
  const bool syncFixed =
      (constraints.gradSync &&
       *constraints.gradSync != runtime::GradSync::Library) ||
      constraints.dpSyncEvery.value_or(1) > 1;
  for (const Degrees &d : degrees) {
    anyDegrees = true;
    if (setup.globalBatch % d.dp != 0)
      continue;
    anyBatch = true;
    for (int64_t mbs : divisorsOf(setup.globalBatch / d.dp)) {
      if (!allowed(constraints.microbatchSize, mbs) ||
          (!constraints.microbatchSize && mbs > 16))
        continue;
      int64_t m = setup.globalBatch / d.dp / mbs;
      if (!allowed(constraints.microbatches, m))
        continue;
      llvm::SmallVector<std::pair<ScheduleKind, int64_t>> schedules;
      if (d.pp == 1) {
        schedules.push_back({ScheduleKind::OneFOneB, 1});
      } else {
        schedules.push_back({ScheduleKind::GPipe, 1});
        schedules.push_back({ScheduleKind::OneFOneB, 1});
        schedules.push_back({ScheduleKind::ZeroBubbleH1, 1});
        // A pinned number of chunks is priced whatever it is.
        llvm::SmallVector<int64_t> chunks = {2, 3, 4, 6, 8};
        if (constraints.virtualStages && *constraints.virtualStages > 1)
          chunks = {*constraints.virtualStages};
        for (int64_t v : chunks)
          if (m % d.pp == 0 && d.pp * v <= model.layers &&
              model.layers % (d.pp * v) == 0)
            schedules.push_back({ScheduleKind::Interleaved, v});
      }
      for (auto [kind, v] : schedules) {
        if ((constraints.schedule && *constraints.schedule != kind) ||
            !allowed(constraints.virtualStages, v))
          continue;
        for (int zero = 0; zero <= 3; ++zero) {
          if ((zero > 0 && (d.dp == d.ep || syncFixed)) ||
              !allowed(constraints.zero, zero))
            continue;
          for (Recompute recompute :
               {Recompute::None, Recompute::Selective, Recompute::Full}) {
            if ((constraints.recompute &&
                 *constraints.recompute != recompute) ||
                (recompute == Recompute::Selective &&
                 !constraints.selectiveRecompute))
              continue;
            for (bool sp : {false, true}) {
              if ((sp && d.tp == 1) || (constraints.sequenceParallel &&
                                        *constraints.sequenceParallel != sp))
                continue;
              Plan plan;
              plan.dp = d.dp;
              plan.tp = d.tp;
              plan.pp = d.pp;
              plan.microbatchSize = mbs;
              plan.microbatches = m;
              plan.schedule = kind;
              plan.virtualStages = v;
              plan.zero = zero;
              plan.recompute = recompute;
              plan.sequenceParallel = sp;
              plan.gradSync = constraints.gradSync;
              plan.dpSyncEvery = constraints.dpSyncEvery.value_or(1);
              plan.cp = d.cp;
              plan.cpAttention = d.cpAttention;
              plan.ep = d.ep;
              std::string error;
              std::optional<Prediction> p =
                  predict(model, cluster, setup, plan, error);
              ++result.evaluated;
              if (!p) {
                if (firstError.empty())
                  firstError = error;
                continue;
              }
              (p->fits ? result.fitting : result.tooLarge).push_back(*p);
            }
          }
        }
      }
    }
  }
  // A pinned ep the model cannot take: say why.
  if (constraints.ep && result.fitting.empty() && result.tooLarge.empty()) {
    Plan probe;
    probe.ep = *constraints.ep;
    probe.dp = constraints.dp.value_or(*constraints.ep);
    probe.zero = int(constraints.zero.value_or(0));
    probe.gradSync = constraints.gradSync;
    probe.dpSyncEvery = constraints.dpSyncEvery.value_or(1);
    probe.cp = constraints.cp.value_or(1);
    std::string why = expertParallelError(model, probe);
    if (!why.empty())
      result.reasons.push_back(why);
  }
  // Equally fast: the one that holds less first.
  llvm::sort(result.fitting, [](const Prediction &a, const Prediction &b) {
    return std::make_pair(a.stepTime(), a.memory.total()) <
           std::make_pair(b.stepTime(), b.memory.total());
  });
  llvm::sort(result.tooLarge, [](const Prediction &a, const Prediction &b) {
    return a.memory.total() < b.memory.total();
  });
  const TensorParallelProfile *fixedTp =
      constraints.tp ? model.find(*constraints.tp, false) : nullptr;
  if (!anyDegrees && constraints.tp && !fixedTp) {
    std::string prefix = "tp=" + std::to_string(*constraints.tp) + ":";
    for (const std::string &why : model.rejectedDegrees)
      if (llvm::StringRef(why).starts_with(prefix))
        result.reasons.push_back(why);
  }
  if (!anyDegrees && result.reasons.empty())
    result.reasons.push_back(
        formatv("no dp·tp·pp·cp makes {0} GPUs with the constraints given (tp "
                "must be a profiled degree, pp at most the {1} layers, ep a "
                "divisor of dp)",
                gpus, model.layers));
  else if (!anyBatch)
    result.reasons.push_back(formatv(
        "the global batch of {0} is not divisible by any possible "
        "data-parallel degree (dp = {1} GPUs / (tp·pp·cp), with pp at most the "
        "{2} layers)",
        setup.globalBatch, gpus, model.layers));
  else if (result.evaluated == 0 ||
           (result.fitting.empty() && result.tooLarge.empty()))
    result.reasons.push_back(
        firstError.empty() ? "no plan satisfies the constraints" : firstError);
  return result;
}

namespace {

/// One choice of a plan, as the text of its value ("tp=8").
using Choice = std::string (*)(const Plan &);

std::string describe(const std::string &choice, const Plan &plan,
                     const Cluster &cluster) {
  if (choice.rfind("tp=", 0) == 0 && plan.tp > cluster.gpusPerNode)
    return choice + " (across nodes)";
  if (choice.rfind("pp=", 0) == 0 && plan.pp > 1 &&
      plan.tp * plan.cp * plan.dp < cluster.gpusPerNode)
    return choice + " (inside a node)";
  return choice;
}

/// The largest differences of `loser` over `best`, by component.
std::string whyLost(const Prediction &loser, const Prediction &best) {
  const TimeBreakdown &a = loser.time, &b = best.time;
  std::vector<std::pair<double, const char *>> deltas = {
      {a.compute - b.compute, "compute"},
      {a.bubble - b.bubble, "pipeline bubble"},
      {a.tensorParallel - b.tensorParallel, "tensor-parallel collectives"},
      {a.pipelineSends - b.pipelineSends, "pipeline sends"},
      {a.dataParallel - b.dataParallel, "gradient reduction"},
      {a.zeroGathers - b.zeroGathers, "ZeRO-3 gathers"},
      {a.contextParallel - b.contextParallel, "context-parallel messages"},
      {a.expertParallel - b.expertParallel, "expert all-to-alls"},
      {a.coreSharing - b.coreSharing, "ranks sharing cores"},
      {a.optimizer - b.optimizer, "optimizer"}};
  llvm::sort(deltas, [](auto &x, auto &y) { return x.first > y.first; });
  std::string out =
      formatv("{0:F2}x slower", loser.stepTime() / best.stepTime()).str();
  int shown = 0;
  for (auto &[delta, name] : deltas) {
    if (delta <= 0.02 * best.stepTime() || shown == 2)
      break;
    out +=
        (shown++ ? ", " : ": ") + formatv("{0} +{1:F3} s", name, delta).str();
  }
  if (shown == 0)
    out += ": no part of the step more than 2% longer";
  return out;
}

} // namespace

std::string placement(const Plan &plan, const Cluster &cluster) {
  auto where = [&](int64_t stride, int64_t size) {
    if (size == 1)
      return "";
    return stride * size <= cluster.gpusPerNode ? " inside a node"
           : stride >= cluster.gpusPerNode      ? " across nodes"
                                                : " inside and across nodes";
  };
  std::string cp =
      plan.cp > 1
          ? formatv(", cp={0}{1}", plan.cp, where(plan.tp, plan.cp)).str()
          : "";
  std::string ep = plan.ep > 1 ? formatv(" (experts over ep={0}{1})", plan.ep,
                                         where(plan.tp * plan.cp, plan.ep))
                                     .str()
                               : "";
  return formatv("tp={0}{1}{2}, dp={3}{4}{5}, pp={6}{7}", plan.tp,
                 where(1, plan.tp), cp, plan.dp,
                 where(plan.tp * plan.cp, plan.dp), ep, plan.pp,
                 where(plan.tp * plan.cp * plan.dp, plan.pp))
      .str();
}

std::vector<std::string> explain(const SearchResult &result,
                                 const Cluster &cluster) {
  std::vector<std::string> lines;
  if (result.fitting.empty())
    return lines;
  const Prediction &best = result.fitting.front();
  const Choice choices[] = {
      [](const Plan &p) { return "tp=" + std::to_string(p.tp); },
      [](const Plan &p) { return "pp=" + std::to_string(p.pp); },
      [](const Plan &p) { return "dp=" + std::to_string(p.dp); },
      [](const Plan &p) { return "mbs=" + std::to_string(p.microbatchSize); },
      [](const Plan &p) {
        return std::string("schedule=") + pipeline::scheduleName(p.schedule) +
               (p.virtualStages > 1 ? ",v=" + std::to_string(p.virtualStages)
                                    : "");
      },
      [](const Plan &p) { return "zero=" + std::to_string(p.zero); },
      [](const Plan &p) {
        return std::string("recompute=") + recomputeName(p.recompute);
      },
      [](const Plan &p) {
        return std::string("sp=") + (p.sequenceParallel ? "1" : "0");
      },
      [](const Plan &p) {
        return "cp=" + std::to_string(p.cp) +
               (p.cp > 1 ? std::string(",cp_attention=") +
                               contextAttentionName(p.cpAttention)
                         : "");
      },
      [](const Plan &p) { return "ep=" + std::to_string(p.ep); }};
  // The placement first: what tensor parallelism across nodes, and no
  // pipeline, would have cost.
  auto fastestWhere = [&](auto predicate) -> const Prediction * {
    for (const Prediction &p : result.fitting)
      if (predicate(p.plan))
        return &p;
    return nullptr;
  };
  const Plan &plan = best.plan;
  if (plan.tp > 1 && plan.tp <= cluster.gpusPerNode) {
    if (const Prediction *across = fastestWhere(
            [&](const Plan &p) { return p.tp > cluster.gpusPerNode; }))
      lines.push_back(formatv("tensor parallelism stays inside a node "
                              "(tp={0}, {1}): the best plan with tp across "
                              "nodes (tp={2}, {3}) is {4}",
                              plan.tp, "NVLink", across->plan.tp,
                              cluster.interFabric, whyLost(*across, best))
                          .str());
  }
  if (plan.pp > 1 && plan.tp * plan.cp * plan.dp >= cluster.gpusPerNode) {
    std::string line =
        formatv("the pipeline crosses nodes (pp={0}): its "
                "sends cost {1:F3} s and its bubble {2:F3} s",
                plan.pp, best.time.pipelineSends, best.time.bubble)
            .str();
    if (const Prediction *flat =
            fastestWhere([](const Plan &p) { return p.pp == 1; }))
      line += ", while the best plan without one is " + whyLost(*flat, best);
    else
      line += ", and no plan without one fits in memory";
    lines.push_back(line);
  }
  if (!best.gradSyncTimes.empty()) {
    runtime::GradSync chosen =
        best.plan.gradSync.value_or(runtime::GradSync::Library);
    std::string line = formatv("gradient sync={0}: its all-reduces take "
                               "{1:F3} s a step",
                               runtime::gradSyncName(chosen),
                               best.gradSyncTimes[int(chosen)].second)
                           .str();
    std::string others;
    for (auto &[sync, seconds] : best.gradSyncTimes)
      if (sync != chosen)
        others += formatv("{0}{1} {2:F3} s", others.empty() ? "" : ", ",
                          runtime::gradSyncName(sync), seconds)
                      .str();
    lines.push_back(line + " (" + others + ")" +
                    (cluster.cpuRanks()
                         ? "; CPU ranks keep the library's (measured by "
                           "weft-calibrate) unless sync= is pinned"
                         : ""));
  }
  for (Choice choice : choices) {
    std::string chosen = choice(best.plan);
    // The first fitting plan of each other value is its fastest; the first
    // too-large one its smallest.
    std::map<std::string, const Prediction *> fastest, smallest;
    for (const Prediction &p : result.fitting)
      fastest.insert({choice(p.plan), &p});
    for (const Prediction &p : result.tooLarge)
      smallest.insert({choice(p.plan), &p});
    std::vector<std::string> values;
    for (auto &[value, p] : fastest)
      values.push_back(value);
    for (auto &[value, p] : smallest)
      if (!fastest.count(value))
        values.push_back(value);
    // Numbers in numeric order: "tp=2" before "tp=16".
    llvm::sort(values, [](const std::string &a, const std::string &b) {
      return std::make_pair(a.size(), a) < std::make_pair(b.size(), b);
    });
    for (const std::string &value : values) {
      if (value == chosen)
        continue;
      auto it = fastest.find(value);
      const Prediction &p =
          it != fastest.end() ? *it->second : *smallest.at(value);
      std::string line = describe(value, p.plan, cluster) + ": ";
      if (it != fastest.end())
        line += whyLost(p, best);
      else
        line += formatv("out of memory: its smallest plan needs {0:F1} GiB "
                        "per GPU, {1:F1} GiB usable",
                        p.memory.total() / (1u << 30),
                        p.memoryCapacity / (1u << 30))
                    .str();
      line += " (" + p.plan.str() + ")";
      lines.push_back(line);
    }
  }
  return lines;
}

} // namespace weft::planner
