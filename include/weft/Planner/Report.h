//===- Report.h - Print the planner's predictions ---------------*- C++ -*-===//

#ifndef WEFT_PLANNER_REPORT_H
#define WEFT_PLANNER_REPORT_H

#include "weft/Planner/Planner.h"

#include "llvm/Support/raw_ostream.h"

namespace weft::planner {

/// The model and cluster in one line each.
void printSummary(const ModelProfile &model, const Cluster &cluster,
                  const TrainingSetup &setup, llvm::raw_ostream &os);

/// A table of the `top` fastest fitting plans (all if 0), then the best
/// plan's memory and time by category.
void printPlans(const SearchResult &result, const Cluster &cluster, size_t top,
                llvm::raw_ostream &os);

/// Every field of the `top` fastest fitting plans (all if 0) as JSON.
void printJSON(const ModelProfile &model, const Cluster &cluster,
               const TrainingSetup &setup, const SearchResult &result,
               size_t top, llvm::raw_ostream &os);

/// The one-line error for a search that found no fitting plan: the reason
/// no plan exists, or the smallest memory a plan would need.
std::string noPlanMessage(const SearchResult &result, const Cluster &cluster);

} // namespace weft::planner

#endif // WEFT_PLANNER_REPORT_H
