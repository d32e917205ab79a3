// RUN: weft-opt %s -split-input-file -weft-fuse-rms-norm | FileCheck %s
// RUN: weft-eval %s -split-input-file --compare-pipeline=weft-fuse-rms-norm | FileCheck %s --check-prefix=SAME

// The rewrite computes the same function (reference evaluator, random inputs):
// SAME: @llama_form result #0: {{.*}}: ok
// SAME: @div_form result #0: {{.*}}: ok
// SAME: @centered_input result #0: {{.*}}: ok

// Llama: x * rsqrt(mean(x^2) + eps) * w.
// CHECK-LABEL: func.func @llama_form
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8xf32>)
// CHECK: %[[R:.*]] = weft.rms_norm %[[X]], %[[W]] {axis = 2 : i64, epsilon = 9.9999999747524271E-7 : f64}
// CHECK: return %[[R]]
func.func @llama_form(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = weft.constant dense<2.0> : tensor<f32>
  %eps = weft.constant dense<1.0e-06> : tensor<f32>
  %sq = weft.pow %x, %two : tensor<2x4x8xf32>, tensor<f32>
  %ms = weft.reduce_mean %sq <{axes = array<i64: 2>, keepdims}> : tensor<2x4x8xf32>
  %e = weft.add %ms, %eps : tensor<2x4x1xf32>, tensor<f32>
  %r = weft.rsqrt %e : tensor<2x4x1xf32>
  %n = weft.mul %x, %r : tensor<2x4x8xf32>, tensor<2x4x1xf32>
  %y = weft.mul %w, %n : tensor<8xf32>, tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// x / sqrt(mean(x * x) + eps), without a weight.
// CHECK-LABEL: func.func @div_form
// CHECK: weft.rms_norm %{{.*}}, %{{.*}} {axis = 1 : i64
func.func @div_form(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %eps = weft.constant dense<1.0e-06> : tensor<f32>
  %sq = weft.mul %x, %x : tensor<4x8xf32>, tensor<4x8xf32>
  %ms = weft.reduce_mean %sq <{axes = array<i64: 1>, keepdims}> : tensor<4x8xf32>
  %e = weft.add %eps, %ms : tensor<f32>, tensor<4x1xf32>
  %s = weft.sqrt %e : tensor<4x1xf32>
  %n = weft.div %x, %s : tensor<4x8xf32>, tensor<4x1xf32>
  return %n : tensor<4x8xf32>
}

// -----

// A centered input is a layer norm, which this pass leaves alone.
// CHECK-LABEL: func.func @centered_input
// CHECK-NOT: weft.rms_norm
func.func @centered_input(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %eps = weft.constant dense<1.0e-06> : tensor<f32>
  %mean = weft.reduce_mean %x <{axes = array<i64: 1>, keepdims}> : tensor<4x8xf32>
  %d = weft.sub %x, %mean : tensor<4x8xf32>, tensor<4x1xf32>
  %sq = weft.mul %d, %d : tensor<4x8xf32>, tensor<4x8xf32>
  %ms = weft.reduce_mean %sq <{axes = array<i64: 1>, keepdims}> : tensor<4x8xf32>
  %e = weft.add %ms, %eps : tensor<4x1xf32>, tensor<f32>
  %r = weft.rsqrt %e : tensor<4x1xf32>
  %n = weft.mul %d, %r : tensor<4x8xf32>, tensor<4x1xf32>
  return %n : tensor<4x8xf32>
}
