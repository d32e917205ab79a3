//===- Pipelines.cpp - Named Weft pass pipelines --------------------------===//

#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void weft::buildFuseIdiomsPipeline(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  // Exporters repeat subexpressions (x - mean twice); patterns want one.
  pm.addPass(createCSEPass());
  // Layer norm first: an RMS norm of a centered input is a layer norm.
  pm.addPass(createWeftFuseLayerNorm());
  pm.addPass(createWeftFuseRmsNorm());
  pm.addPass(createWeftFuseGelu());
  pm.addPass(createWeftFuseAttention());
  // After attention is fused: merges sink through it.
  pm.addPass(createWeftSinkReshapes());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void weft::buildSPMDPipeline(OpPassManager &pm,
                             const SPMDPipelineOptions &options) {
  WeftShardPresetsOptions presets;
  presets.mesh = options.mesh;
  presets.parallel.assign(options.parallel.begin(), options.parallel.end());
  presets.sequenceParallel = options.sequenceParallel;
  presets.zero = options.zero;
  presets.contextAttention = options.contextAttention;
  pm.addPass(createWeftShardPresets(presets));
  pm.addPass(createWeftPropagateSharding({options.padUneven}));
  pm.addPass(createWeftPartition());
  pm.addPass(createWeftMergeReductions());
  if (options.localReplicas)
    pm.addPass(createWeftLocalReplicas());
  if (options.bucketMb > 0) {
    pm.addPass(createWeftBucketCollectives({options.bucketMb}));
    pm.addPass(createCanonicalizerPass());
  }
}

void weft::registerWeftPipelines() {
  PassPipelineRegistration<>(
      "weft-fuse-idioms",
      "Canonicalize, replace exporter idioms (layer norm, RMS norm, GELU, "
      "attention) by fused weft ops and keep merged head dims apart",
      buildFuseIdiomsPipeline);
  PassPipelineRegistration<SPMDPipelineOptions>(
      "weft-spmd",
      "Partition for a device mesh: preset shardings, propagation, "
      "partitioning into explicit collectives, merged reductions, bucketing",
      buildSPMDPipeline);
}
