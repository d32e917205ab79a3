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

std::string weft::hostLoopsToLLVMPipeline(bool openMP) {
  return std::string(
             "func.func(math-extend-to-supported-types),weft-approximate-math,"
             "lower-affine,expand-strided-metadata,lower-affine,"
             "finalize-memref-to-llvm{use-generic-functions},"
             "convert-scf-to-cf,convert-math-to-llvm,convert-math-to-libm,"
             // No bf16 arithmetic or conversion is left for LLVM, which
             // would call compiler-runtime functions that Debian 12's GCC
             // lacks.
             "func.func(arith-emulate-unsupported-floats{source-types=bf16 "
             "target-type=f32}),"
             "weft-expand-bf16-conversions,"
             "convert-arith-to-llvm,convert-index-to-llvm,"
             "finalize-memref-to-llvm{use-generic-functions},"
             "convert-cf-to-llvm,convert-func-to-llvm,") +
         (openMP ? "convert-openmp-to-llvm," : "") +
         "reconcile-unrealized-casts";
}
