//===- Pipeline.cpp - The lowering every target starts with ---------------===//

#include "weft/Lowering/Pipeline.h"

std::string weft::bufferizedLinalgPipeline(const LoweringOptions &options) {
  // A partitioned program's shard ops become runtime calls: coordinates and
  // slices here, collectives in bufferization; the second run drops the mesh.
  std::string pipeline = "convert-weft-to-linalg,convert-shard-to-weft-runtime,"
                         "canonicalize,cse,";
  if (options.optLevel > 0)
    pipeline += "weft-fuse-elementwise,canonicalize,";
  // After the last tensor-level CSE, which would merge the copies back.
  if (options.recompute != "none")
    pipeline += "weft-recompute{mode=" + options.recompute +
                " loss-function=" + options.lossFunction + "},";
  // Results become out-params that the caller (the runtime) allocates;
  // temporaries live in one planned arena, freed by the ownership-based
  // deallocation.
  pipeline += "one-shot-bufferize{bufferize-function-boundaries "
              "function-boundary-type-conversion=identity-layout-map},"
              "convert-shard-to-weft-runtime,weft-distinct-results,"
              "buffer-results-to-out-params{modify-public-functions "
              "hoist-static-allocs},"
              "canonicalize,weft-fold-transposes,"
              "weft-plan-buffers{free-arena=false},"
              "buffer-deallocation-pipeline,canonicalize,";
  return pipeline;
}
