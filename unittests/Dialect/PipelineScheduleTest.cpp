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
