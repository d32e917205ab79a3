//===- PipelineSchedule.cpp - Static per-rank pipeline schedules ----------===//
//
// Virtual stage s = chunk * p + rank: with v chunks per rank the model is
// cut into p * v stages dealt round-robin over the ranks, so consecutive
// stages always sit on neighbouring ranks.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/Transforms/PipelineSchedule.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <sstream>
#include <tuple>

namespace weft::pipeline {
namespace {

struct ComputeOp {
  Instruction::Kind kind;
  int64_t microbatch;
  int64_t chunk;
};

/// The order in which rank `rank` runs its forward and backward passes.
std::vector<ComputeOp> computeOrder(ScheduleKind kind, int64_t p, int64_t m,
                                    int64_t v, int64_t rank) {
  std::vector<ComputeOp> order;
  if (kind == ScheduleKind::GPipe) {
    for (int64_t mb = 0; mb < m; ++mb)
      order.push_back({Instruction::Forward, mb, 0});
    for (int64_t mb = 0; mb < m; ++mb)
      order.push_back({Instruction::Backward, mb, 0});
    return order;
  }
  if (kind == ScheduleKind::ZeroBubbleH1) {
    // 1F1B's order with each backward split (Qi et al., "Zero Bubble
    // Pipeline Parallelism", 2023, ZB-H1): rank r defers its first r
    // weight-gradient passes, then runs one after each backward, and
    // the deferred ones last, where 1F1B idles waiting for gradients.
    int64_t forwards = 0, backwards = 0, weights = 0;
    for (; forwards < std::min(p - rank - 1, m); ++forwards)
      order.push_back({Instruction::Forward, forwards, 0});
    while (backwards < m) {
      if (forwards < m)
        order.push_back({Instruction::Forward, forwards++, 0});
      order.push_back({Instruction::Backward, backwards++, 0});
      if (backwards - weights > rank)
        order.push_back({Instruction::BackwardWeight, weights++, 0});
    }
    while (weights < m)
      order.push_back({Instruction::BackwardWeight, weights++, 0});
    return order;
  }
  // 1F1B and its interleaved form: a warmup of forwards, then one forward
  // and one backward in turn, then the remaining backwards. The k-th
  // forward (backward) of a rank runs micro-batch `mb` on chunk `chunk`:
  // groups of p micro-batches go through the chunks in turn (backwards
  // through them in reverse).
  int64_t total = m * v;
  auto forwardOp = [&](int64_t k) -> ComputeOp {
    int64_t within = k % (p * v);
    return {Instruction::Forward, k / (p * v) * p + within % p, within / p};
  };
  auto backwardOp = [&](int64_t k) -> ComputeOp {
    int64_t within = k % (p * v);
    return {Instruction::Backward, k / (p * v) * p + within % p,
            v - 1 - within / p};
  };
  int64_t warmup = kind == ScheduleKind::OneFOneB
                       ? std::min(p - rank - 1, m)
                       : std::min((p - rank - 1) * 2 + (v - 1) * p, total);
  int64_t forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards)
    order.push_back(forwardOp(forwards));
  while (forwards < total) {
    order.push_back(forwardOp(forwards++));
    order.push_back(backwardOp(backwards++));
  }
  while (backwards < total)
    order.push_back(backwardOp(backwards++));
  return order;
}

/// A message on a channel: the micro-batch and the stage it is for.
using Message = std::pair<int64_t, int64_t>;
/// (from, to, gradient?)
using Channel = std::tuple<int64_t, int64_t, bool>;

const char *kindName(Instruction::Kind kind) {
  switch (kind) {
  case Instruction::Forward:
    return "forward";
  case Instruction::Backward:
    return "backward";
  case Instruction::BackwardWeight:
    return "weight-gradient pass";
  case Instruction::SendActivation:
    return "send of the activation";
  case Instruction::RecvActivation:
    return "receive of the activation";
  case Instruction::SendGradient:
    return "send of the gradient";
  case Instruction::RecvGradient:
    return "receive of the gradient";
  case Instruction::OptimizerStep:
    return "optimizer step";
  }
  return "?";
}

} // namespace

