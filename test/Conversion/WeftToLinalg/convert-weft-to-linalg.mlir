// RUN: weft-opt %s -split-input-file -convert-weft-to-linalg | FileCheck %s
// RUN: weft-opt %s -split-input-file -convert-weft-to-linalg | FileCheck %s --check-prefix=NOWEFT

// No weft op survives the conversion.
// NOWEFT-NOT: weft.

// Broadcasting is an indexing map that reads index 0 (or skips the dim).
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[COL:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-LABEL: func.func @broadcast_add
// CHECK: linalg.generic {indexing_maps = [#[[ROW]], #[[COL]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK: arith.addf
func.func @broadcast_add(%a: tensor<3xf32>, %b: tensor<2x1xf32>) -> tensor<2x3xf32> {
  %0 = weft.add %a, %b : tensor<3xf32>, tensor<2x1xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// A contraction: one reduction loop, multiply-accumulate body, zero init.
// CHECK-LABEL: func.func @batched_matmul
// CHECK: linalg.fill
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK: arith.mulf
// CHECK: arith.addf
func.func @batched_matmul(%a: tensor<4x2x3xf32>, %b: tensor<3x5xf32>) -> tensor<4x2x5xf32> {
  %0 = weft.matmul %a, %b : tensor<4x2x3xf32>, tensor<3x5xf32>
  return %0 : tensor<4x2x5xf32>
}

// -----

// Softmax: max, exp(x - max), sum, divide.
// CHECK-LABEL: func.func @softmax
// CHECK: arith.maxnumf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: arith.divf
func.func @softmax(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = weft.softmax %x {axis = 1} : tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Grouped-query attention reads key/value head h floordiv group.
// CHECK-DAG: #[[KV:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 2, d3, d4)>
// CHECK-LABEL: func.func @gqa_attention
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[KV]], #{{.*}}]
// CHECK: arith.select
func.func @gqa_attention(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) -> tensor<1x4x3x8xf32> {
  %0 = weft.attention %q, %k, %v <{causal}> : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
  return %0 : tensor<1x4x3x8xf32>
}

// -----

// Reshapes go through a 1-D collapse and expand.
// CHECK-LABEL: func.func @reshape
// CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0, 1, 2]] : tensor<2x3x4xf32> into tensor<24xf32>
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1]] output_shape [6, 4] : tensor<24xf32> into tensor<6x4xf32>
func.func @reshape(%x: tensor<2x3x4xf32>) -> tensor<6x4xf32> {
  %0 = weft.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// -----

// A gather reads the table with tensor.extract at the (wrapped) index.
// CHECK-LABEL: func.func @gather
// CHECK: arith.index_cast
// CHECK: arith.select
// CHECK: tensor.extract
func.func @gather(%t: tensor<10x4xf32>, %i: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  %0 = weft.gather %t, %i <{axis = 0}> : tensor<10x4xf32>, tensor<2x3xi64>
  return %0 : tensor<2x3x4xf32>
}
