// RUN: weft-opt %s -split-input-file -weft-sink-widening-casts | FileCheck %s

// The attention's head views between a bf16 projection widened to f32 and
// the bf16 attention: split, reshape and transpose move bf16 and the casts
// cancel.
// CHECK-LABEL: func.func @head_views
// CHECK-NOT:   weft.cast
// CHECK:       %[[S:.*]]:2 = weft.split %arg0 {{.*}} : tensor<2x4x16xbf16>
// CHECK:       %[[R:.*]] = weft.reshape %[[S]]#0 : tensor<2x4x8xbf16> -> tensor<2x4x2x4xbf16>
// CHECK:       %[[T:.*]] = weft.transpose %[[R]] {{.*}} : tensor<2x4x2x4xbf16>
// CHECK-NOT:   weft.cast
// CHECK:       return %[[T]], %[[S]]#1
func.func @head_views(%y: tensor<2x4x16xbf16>) -> (tensor<2x2x4x4xbf16>, tensor<2x4x8xbf16>) {
  %w = weft.cast %y : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
  %s:2 = weft.split %w <{axis = 2 : i64, sizes = array<i64: 8, 8>}> : tensor<2x4x16xf32>
  %r = weft.reshape %s#0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %t = weft.transpose %r <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x2x4xf32>
  %q = weft.cast %t : tensor<2x2x4x4xf32> to tensor<2x2x4x4xbf16>
  %k = weft.cast %s#1 : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
  return %q, %k : tensor<2x2x4x4xbf16>, tensor<2x4x8xbf16>
}

// -----

// Backward: the head gradients concatenated; all operands widened from
// bf16, so the concat moves bf16 too.
// CHECK-LABEL: func.func @concat_of_widened
// CHECK:       %[[C:.*]] = weft.concat %arg0, %arg1 {{.*}} : tensor<2x8xbf16>, tensor<2x8xbf16>
// CHECK-NEXT:  return %[[C]]
func.func @concat_of_widened(%a: tensor<2x8xbf16>, %b: tensor<2x8xbf16>) -> tensor<2x16xbf16> {
  %wa = weft.cast %a : tensor<2x8xbf16> to tensor<2x8xf32>
  %wb = weft.cast %b : tensor<2x8xbf16> to tensor<2x8xf32>
  %c = weft.concat %wa, %wb <{axis = 1}> : tensor<2x8xf32>, tensor<2x8xf32>
  %n = weft.cast %c : tensor<2x16xf32> to tensor<2x16xbf16>
  return %n : tensor<2x16xbf16>
}

// -----

// A widened value several ops read: each that can widen as it reads gets
// a cast of its own (the reshape then moves below its cast), so no f32
// copy is shared. A reader that cannot (a norm's row kernel) keeps the
// original.
// CHECK-LABEL: func.func @per_reader
// CHECK:       %[[W:.*]] = weft.cast %arg0 : tensor<4xbf16> to tensor<4xf32>
// CHECK:       %[[R:.*]] = weft.reshape %arg0 : tensor<4xbf16> -> tensor<2x2xbf16>
// CHECK:       weft.cast %[[R]] : tensor<2x2xbf16> to tensor<2x2xf32>
// CHECK:       %[[A:.*]] = weft.cast %arg0 : tensor<4xbf16> to tensor<4xf32>
// CHECK:       weft.add %[[A]], %arg1
// CHECK:       weft.layer_norm %[[W]]
// CHECK:       %[[M:.*]] = weft.cast %arg0 : tensor<4xbf16> to tensor<4xf32>
// CHECK:       weft.mul %[[M]], %[[M]]
func.func @per_reader(%a: tensor<4xbf16>, %x: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<2x2xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %w = weft.cast %a : tensor<4xbf16> to tensor<4xf32>
  %r = weft.reshape %w : tensor<4xf32> -> tensor<2x2xf32>
  %s = weft.add %w, %x : tensor<4xf32>, tensor<4xf32>
  %n = weft.layer_norm %w, %g {axis = 0, epsilon = 1.0e-05 : f64} : tensor<4xf32>, tensor<4xf32>
  %m = weft.mul %w, %w : tensor<4xf32>, tensor<4xf32>
  return %r, %s, %n, %m : tensor<2x2xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// What stays: a concat of values of different narrow types, and a round
// trip through a type that is not the original (bf16 -> f32 -> f16
// rounds).
// CHECK-LABEL: func.func @kept
// CHECK:       weft.concat {{.*}} : tensor<4xf32>, tensor<4xf32>
// CHECK:       weft.cast {{.*}} : tensor<4xf32> to tensor<4xf16>
func.func @kept(%a: tensor<4xbf16>, %b: tensor<4xf16>) -> (tensor<8xf32>, tensor<4xf16>) {
  %wa = weft.cast %a : tensor<4xbf16> to tensor<4xf32>
  %wb = weft.cast %b : tensor<4xf16> to tensor<4xf32>
  %c = weft.concat %wa, %wb <{axis = 0}> : tensor<4xf32>, tensor<4xf32>
  %v = weft.cast %a : tensor<4xbf16> to tensor<4xf32>
  %h = weft.cast %v : tensor<4xf32> to tensor<4xf16>
  return %c, %h : tensor<8xf32>, tensor<4xf16>
}
