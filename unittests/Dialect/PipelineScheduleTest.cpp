//===- PipelineScheduleTest.cpp - Pipeline schedules ----------------------===//

#include "weft/Dialect/Weft/Transforms/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>

using namespace weft::pipeline;

namespace {

// Every valid (p, m, v) of every schedule: the sends and receives match,
// each rank runs each micro-batch's forward and backward once per chunk,
// the idle fraction is (p-1)/(v*m+p-1) for uniform stages, and 1F1B keeps
// at most p - rank micro-batches in flight.
TEST(PipelineSchedule, EverySmallScheduleIsSoundAndMatchesTheFormula) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::Interleaved})
    for (int64_t p = 1; p <= 5; ++p)
      for (int64_t m = 1; m <= 10; ++m)
        for (int64_t v = 1; v <= 3; ++v) {
          std::string error;
          std::optional<Schedule> schedule =
              buildSchedule(kind, p, m, v, error);
          bool valid = kind == ScheduleKind::Interleaved
                           ? v >= 2 && m % p == 0
                           : v == 1;
          ASSERT_EQ(schedule.has_value(), valid) << error;
          if (!schedule)
            continue;
          ASSERT_TRUE(checkSchedule(*schedule, error))
              << scheduleName(kind) << " p=" << p << " m=" << m << " v=" << v
              << ": " << error;
          for (const std::vector<Instruction> &rank : schedule->ranks) {
            std::set<std::tuple<bool, int64_t, int64_t>> seen;
            for (const Instruction &in : rank)
              if (in.kind == Instruction::Forward ||
                  in.kind == Instruction::Backward)
                EXPECT_TRUE(seen.insert({in.kind == Instruction::Forward,
                                         in.microbatch, in.chunk})
                                .second);
            EXPECT_EQ(int64_t(seen.size()), 2 * m * v);
          }
          Timeline timeline = simulate(*schedule);
          double formula = double(p - 1) / double(v * m + p - 1);
          EXPECT_NEAR(timeline.idleFraction[0], formula, 1e-9)
              << scheduleName(kind) << " p=" << p << " m=" << m << " v=" << v;
          if (kind == ScheduleKind::OneFOneB)
            for (int64_t rank = 0; rank < p; ++rank)
              EXPECT_LE(timeline.peakInFlight[rank], std::min(p - rank, m));
          if (kind == ScheduleKind::GPipe)
            EXPECT_EQ(timeline.peakInFlight[0], m);
        }
}

// ZB-H1: sound for every small (p, m); each micro-batch's forward,
// backward and weight-gradient pass once per rank, the weights after the
// backward; with the three passes of one unit each and m >= p its bubble
// is (p-1) units, a third of 1F1B's (less than 1F1B's for any m), with at
// most `rank` micro-batches more in flight than 1F1B (the deferred weight
// passes).
TEST(PipelineSchedule, ZeroBubbleH1IdlesAThirdOf1F1B) {
  for (int64_t p = 1; p <= 5; ++p)
    for (int64_t m = 1; m <= 10; ++m) {
      std::string error;
      std::optional<Schedule> schedule =
          buildSchedule(ScheduleKind::ZeroBubbleH1, p, m, 1, error);
      ASSERT_TRUE(schedule) << error;
      ASSERT_TRUE(checkSchedule(*schedule, error))
          << "p=" << p << " m=" << m << ": " << error;
      for (const std::vector<Instruction> &rank : schedule->ranks) {
        std::set<std::pair<Instruction::Kind, int64_t>> seen;
        std::set<int64_t> backwards;
        for (const Instruction &in : rank) {
          if (in.kind == Instruction::Backward)
            backwards.insert(in.microbatch);
          if (in.kind == Instruction::BackwardWeight)
            EXPECT_TRUE(backwards.count(in.microbatch));
          if (in.kind == Instruction::Forward ||
              in.kind == Instruction::Backward ||
              in.kind == Instruction::BackwardWeight)
            EXPECT_TRUE(seen.insert({in.kind, in.microbatch}).second);
        }
        EXPECT_EQ(int64_t(seen.size()), 3 * m);
      }
      Timeline timeline = simulate(*schedule);
      // With fewer micro-batches than stages too few weight passes are
      // deferred to fill the bubble.
      if (m >= p)
        EXPECT_NEAR(timeline.idleFraction[0],
                    double(p - 1) / double(3 * m + p - 1), 1e-9)
            << "p=" << p << " m=" << m;
      std::optional<Schedule> oneFOneB =
          buildSchedule(ScheduleKind::OneFOneB, p, m, 1, error);
      if (p > 1)
        EXPECT_LT(timeline.idleFraction[0],
                  simulate(*oneFOneB).idleFraction[0]);
      for (int64_t rank = 0; rank < p; ++rank)
        EXPECT_LE(timeline.peakInFlight[rank], std::min(p - rank, m) + rank);
    }
}

// The checker is not a formality: two receives swapped on one rank are
// caught, and so is a receive with no send.
TEST(PipelineSchedule, CheckerCatchesMismatchedAndMissingMessages) {
  std::string error;
  std::optional<Schedule> schedule =
      buildSchedule(ScheduleKind::OneFOneB, 2, 4, 1, error);
  ASSERT_TRUE(schedule);
  Schedule swapped = *schedule;
  std::vector<Instruction> &rank1 = swapped.ranks[1];
  std::vector<size_t> receives;
  for (size_t i = 0; i < rank1.size(); ++i)
    if (rank1[i].kind == Instruction::RecvActivation)
      receives.push_back(i);
  ASSERT_GE(receives.size(), 2u);
  std::swap(rank1[receives[0]].microbatch, rank1[receives[1]].microbatch);
  EXPECT_FALSE(checkSchedule(swapped, error));
  EXPECT_NE(error.find("rank 1 expects the activation of micro-batch"),
            std::string::npos)
      << error;

  // Without the last activation send, rank 1 waits for it forever.
  Schedule missing = *schedule;
  std::vector<Instruction> &rank0 = missing.ranks[0];
  for (size_t i = rank0.size(); i-- > 0;)
    if (rank0[i].kind == Instruction::SendActivation) {
      rank0.erase(rank0.begin() + i);
      break;
    }
  EXPECT_FALSE(checkSchedule(missing, error));
  EXPECT_NE(error.find("deadlock"), std::string::npos) << error;
}

} // namespace
