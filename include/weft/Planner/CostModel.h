//===- CostModel.h - Time and memory of a parallel training step -*- C++
//-*-===//
//
// The planner's formulas: a cluster (GPUs, NVLink inside a node, InfiniBand
// or RoCE between nodes), α-β times of collectives for ring, tree and
// hierarchical algorithms, the pipeline bubble of each schedule, and the
// memory a rank holds (model state by ZeRO stage, activations per layer
// with and without recomputation and sequence parallelism). Every formula
// is checked by unittests/Planner/CostModelTest.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_PLANNER_COSTMODEL_H
#define WEFT_PLANNER_COSTMODEL_H

#include "weft/Dialect/Weft/Transforms/PipelineSchedule.h"
#include "weft/runtime/Contract.h"

#include <cstdint>

namespace llvm::json {
class Value;
} // namespace llvm::json
#include <optional>
#include <string>
#include <vector>

namespace weft::planner {

/// One link class as the α-β model sees it: a message of S bytes takes
/// latency + S / bandwidth.
struct Link {
  double bandwidth = 0; // bytes per second, one direction, per GPU
  double latency = 0;   // seconds
};

struct Gpu {
  std::string model;
  double peakBf16 = 0, peakFp16 = 0, peakFp32 = 0; // FLOP/s (dense)
  double memoryBytes = 0;
  double memoryBandwidth = 0; // bytes per second
  /// Seconds each op costs beyond its roofline (a CPU backend's loop and
  /// thread start-up); 0 on GPUs, whose launches overlap the kernels.
  double opOverhead = 0;
  /// A cache an op's data may fit in (0: none modelled), and its bandwidth.
  double cacheBytes = 0, cacheBandwidth = 0;
  /// Streaming multiprocessors: a kernel of fewer blocks leaves some idle.
  int64_t multiprocessors = 0;
  /// Dense TF32 tensor-core FLOP/s (f32 GEMMs where TF32 is allowed).
  double peakTf32 = 0;
};

/// Which fraction of a peak work reaches: constants of the cost model, 1 for
/// a cluster whose peaks were measured (cpu-local).
struct Efficiency {
  double contraction = 0.75; // large GEMMs and fused attention
  double memory = 0.7;       // elementwise work against memory bandwidth
  /// Of the roofline that elementwise ops and reductions reach: on a CPU,
  /// compiled loops run slower than their bytes allow (calibrated).
  double elementwise = 1.0;
  /// Of the roofline the optimizer's update reaches: one long streaming
  /// loop over the parameters and their state (calibrated apart).
  double update = 1.0;
  double usableMemory = 0.9; // the rest: allocator and workspace
};

struct Cluster {
  std::string name;
  int64_t nodes = 1;
  int64_t gpusPerNode = 1;
  Gpu gpu;
  /// NVLink / NVSwitch: what one GPU can send to the others of its node.
  Link intraNode;
  /// "infiniband", "roce" or "ddc" (a disaggregated chassis: a scheduled
  /// cell fabric, non-blocking for every traffic pattern, which its
  /// oversubscription does not apply to).
  std::string interFabric = "infiniband";
  int64_t nicsPerNode = 0;
  double nicBandwidth = 0; // bytes per second per NIC
  double interLatency = 0; // seconds
  /// Fat-tree oversubscription (1: full bisection). A rail-optimized
  /// network keeps each GPU's traffic on its own rail, where it is not
  /// oversubscribed.
  double oversubscription = 1;
  bool railOptimized = false;
  /// Whether the data-parallel gradient reduction runs while the last
  /// micro-batch's backward pass computes (NCCL on its own stream); Weft's
  /// MPI runtime reduces after the backward pass.
  bool overlapGradientReduction = true;
  /// CPU ranks share the node's cores (0: each rank owns its device), each
  /// running `threadsPerRank` threads.
  int64_t coresPerNode = 0;
  int64_t threadsPerRank = 1;
  /// Whether attention runs as fused kernels forward and backward
  /// (FlashAttention, cuDNN or Transformer Engine's): score tensors never
  /// reach HBM. The published A100 runs the model was checked on predate
  /// them; the Hopper presets have them.
  bool fusedAttention = false;
  /// The latency of one send between pipeline stages when it differs from
  /// a collective step's (0: the link's).
  double sendLatency = 0;
  /// With more busy ranks than cores, a collective step's latency when
  /// every rank is busy (the intra-node latency is a pair's, the others
  /// idle); 0: no such effect.
  double contendedLatency = 0;
  Efficiency efficiency;

  int64_t gpus() const { return nodes * gpusPerNode; }
  /// Whether the "GPUs" are ranks of Weft's CPU backend (their ops cost a
  /// loop's start-up: Gpu::opOverhead).
  bool cpuRanks() const { return gpu.opOverhead > 0; }
  /// What one GPU's traffic to other nodes gets: its share of the node's
  /// NICs, divided by the oversubscription unless rail-optimized.
  Link interNode() const;
  /// The same for all-to-all traffic, which leaves each GPU's rail: the
  /// oversubscription applies even when rail-optimized (not on a DDC).
  Link interNodeAllToAll() const;