std::optional<ScheduleKind> parseScheduleKind(const std::string &name) {
  if (name == "gpipe")
    return ScheduleKind::GPipe;
  if (name == "1f1b")
    return ScheduleKind::OneFOneB;
  if (name == "interleaved")
    return ScheduleKind::Interleaved;
  if (name == "zb-h1")
    return ScheduleKind::ZeroBubbleH1;
  return std::nullopt;
}

bool splitsBackward(ScheduleKind kind) {
  return kind == ScheduleKind::ZeroBubbleH1;
}

const char *scheduleName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved:
    return "interleaved";
  case ScheduleKind::ZeroBubbleH1:
    return "zb-h1";
  }
  return "?";
}

std::optional<Schedule> buildSchedule(ScheduleKind kind, int64_t stages,
                                      int64_t microbatches,
                                      int64_t virtualStages,
                                      std::string &error) {
  int64_t p = stages, m = microbatches, v = virtualStages;
  if (p < 1 || m < 1 || v < 1) {
    error = "a pipeline needs at least 1 stage, 1 micro-batch and 1 "
            "virtual stage (got " +
            std::to_string(p) + ", " + std::to_string(m) + ", " +
            std::to_string(v) + ")";
    return std::nullopt;
  }
  if (kind != ScheduleKind::Interleaved && v != 1) {
    error = std::string("--virtual-stages ") + std::to_string(v) +
            " needs --schedule interleaved (" + scheduleName(kind) +
            " runs one model chunk per rank)";
    return std::nullopt;
  }
  if (kind == ScheduleKind::Interleaved && v < 2) {
    error = "the interleaved schedule needs --virtual-stages 2 or more";
    return std::nullopt;
  }
  if (kind == ScheduleKind::Interleaved && m % p != 0) {
    error = "the interleaved schedule needs the micro-batches (" +
            std::to_string(m) + ") to be a multiple of the pipeline stages (" +
            std::to_string(p) + ")";
    return std::nullopt;
  }
  Schedule schedule{kind, p, m, v, {}};
  int64_t last = p * v - 1;
  for (int64_t rank = 0; rank < p; ++rank) {
    std::vector<Instruction> &list = schedule.ranks.emplace_back();
    for (const ComputeOp &op : computeOrder(kind, p, m, v, rank)) {
      int64_t stage = op.chunk * p + rank;
      int64_t previous = (stage + p - 1) % p, next = (stage + 1) % p;
      if (op.kind == Instruction::BackwardWeight) {
        list.push_back(
            {Instruction::BackwardWeight, op.microbatch, op.chunk, 0});
      } else if (op.kind == Instruction::Forward) {
        if (stage > 0 && previous != rank)
          list.push_back({Instruction::RecvActivation, op.microbatch,
                          op.chunk, previous});
        list.push_back({Instruction::Forward, op.microbatch, op.chunk, 0});
        if (stage < last && next != rank)
          list.push_back(
              {Instruction::SendActivation, op.microbatch, op.chunk, next});
      } else {
        if (stage < last && next != rank)
          list.push_back(
              {Instruction::RecvGradient, op.microbatch, op.chunk, next});
        list.push_back({Instruction::Backward, op.microbatch, op.chunk, 0});
        if (stage > 0 && previous != rank)
          list.push_back({Instruction::SendGradient, op.microbatch, op.chunk,
                          previous});
      }
    }
    list.push_back({Instruction::OptimizerStep, 0, 0, 0});
  }
  return schedule;
}

