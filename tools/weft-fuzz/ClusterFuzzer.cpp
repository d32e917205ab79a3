//===- ClusterFuzzer.cpp - Fuzzes the planner's cluster-file readers ------===//
//
// An input is a cluster description: YAML when its first byte is odd, JSON
// otherwise (the byte is dropped).
//
//===----------------------------------------------------------------------===//

#include "FuzzInput.h"
#include "weft/Planner/CostModel.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  std::string text(reinterpret_cast<const char *>(data) + 1, size - 1);
  std::string error;
  std::optional<weft::planner::Cluster> cluster =
      data[0] & 1 ? weft::planner::Cluster::parseYAML(text, error)
                  : weft::planner::Cluster::parseJSON(text, error);
  if (cluster)
    (void)cluster->interNode();
  weft::fuzz::report(error);
  return 0;
}
