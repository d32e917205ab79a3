//===- HtmlReport.h - A compiled program as one HTML page -------*- C++ -*-===//
//
// `weftc --report=html` and the Python package's Report.to_html(): the mesh,
// every parameter's sharding, the collectives per layer, memory per rank,
// the pipeline timeline, the planner's choices and, given the Chrome trace
// of a run (weft-run --trace), compute and communication per rank. One
// self-contained file: inline SVG and CSS, no script, nothing fetched.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_COMPILER_HTMLREPORT_H
#define WEFT_COMPILER_HTMLREPORT_H

#include "weft/Compiler/Compiler.h"
#include "weft/Planner/CostModel.h"

#include <optional>
#include <string>
#include <vector>

namespace weft {

/// Where each rank's traced steps went.
struct TraceSummary {
  std::string path;
  struct Track {
    std::string name; // "rank 3 (pp 1, dp 1)"
    int64_t steps = 0;
    double stepSeconds = 0;
    /// Sends, receives and collectives inside the steps.
    double communicationSeconds = 0;
  };
  std::vector<Track> tracks; // by rank
};

/// Reads a Chrome trace written by `weft-run --trace`; std::nullopt with a
/// one-line `error` naming the file when it cannot.
std::optional<TraceSummary> summarizeTrace(const std::string &path,
                                           std::string &error);

/// The report of `result`, a whole HTML document; `trace` may be null. A
/// CUDA program's kernels are priced on `gpu` (null: an H200).
std::string renderHtmlReport(const CompileResult &result,
                             const TraceSummary *trace,
                             const planner::Gpu *gpu = nullptr);

} // namespace weft

#endif // WEFT_COMPILER_HTMLREPORT_H