bool checkSchedule(const Schedule &schedule, std::string &error) {
  int64_t p = schedule.stages;
  std::map<Channel, std::deque<Message>> channels;
  std::vector<size_t> next(p, 0);
  auto done = [&] {
    for (int64_t rank = 0; rank < p; ++rank)
      if (next[rank] < schedule.ranks[rank].size())
        return false;
    return true;
  };
  while (!done()) {
    bool progress = false;
    for (int64_t rank = 0; rank < p; ++rank) {
      const std::vector<Instruction> &list = schedule.ranks[rank];
      while (next[rank] < list.size()) {
        const Instruction &in = list[next[rank]];
        int64_t stage = in.chunk * p + rank;
        bool gradient = in.kind == Instruction::SendGradient ||
                        in.kind == Instruction::RecvGradient;
        if (in.kind == Instruction::SendActivation ||
            in.kind == Instruction::SendGradient) {
          int64_t to = gradient ? stage - 1 : stage + 1;
          channels[{rank, in.peer, gradient}].push_back({in.microbatch, to});
        } else if (in.kind == Instruction::RecvActivation ||
                   in.kind == Instruction::RecvGradient) {
          std::deque<Message> &queue = channels[{in.peer, rank, gradient}];
          if (queue.empty())
            break; // blocked for now
          if (queue.front() != Message{in.microbatch, stage}) {
            error = "rank " + std::to_string(rank) + " expects the " +
                    (gradient ? "gradient" : "activation") +
                    " of micro-batch " + std::to_string(in.microbatch) +
                    " for stage " + std::to_string(stage) + " from rank " +
                    std::to_string(in.peer) + ", which sends micro-batch " +
                    std::to_string(queue.front().first) + " for stage " +
                    std::to_string(queue.front().second) + " first";
            return false;
          }
          queue.pop_front();
        }
        ++next[rank];
        progress = true;
      }
    }
    if (!progress) {
      error = "deadlock:";
      for (int64_t rank = 0; rank < p; ++rank)
        if (next[rank] < schedule.ranks[rank].size()) {
          const Instruction &in = schedule.ranks[rank][next[rank]];
          error += " rank " + std::to_string(rank) + " waits in its " +
                   kindName(in.kind) + " of micro-batch " +
                   std::to_string(in.microbatch) + " from rank " +
                   std::to_string(in.peer) + ";";
        }
      error.pop_back();
      return false;
    }
  }
  for (auto &[channel, queue] : channels)
    if (!queue.empty()) {
      error = "rank " + std::to_string(std::get<0>(channel)) + " sends " +
              std::to_string(queue.size()) + " message(s) rank " +
              std::to_string(std::get<1>(channel)) + " never receives";
      return false;
    }
  return true;
}

