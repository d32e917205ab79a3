// RUN: weft-opt %s -split-input-file -verify-diagnostics --weft-shard-presets="mesh=dp=2 parallel=megatron"
// RUN: not weft-opt %s --weft-shard-presets="mesh=dp=2,dp=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not weft-opt %s --weft-shard-presets="mesh=dp=0" 2>&1 | FileCheck %s --check-prefix=SIZE
// RUN: not weft-opt %s --weft-shard-presets="mesh=tp=2 parallel=zero" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not weft-opt %s --weft-shard-presets="mesh=dp=2,tp=2 parallel=dp" 2>&1 | FileCheck %s --check-prefix=UNUSED

// TWICE: mesh axis 'dp' appears twice
// SIZE: bad mesh axis 'dp=0' (expected NAME=SIZE with SIZE >= 1)
// UNKNOWN: unknown parallel strategy 'zero' (expected dp, megatron, cp or ep)
// UNUSED: error: mesh axis 'tp' (size 2) is used by no strategy, so its ranks would all compute the same step: add its strategy to --parallel (dp: dp, tp: megatron, cp: cp, ep: ep; pp pipelines) or drop the axis

// expected-error @below {{strategy 'megatron' needs a mesh axis named 'tp'}}
module {
  func.func @f(%x: tensor<2x4xf32> {weft.input = "x"}) -> tensor<2x4xf32> attributes {weft.outputs = ["y"]} {
    return %x : tensor<2x4xf32>
  }
}
