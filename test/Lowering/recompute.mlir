// RUN: weft-opt %s -split-input-file -weft-recompute=mode=selective | FileCheck %s --check-prefix=SELECTIVE
// RUN: weft-opt %s -split-input-file -weft-recompute=mode=full | FileCheck %s --check-prefix=FULL
// RUN: weft-opt %s -split-input-file -weft-recompute=mode=none | FileCheck %s --check-prefix=NONE
// RUN: not weft-opt %s -split-input-file -weft-recompute=mode=some 2>&1 | FileCheck %s --check-prefix=BAD

// Layer h.0 computes %p (a product) and %h = tanh(%p), which the loss
// reads; the backward pass reads %h (in %g1) and %p (in %g2). Selective
// recomputes the elementwise %h right before %g1 and keeps the product;
// full keeps %h (the layer's output, a checkpoint) and recomputes the
// product from the layer's inputs right before %g2; none changes nothing.
#id = affine_map<(d0, d1) -> (d0, d1)>
#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#kn = affine_map<(d0, d1, d2) -> (d2, d1)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>
#all = affine_map<(d0, d1) -> ()>
func.func @step(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %dy: tensor<4x4xf32>) -> (tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>) attributes {weft.outputs = ["loss", "grad:a", "grad:b"]} {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<4x4xf32> loc("/h.0/fc/Empty")
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<4x4xf32>) -> tensor<4x4xf32> loc("/h.0/fc/Fill")
  %p = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32> loc("/h.0/fc/MatMul")
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<4x4xf32>) outs(%empty : tensor<4x4xf32>) {
  ^bb0(%a: f32, %c: f32):
    %t = math.tanh %a : f32
    linalg.yield %t : f32
  } -> tensor<4x4xf32> loc("/h.0/act/Tanh")
  %scalar = tensor.empty() : tensor<f32>
  %zero0 = linalg.fill ins(%zero : f32) outs(%scalar : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction", "reduction"]} ins(%h : tensor<4x4xf32>) outs(%zero0 : tensor<f32>) {
  ^bb0(%a: f32, %c: f32):
    %s = arith.addf %c, %a : f32
    linalg.yield %s : f32
  } -> tensor<f32> loc("/loss/Sum")
  %out = tensor.empty() : tensor<4x4xf32>
  %g1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%h, %dy : tensor<4x4xf32>, tensor<4x4xf32>) outs(%out : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %g2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%p, %dy : tensor<4x4xf32>, tensor<4x4xf32>) outs(%out : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.subf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  return %loss, %g1, %g2 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// SELECTIVE-LABEL: func.func @step
// SELECTIVE:         %[[P:.*]] = linalg.generic {{.*}}"reduction"]} ins(%arg0, %arg1
// SELECTIVE:         math.tanh
// SELECTIVE:         %[[AGAIN:.*]] = linalg.generic {{.*}} ins(%[[P]] : tensor<4x4xf32>)
// SELECTIVE-NEXT:    ^bb0
// SELECTIVE-NEXT:      math.tanh
// SELECTIVE:         linalg.generic {{.*}} ins(%[[AGAIN]], %arg2 :
// SELECTIVE:         linalg.generic {{.*}} ins(%[[P]], %arg2 :

// FULL-LABEL: func.func @step
// FULL:         "reduction"]} ins(%arg0, %arg1
// FULL-COUNT-1: math.tanh
// FULL:         %[[AGAIN:.*]] = linalg.generic {{.*}}"reduction"]} ins(%arg0, %arg1
// FULL:         linalg.generic {{.*}} ins(%[[AGAIN]], %arg2 :
// FULL-NOT:     math.tanh

// NONE-LABEL: func.func @step
// NONE:         "reduction"]} ins(%arg0, %arg1
// NONE:         math.tanh
// NONE-NOT:     math.tanh
// NONE-NOT:     "reduction"]} ins(%arg0, %arg1

// BAD: weft-recompute: unknown mode 'some' (expected none, selective or full)