Timeline simulate(const Schedule &schedule) {
  int64_t p = schedule.stages, m = schedule.microbatches,
          v = schedule.virtualStages, stages = p * v;
  bool split = splitsBackward(schedule.kind);
  const int64_t kForward = 1, kBackward = split ? 1 : 2, kWeights = 1;
  // Finish times by [stage][micro-batch]; -1 while not run.
  std::vector<std::vector<int64_t>> forwardDone(
      stages, std::vector<int64_t>(m, -1));
  std::vector<std::vector<int64_t>> backwardDone = forwardDone;
  std::vector<size_t> next(p, 0);
  std::vector<int64_t> free(p, 0);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> busy(p); // start, end
  std::vector<std::vector<char>> kinds(p);
  Timeline timeline;
  timeline.peakInFlight.assign(p, 0);
  std::vector<int64_t> inFlight(p, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t rank = 0; rank < p; ++rank) {
      const std::vector<Instruction> &list = schedule.ranks[rank];
      while (next[rank] < list.size()) {
        const Instruction &in = list[next[rank]];
        if (in.kind != Instruction::Forward &&
            in.kind != Instruction::Backward &&
            in.kind != Instruction::BackwardWeight) {
          ++next[rank];
          continue;
        }
        int64_t stage = in.chunk * p + rank;
        bool forward = in.kind == Instruction::Forward;
        if (in.kind == Instruction::BackwardWeight) {
          // After its own backward, which ran earlier on this rank.
          int64_t start = free[rank];
          busy[rank].push_back({start, start + kWeights});
          kinds[rank].push_back('W');
          free[rank] = start + kWeights;
          --inFlight[rank];
          ++next[rank];
          progress = true;
          continue;
        }
        int64_t ready = 0;
        if (forward && stage > 0)
          ready = forwardDone[stage - 1][in.microbatch];
        if (!forward)
          ready = stage + 1 < stages
                      ? backwardDone[stage + 1][in.microbatch]
                      : forwardDone[stage][in.microbatch];
        if (ready < 0)
          break; // its input is not computed yet
        int64_t start = std::max(free[rank], ready);
        int64_t end = start + (forward ? kForward : kBackward);
        (forward ? forwardDone : backwardDone)[stage][in.microbatch] = end;
        busy[rank].push_back({start, end});
        kinds[rank].push_back(forward ? 'F' : 'B');
        free[rank] = end;
        inFlight[rank] += forward ? 1 : split ? 0 : -1;
        timeline.peakInFlight[rank] =
            std::max(timeline.peakInFlight[rank], inFlight[rank]);
        ++next[rank];
        progress = true;
      }
    }
  }
  for (int64_t rank = 0; rank < p; ++rank)
    timeline.length = std::max(timeline.length, free[rank]);
  for (int64_t rank = 0; rank < p; ++rank) {
    std::string row(timeline.length, '.');
    int64_t used = 0;
    for (size_t i = 0; i < busy[rank].size(); ++i) {
      auto [start, end] = busy[rank][i];
      for (int64_t t = start; t < end; ++t)
        row[t] = kinds[rank][i];
      used += end - start;
    }
    timeline.rows.push_back(row);
    timeline.idleFraction.push_back(
        timeline.length ? 1.0 - double(used) / double(timeline.length) : 0);
  }
  return timeline;
}

std::string drawSchedule(const Schedule &schedule) {
  std::ostringstream out;
  int64_t p = schedule.stages, m = schedule.microbatches,
          v = schedule.virtualStages;
  out << "schedule " << scheduleName(schedule.kind) << ": " << p
      << " stages, " << m << " micro-batches";
  if (v > 1)
    out << ", " << v << " virtual stages per rank";
  out << "\n";
  for (int64_t rank = 0; rank < p; ++rank) {
    out << "rank " << rank << ":";
    for (const Instruction &in : schedule.ranks[rank]) {
      if (in.kind != Instruction::Forward && in.kind != Instruction::Backward &&
          in.kind != Instruction::BackwardWeight)
        continue;
      out << " "
          << (in.kind == Instruction::Forward    ? 'F'
              : in.kind == Instruction::Backward ? 'B'
                                                 : 'W')
          << in.microbatch;
      if (v > 1)
        out << "." << in.chunk;
    }
    out << "\n";
  }
  Timeline timeline = simulate(schedule);
  out << (splitsBackward(schedule.kind)
              ? "timeline (F = 1 unit, B = 1, W = 1, '.' idle):\n"
              : "timeline (F = 1 unit, B = 2, '.' idle):\n");
  for (int64_t rank = 0; rank < p; ++rank)
    out << "rank " << rank << ": " << timeline.rows[rank] << "\n";
  char line[160];
  if (splitsBackward(schedule.kind))
    snprintf(line, sizeof(line),
             "idle fraction: rank 0 %.3f; formula (p-1)/(3m+p-1) = %.3f "
             "(m >= p)\n",
             timeline.idleFraction[0], double(p - 1) / double(3 * m + p - 1));
  else
    snprintf(line, sizeof(line),
             "idle fraction: rank 0 %.3f; formula (p-1)/(v*m+p-1) = %.3f\n",
             timeline.idleFraction[0], double(p - 1) / double(m * v + p - 1));
  out << line;
  out << "micro-batches in flight (peak):";
  for (int64_t rank = 0; rank < p; ++rank)
    out << " rank " << rank << " " << timeline.peakInFlight[rank]
        << (rank + 1 < p ? "," : "\n");
  return out.str();
}

} // namespace weft::pipeline