  /// `dgx-a100-80g`, `dgx-h100`, `h200` (each of `nodes` nodes).
  static std::optional<Cluster> preset(const std::string &name, int64_t nodes);
  /// A JSON description (see docs/planner.md); `error` names the field.
  static std::optional<Cluster> parseJSON(const std::string &text,
                                          std::string &error);
  /// The same description in YAML.
  static std::optional<Cluster> parseYAML(const std::string &text,
                                          std::string &error);
  /// Where `cpu-local`'s measured description lives: $WEFT_CPU_LOCAL, else
  /// $XDG_CACHE_HOME (or ~/.cache)/weft/cpu-local.json.
  static std::string cpuLocalPath();
  /// A preset by name (`cpu-local`: the file weft-calibrate wrote), else a
  /// description file (.json, else YAML).
  static std::optional<Cluster> load(const std::string &nameOrPath,
                                     int64_t nodes, std::string &error);

private:
  static std::optional<Cluster> fromDescription(const llvm::json::Value &value,
                                                std::string &error);
};

enum class Collective {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  SendRecv
};
enum class Algorithm { Ring, Tree };

/// The α-β time of one collective over `ranks` ranks on `link`. `bytes` is
/// the whole tensor: the all-reduced buffer, the gathered result, the
/// reduce-scattered input, the all-to-all buffer, the message sent.
///   ring all-reduce: 2(n-1) α + 2 (n-1)/n S/β
///   ring all-gather, reduce-scatter, all-to-all: (n-1) α + (n-1)/n S/β
///   tree all-reduce (a reduce then a broadcast down pipelined binary
///   trees): 2 ceil(log2 n) α + 2 S/β
///   send/recv: α + S/β
double collectiveTime(Collective kind, Algorithm algorithm, double bytes,
                      int64_t ranks, const Link &link);

/// A hierarchical all-reduce over `local` ranks per node times `nodes`
/// nodes: reduce-scatter inside each node, all-reduce of each 1/local
/// piece across the nodes (ring), all-gather inside each node.
double hierarchicalAllReduceTime(double bytes, int64_t local, int64_t nodes,
                                 const Link &intra, const Link &inter);

/// A collective over a group of `local` ranks on each of `nodes` nodes, as
/// the planner prices a data-parallel group: within one node on its link;
/// one rank a node, a ring across nodes; both, an all-reduce is
/// hierarchical and a gather or scatter its piece inside the node, then
/// across the nodes. A send-recv crosses nodes when there are several, with
/// the cluster's send latency where it has one (as pipeline sends).
double groupCollectiveTime(const Cluster &cluster, Collective kind,
                           double bytes, int64_t local, int64_t nodes);

/// The all-reduce of `bytes` over `local` ranks on each of `nodes` nodes
/// by one of the runtime's gradient algorithms (weftc --grad-sync):
///   library: groupCollectiveTime's (what NCCL or MPI choose)
///   ring: one ring over every rank, on the slowest link it crosses
///   tree: collectiveTime's tree on that link
///   ps: every rank pushes each slice to its owner and pulls the sums
///       back, n-1 messages each way: 2 ((n-1) α + max(intra, inter)), the
///       slices bound for other nodes ((n - local)/n S) going all-to-all
///       across them, those for its node ((local-1)/n S) over NVLink
///   hierarchical: hierarchicalAllReduceTime (a ring when one level is 1)
double gradientSyncTime(const Cluster &cluster, runtime::GradSync sync,
                        double bytes, int64_t local, int64_t nodes);

/// The fraction of a step a rank idles in the pipeline's bubble:
/// (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v m+p-1) interleaved,
/// (p-1)/(3m+p-1) ZB-H1 (m >= p).
double bubbleFraction(pipeline::ScheduleKind kind, int64_t stages,
                      int64_t microbatches, int64_t virtualStages);

/// The most micro-batches' activations the first stage holds at once, in
/// whole micro-batches of its layers: m under GPipe, min(p, m) under 1F1B
/// and ZB-H1 (whose first stage defers no weight pass);
/// interleaved, its warm-up plus one, (p-1)·2 + (v-1)·p + 1 forwards of
/// one chunk (1/v of its layers) each, at most v·m: that count over v.
double microbatchesInFlight(pipeline::ScheduleKind kind, int64_t stages,
                            int64_t microbatches, int64_t virtualStages);

/// Bytes per parameter of each kind of model state.
struct StateBytes {
  double weights = 4; // the parameters as the step reads them
  double gradients = 4;
  double optimizer = 8; // Adam's two moments (plus f32 master weights
                        // under mixed precision: 12)
};

struct MemoryBreakdown {
  double weights = 0, gradients = 0, optimizer = 0, activations = 0;
  double total() const { return weights + gradients + optimizer + activations; }
};

/// The model state one rank holds: `parameters` split over tp·pp, then
/// over dp for the optimizer state (ZeRO-1), the gradients too (ZeRO-2)
/// and the weights too (ZeRO-3).
MemoryBreakdown modelState(double parameters, const StateBytes &bytes,
                           int zeroStage, int64_t dp, int64_t tp, int64_t pp);

enum class Recompute { None, Selective, Full };

/// Activation bytes one transformer layer keeps for its backward pass, per
/// micro-batch, with 16-bit activations (Korthikanti et al., "Reducing
/// Activation Recomputation in Large Transformer Models", 2022): with
/// sequence length s, micro-batch b, hidden h, a heads, tensor parallelism
/// t,
///   none:                  s b h (10 + 24/t + 5 a s / (h t))
///   none, sequence-par.:   s b h / t (34 + 5 a s / h)
///   selective:             s b h (10 + 24/t)  (s b h 34 / t with sequence
///                          parallelism): the attention scores are recomputed
///   full:                  2 s b h (the layer's input; / t with sequence
///                          parallelism)
double activationBytesPerLayer(int64_t seq, int64_t microbatch, int64_t hidden,
                               int64_t heads, int64_t tp, bool sequenceParallel,
                               Recompute recompute);

/// Roofline time of work of `flops` and `bytes` at `efficiency` of the
/// peak: max(flops / (peak efficiency), bytes / bandwidth).
double rooflineTime(double flops, double bytes, double peakFlops,
                    double memoryBandwidth, double efficiency);

} // namespace weft::planner

#endif // WEFT_PLANNER_COSTMODEL_H
