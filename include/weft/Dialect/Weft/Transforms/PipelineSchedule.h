//===- PipelineSchedule.h - Static per-rank pipeline schedules --*- C++ -*-===//
//
// A pipeline-parallel training step runs, on each of the p stages (ranks of
// the `pp` mesh axis), a fixed list of instructions: the forward and
// backward pass of one micro-batch on one model chunk, the sends and
// receives of activations and their gradients between neighbouring stages,
// and the optimizer step. This file builds those lists for the GPipe, 1F1B
// (PipeDream-flush), interleaved (Megatron-LM, v model chunks per rank)
// and ZB-H1 (zero-bubble, the backward split into its input-gradient and
// weight-gradient passes) schedules, proves that every receive meets its
// send in order, and simulates the timeline.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_TRANSFORMS_PIPELINESCHEDULE_H
#define WEFT_DIALECT_WEFT_TRANSFORMS_PIPELINESCHEDULE_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::pipeline {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubbleH1 };

/// "gpipe", "1f1b", "interleaved" or "zb-h1".
std::optional<ScheduleKind> parseScheduleKind(const std::string &name);
const char *scheduleName(ScheduleKind kind);

struct Instruction {
  enum Kind {
    Forward,
    /// The whole backward pass, or under ZB-H1 its input-gradient part
    /// (what the previous stage waits for).
    Backward,
    /// ZB-H1: the weight-gradient part of a backward pass, run later.
    BackwardWeight,
    SendActivation,
    RecvActivation,
    SendGradient,
    RecvGradient,
    OptimizerStep
  };
  Kind kind;
  int64_t microbatch = 0;
  /// The model chunk on this rank (0 unless interleaved).
  int64_t chunk = 0;
  /// The other rank of a send or receive.
  int64_t peer = 0;
};

struct Schedule {
  ScheduleKind kind;
  int64_t stages = 1;        // p
  int64_t microbatches = 1;  // m
  int64_t virtualStages = 1; // v: model chunks per rank
  std::vector<std::vector<Instruction>> ranks;
};

/// Builds the instruction lists. Fails with a one-line `error` when the
/// numbers do not fit the schedule (interleaved needs v >= 2 and m a
/// multiple of p; the others v = 1).
std::optional<Schedule> buildSchedule(ScheduleKind kind, int64_t stages,
                                      int64_t microbatches,
                                      int64_t virtualStages,
                                      std::string &error);

/// Runs every rank's list against the others, sends buffered and receives
/// blocking: succeeds when all finish, each receive taking the message its
/// peer sent next on that channel; otherwise `error` names the rank and
/// instruction that would block forever or receive the wrong message.
bool checkSchedule(const Schedule &schedule, std::string &error);

/// Whether the schedule splits each backward pass in two (ZB-H1).
bool splitsBackward(ScheduleKind kind);

/// The timeline with forward = 1 and backward = 2 time units (split: 1 for
/// the input gradient, 1 for the weights) and free communication: each
/// rank's busy slots and its idle fraction.
struct Timeline {
  int64_t length = 0;
  std::vector<std::string> rows; // per rank, one character per time unit
  std::vector<double> idleFraction;
  /// Most micro-batches a rank holds activations of at once (from the
  /// forward to the end of the backward, both parts).
  std::vector<int64_t> peakInFlight;
};
Timeline simulate(const Schedule &schedule);

/// One line per rank: the instructions in order ("F3" forward of
/// micro-batch 3, "B3", "W3" its weight gradients under ZB-H1, "F3.1"
/// chunk 1 when interleaved), then the timeline and the idle fractions.
std::string drawSchedule(const Schedule &schedule);

} // namespace weft::pipeline

#endif // WEFT_DIALECT_WEFT_TRANSFORMS_PIPELINESCHEDULE_H
