//===- Trainer.h - The training loop of a compiled training step -*- C++
//-*-===//

#ifndef WEFT_RUNTIME_TRAINER_H
#define WEFT_RUNTIME_TRAINER_H

#include "weft/runtime/CApi.h"
#include "weft/runtime/Collectives.h"

#include <cstdint>
#include <map>
#include <string>

namespace weft::runtime {

struct TrainOptions {
  std::string data; // little-endian uint16 tokens
  int64_t steps = 100;
  double lr = 3e-4;   // peak learning rate
  double minLr = -1;  // end of the cosine decay (default lr / 10)
  int64_t warmup = 0; // steps of linear warmup
  uint64_t seed = 1;  // batches depend on the seed and the step only
  std::string log;    // metrics, one JSON object per step
  int64_t printEvery = 10;
  std::string checkpointDir; // where checkpoints go (and --resume looks)
  int64_t saveEvery = 0;     // steps between checkpoints; 0: at the end only
  bool resume = false;       // continue from the latest checkpoint
  std::string resumeFrom;    // or from this checkpoint directory
  bool seedGiven = false;    // --seed was passed (else a resume keeps it)
  double peakTflops = 0;     // one rank's peak, for MFU (0: estimated)
  std::string trace;         // a Chrome trace of every step (weft/Trace.h)
  /// Print, and log, what the device did in each step (weft_device_stats;
  /// rank 0's): bytes each way, synchronizations, launches, allocations,
  /// graph replays.
  bool deviceStats = false;
  /// >= 0: the parameters start from this seed, GPT-2 style (no weights
  /// file): matrices normal(0, 0.02), residual projections (c_proj, o_proj,
  /// out_proj, down_proj) scaled by 1/sqrt(2 layers), norm scales 1, biases
  /// 0. Each parameter is drawn whole from the seed and its name, then
  /// split, so every mesh starts from the same model.
  int64_t initSeed = -1;
  /// From the manifest (weftc --dp-sync every=K): the replicas over the
  /// mesh axes in `averageAxes` step alone, and their parameters and
  /// optimizer state are averaged every `averageEvery` steps and after the
  /// last (1: never; the step sums the gradients).
  int64_t averageEvery = 1;
  int64_t averageAxes = 0;
  /// Each checkpoint of such a run also keeps every replica's own model,
  /// before the average, as `<checkpointDir>/replica-R/step-NNNNNNN` (R:
  /// the replica's position along the averaged axes, row-major).
  bool saveReplicas = false;
  /// The step's other inputs (an attention mask, token types, positions),
  /// by name: tensor files fed unchanged to every step.
  std::map<std::string, std::string> fixedInputs;
};

/// Runs `options.steps` training steps of `model` (compiled with
/// `weftc --train`) as this rank of `world`. Rank 0 prints and logs.
/// Returns the process exit code; errors are one line naming the rank.
int train(weft_model *model, void (*entry)(void **), World &world,
          const TrainOptions &options);

} // namespace weft::runtime

#endif // WEFT_RUNTIME_TRAINER_H
