// RUN: weft-opt %s -split-input-file -weft-split-stages="stages=2 boundaries=1" -verify-diagnostics | FileCheck %s --check-prefix=HAND
// RUN: weft-opt %s -split-input-file -weft-split-stages="stages=2" -verify-diagnostics | FileCheck %s --check-prefix=BALANCED
// RUN: not weft-opt %s -split-input-file -weft-split-stages="stages=2 boundaries=3" 2>&1 | FileCheck %s --check-prefix=BEYOND
// RUN: not weft-opt %s -split-input-file -weft-split-stages="stages=4" 2>&1 | FileCheck %s --check-prefix=TOOMANY

// Three layers (h.0 small, h.1 and h.2 four times wider) between an
// embedding and a head that reuses the embedding's table (tied weights).
// By hand (boundaries=1): h.0 is stage 0, h.1 and h.2 stage 1. Balanced by
// contraction FLOPs, the cut goes after h.1 instead. The embedding lookup
// is stage 0, the head the last stage, and the table is tied.
// HAND-LABEL: func.func @model
// HAND-SAME: weft.pipeline = {boundaries = array<i64: 1>, stages = 2 : i64, tied = ["emb"]}
// HAND: weft.gather {{.*}}weft.stage = 0
// HAND: weft.linear %{{.*}}, %arg2 {{.*}}weft.stage = 0
// HAND: weft.linear %{{.*}}, %arg3 {{.*}}weft.stage = 1
// HAND: weft.linear %{{.*}}, %arg4 {{.*}}weft.stage = 1
// HAND: weft.matmul {{.*}}weft.stage = 1
// BALANCED-LABEL: func.func @model
// BALANCED-SAME: weft.pipeline = {boundaries = array<i64: 2>, stages = 2 : i64, tied = ["emb"]}
// BALANCED: weft.linear %{{.*}}, %arg3 {{.*}}weft.stage = 0
// BALANCED: weft.linear %{{.*}}, %arg4 {{.*}}weft.stage = 1
// BEYOND: error: weft-split-stages: stage boundary 3 is beyond the 3 layers (/h.0 .. /h.2)
// TOOMANY: error: weft-split-stages: cannot split 3 layers into 4 stages
func.func @model(%ids: tensor<2x4xi64> {weft.input = "input_ids"},
                 %emb: tensor<16x8xf32> {weft.param = "emb"},
                 %w0: tensor<8x8xf32> {weft.param = "h.0.w"},
                 %w1: tensor<8x32xf32> {weft.param = "h.1.w"},
                 %w2: tensor<32x8xf32> {weft.param = "h.2.w"}) -> tensor<2x4x16xf32> {
  %x = weft.gather %emb, %ids <{axis = 0}> : tensor<16x8xf32>, tensor<2x4xi64> loc("/emb/Gather")
  %h0 = weft.linear %x, %w0 : tensor<2x4x8xf32>, tensor<8x8xf32> loc("/h.0/fc/MatMul")
  %h1 = weft.linear %h0, %w1 : tensor<2x4x8xf32>, tensor<8x32xf32> loc("/h.1/fc/MatMul")
  %h2 = weft.linear %h1, %w2 : tensor<2x4x32xf32>, tensor<32x8xf32> loc("/h.2/fc/MatMul")
  %t = weft.transpose %emb <{permutation = array<i64: 1, 0>}> : tensor<16x8xf32> loc("/head/Transpose")
  %logits = weft.matmul %h2, %t : tensor<2x4x8xf32>, tensor<8x16xf32> loc("/head/MatMul")
  return %logits : tensor<2x4x16xf32>
}
