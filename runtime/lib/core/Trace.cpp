//===- Trace.cpp - A timeline of a rank's training steps ------------------===//

#include "weft/runtime/Trace.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

namespace weft::runtime::trace {
namespace {

bool tracing = false;
/// kind, start, end, a, b.
std::vector<std::array<double, 5>> records;

const char *collectiveName(int64_t kind) {
  switch (kind) {
  case 0:
    return "all_reduce";
  case 1:
    return "all_gather";
  case 2:
    return "reduce_scatter";
  case 3:
    return "all_to_all";
  default:
    return "shift";
  }
}

/// One rank's records as Chrome trace events on track `tid`.
void writeRank(FILE *out, int tid, std::vector<std::array<double, 5>> rank,
               double origin, bool &first) {
  std::sort(rank.begin(), rank.end(),
            [](const auto &x, const auto &y) { return x[1] < y[1]; });
  auto event = [&](const char *name, const char *category, double start,
                   double end, const std::string &args) {
    fprintf(out,
            "%s\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": "
            "0, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {%s}}",
            first ? "" : ",", name, category, tid, (start - origin) * 1e6,
            std::max(0.0, end - start) * 1e6, args.c_str());
    first = false;
  };
  char name[64], args[128];
  for (size_t i = 0; i < rank.size(); ++i) {
    const auto &r = rank[i];
    auto kind = Kind(int64_t(r[0]));
    switch (kind) {
    case Kind::Step: {
      snprintf(name, sizeof(name), "step %lld", (long long)r[3]);
      event(name, "step", r[1], r[2], "");
      // The instructions: from each mark to the next one or the step's end.
      double previous = r[1];
      std::string previousName = "prologue";
      std::string previousArgs;
      std::string previousCategory = "prologue";
      for (size_t j = i + 1; j < rank.size() && rank[j][1] <= r[2]; ++j) {
        auto markKind = Kind(int64_t(rank[j][0]));
        if (markKind != Kind::Forward && markKind != Kind::Backward &&
            markKind != Kind::Optimizer)
          continue;
        event(previousName.c_str(), previousCategory.c_str(), previous,
              rank[j][1], previousArgs);
        previous = rank[j][1];
        if (markKind == Kind::Optimizer) {
          previousName = "optimizer";
          previousCategory = "optimizer";
          previousArgs.clear();
          continue;
        }
        bool forward = markKind == Kind::Forward;
        // "F3": micro-batch 3; "F3 c1" on chunk 1 (interleaved).
        snprintf(name, sizeof(name), rank[j][3] ? "%s%lld c%lld" : "%s%lld",
                 forward ? "F" : "B", (long long)rank[j][4],
                 (long long)rank[j][3]);
        previousName = name;
        previousCategory = forward ? "forward" : "backward";
        snprintf(args, sizeof(args), "\"chunk\": %lld, \"microbatch\": %lld",
                 (long long)rank[j][3], (long long)rank[j][4]);
        previousArgs = args;
      }
      event(previousName.c_str(), previousCategory.c_str(), previous, r[2],
            previousArgs);
      break;
    }
    case Kind::Send:
    case Kind::Recv:
      snprintf(args, sizeof(args), "\"peer\": %lld, \"bytes\": %lld",
               (long long)r[3], (long long)r[4]);
      event(kind == Kind::Send ? "send" : "recv",
            kind == Kind::Send ? "send" : "recv", r[1], r[2], args);
      break;
    case Kind::Collective:
      snprintf(args, sizeof(args), "\"bytes\": %lld", (long long)r[4]);
      event(collectiveName(int64_t(r[3])), "collective", r[1], r[2], args);
      break;
    default:
      break;
    }
  }
}

} // namespace

bool enabled() { return tracing; }
void enable() { tracing = true; }

double now() {
  // CLOCK_MONOTONIC: one clock for all processes of a machine.
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void record(Kind kind, double start, double end, int64_t a, int64_t b) {
  if (tracing)
    records.push_back(
        {double(int64_t(kind)), start, end, double(a), double(b)});
}

bool write(const std::string &path, Communicator &everyone,
           const std::string &trackName, std::string &error) {
  int ranks = everyone.size();
  int64_t count = int64_t(records.size());
  std::vector<int64_t> counts(ranks);
  everyone.allGather(&count, counts.data(), 1, WEFT_I64);
  int64_t most = *std::max_element(counts.begin(), counts.end());
  std::vector<double> mine(most * 5, 0), all(most * 5 * ranks);
  for (size_t i = 0; i < records.size(); ++i)
    std::copy(records[i].begin(), records[i].end(), mine.begin() + i * 5);
  everyone.allGather(mine.data(), all.data(), most * 5, WEFT_F64);
  char name[96] = {};
  strncpy(name, trackName.c_str(), sizeof(name) - 1);
  std::vector<char> names(sizeof(name) * ranks);
  everyone.allGather(name, names.data(), sizeof(name), WEFT_BOOL);
  if (everyone.rank() != 0)
    return true;
  FILE *out = fopen(path.c_str(), "w");
  if (!out) {
    error = "cannot write the trace '" + path + "'";
    return false;
  }
  double origin = 1e300;
  for (int r = 0; r < ranks; ++r)
    for (int64_t i = 0; i < counts[r]; ++i)
      origin = std::min(origin, all[(r * most + i) * 5 + 1]);
  fprintf(out, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [");
  bool first = true;
  for (int r = 0; r < ranks; ++r) {
    fprintf(out,
            "%s\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, "
            "\"tid\": %d, \"args\": {\"name\": \"%s\"}}",
            first ? "" : ",", r, names.data() + r * sizeof(name));
    first = false;
    std::vector<std::array<double, 5>> rank(counts[r]);
    for (int64_t i = 0; i < counts[r]; ++i)
      std::copy_n(all.begin() + (r * most + i) * 5, 5, rank[i].begin());
    writeRank(out, r, std::move(rank), origin, first);
  }
  fprintf(out, "\n]}\n");
  bool ok = fclose(out) == 0;
  if (!ok)
    error = "cannot write the trace '" + path + "'";
  return ok;
}

} // namespace weft::runtime::trace
