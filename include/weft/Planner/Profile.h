//===- Profile.h - What a training step costs, read from its IR -*- C++ -*-===//
//
// The planner does not guess a model's work: it derives the training step
// with the compiler's own passes, partitions it for each tensor-parallel
// degree with the Megatron presets, and reads every op's FLOPs and bytes
// and every collective the partitioner inserted, grouped by transformer
// layer (from the op's location) and phase (forward, backward, update).
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_PLANNER_PROFILE_H
#define WEFT_PLANNER_PROFILE_H

#include "weft/Planner/CostModel.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::planner {

/// The work of one op of a rank (elements, not bytes: the planner chooses
/// the precision).
struct OpWork {
  double flops = 0;
  double elements = 0; // read and written
  bool contraction = false;
  /// Of `elements`, those of attention score tensors ([..., s, t], the
  /// query and key lengths of an attention): a fused attention kernel
  /// keeps them on chip (Cluster::fusedAttention).
  double scoreElements = 0;
  /// Of `elements`, those of stacked expert weights and their gradients:
  /// they do not grow with the batch, and expert parallelism divides them.
  double expertWeightElements = 0;
};

struct CollectiveWork {
  Collective kind;
  double elements = 0; // as collectiveTime counts them
};

/// Ops of one part of the step on one rank, for the IR's batch.
struct Work {
  std::vector<OpWork> ops;
  std::vector<CollectiveWork> collectives;
};

/// One tensor-parallel degree (with or without sequence parallelism).
struct TensorParallelProfile {
  int64_t tp = 1;
  bool sequenceParallel = false;
  /// Of one layer (the first; layers repeat): forward, backward, and the
  /// attention cores' forward (what selective recomputation repeats).
  Work layerForward, layerBackward, layerAttention;
  /// Outside the layers: before the first (the embedding) and after the
  /// last (final norm, head, loss), forward and backward.
  Work preForward, preBackward, postForward, postBackward;
  /// The optimizer step over all local parameters of the IR.
  Work update;
  /// Local parameter elements: per layer, and of the ops before and after
  /// the layers (a weight both use, tied embeddings, counts in both).
  double layerParameters = 0, preParameters = 0, postParameters = 0;
  /// Of `layerParameters`, the experts' stacked weights
  /// (isStackedExpertWeight).
  double layerExpertParameters = 0;
  double updateParameters = 0; // what `update` updates
  /// Local parameter elements outside the layers (counted once).
  double otherParameters = 0;
};

/// A model as the planner sees it.
struct ModelProfile {
  std::string name;
  int64_t layers = 0; // the model's, possibly more than the profiled IR's
  int64_t batch = 1;  // the IR's (its work scales with it)
  int64_t seq = 0, hidden = 0, heads = 0, vocab = 0;
  int64_t kvHeads = 0; // key/value heads (fewer than heads under GQA)
  bool causal = false; // its self-attention is causal
  double parameters = 0;
  /// Contraction FLOPs of one forward pass of `batch` sequences.
  double forwardFlops = 0;
  std::vector<TensorParallelProfile> tensorParallel;
  /// A mixture of experts: the experts of a layer (0: a dense model), and
  /// a layer's all-to-alls over ep (dispatch and combine, forward and
  /// backward) as the partitioner inserts them, for the IR's batch on one
  /// rank. `expertError`: the partitioner's error when they could not be
  /// profiled.
  int64_t experts = 0;
  Work expertForward, expertBackward;
  std::string expertError;
  /// Why a degree could not be profiled: "tp=16: ...", "ep=2: ...".
  std::vector<std::string> rejectedDegrees;

  const TensorParallelProfile *find(int64_t tp, bool sequenceParallel) const;
};

/// Profiles the forward function `main` of `module` (not modified) for the
/// tensor-parallel degrees `degrees`, each with and without sequence
/// parallelism, and a mixture of experts at ep=2. `modelLayers` (when larger
/// than the IR's) is the depth the plans are for: a synthetic model is profiled
/// at a depth of two.
std::optional<ModelProfile> profileModel(mlir::ModuleOp module,
                                         const std::vector<int64_t> &degrees,
                                         int64_t modelLayers,
                                         std::string &error);

} // namespace weft::planner

#endif // WEFT_PLANNER_PROFILE_H
