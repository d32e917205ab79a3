// RUN: weft-opt %s -split-input-file -weft-fuse-layer-norm | FileCheck %s
// RUN: weft-eval %s -split-input-file --compare-pipeline=weft-fuse-layer-norm | FileCheck %s --check-prefix=SAME

// The rewrite computes the same function (reference evaluator, random inputs):
// SAME: @pytorch_form result #0: {{.*}}: ok
// SAME: @no_affine_rsqrt result #0: {{.*}}: ok
// SAME: @tensorflow_form result #0: {{.*}}: ok
// SAME: @mismatched_axes result #0: {{.*}}: ok
// SAME: @scale_not_per_feature result #0: {{.*}}: ok

// PyTorch's decomposition: (x - mean) / sqrt(mean((x - mean)^2) + eps) * g + b.
// CHECK-LABEL: func.func @pytorch_form
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK: %[[LN:.*]] = weft.layer_norm %[[X]], %[[G]], %[[B]] {axis = 2 : i64, epsilon = 9.9999997473787516E-6 : f64}
// CHECK-NOT: weft.reduce_mean
// CHECK: return %[[LN]]
func.func @pytorch_form(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = weft.constant dense<2.0> : tensor<f32>
  %eps = weft.constant dense<1.0e-05> : tensor<f32>
  %mean = weft.reduce_mean %x <{axes = array<i64: 2>, keepdims}> : tensor<2x4x8xf32>
  %d = weft.sub %x, %mean : tensor<2x4x8xf32>, tensor<2x4x1xf32>
  %sq = weft.pow %d, %two : tensor<2x4x8xf32>, tensor<f32>
  %var = weft.reduce_mean %sq <{axes = array<i64: 2>, keepdims}> : tensor<2x4x8xf32>
  %ve = weft.add %var, %eps : tensor<2x4x1xf32>, tensor<f32>
  %std = weft.sqrt %ve : tensor<2x4x1xf32>
  %n = weft.div %d, %std : tensor<2x4x8xf32>, tensor<2x4x1xf32>
  %s = weft.mul %n, %g : tensor<2x4x8xf32>, tensor<8xf32>
  %y = weft.add %s, %b : tensor<2x4x8xf32>, tensor<8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// No affine part: the scale is ones and there is no bias; d * rsqrt form.
// CHECK-LABEL: func.func @no_affine_rsqrt
// CHECK: %[[ONES:.*]] = weft.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK: weft.layer_norm %{{.*}}, %[[ONES]] {axis = 1 : i64
func.func @no_affine_rsqrt(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %eps = weft.constant dense<1.0e-05> : tensor<f32>
  %mean = weft.reduce_mean %x <{axes = array<i64: 1>, keepdims}> : tensor<4x8xf32>
  %d = weft.sub %x, %mean : tensor<4x8xf32>, tensor<4x1xf32>
  %sq = weft.mul %d, %d : tensor<4x8xf32>, tensor<4x8xf32>
  %var = weft.reduce_mean %sq <{axes = array<i64: 1>, keepdims}> : tensor<4x8xf32>
  %ve = weft.add %eps, %var : tensor<f32>, tensor<4x1xf32>
  %r = weft.rsqrt %ve : tensor<4x1xf32>
  %n = weft.mul %r, %d : tensor<4x1xf32>, tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}

// -----

// TensorFlow's form: m = g * rsqrt(var + eps); x * m + (b - mean * m).
// CHECK-LABEL: func.func @tensorflow_form
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK: weft.layer_norm %[[X]], %[[G]], %[[B]] {axis = 1 : i64
func.func @tensorflow_form(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %eps = weft.constant dense<1.0e-12> : tensor<f32>
  %mean = weft.reduce_mean %x <{axes = array<i64: 1>, keepdims}> : tensor<4x8xf32>
  %d = weft.sub %x, %mean : tensor<4x8xf32>, tensor<4x1xf32>
  %sq = weft.mul %d, %d : tensor<4x8xf32>, tensor<4x8xf32>
  %var = weft.reduce_mean %sq <{axes = array<i64: 1>, keepdims}> : tensor<4x8xf32>
  %ve = weft.add %var, %eps : tensor<4x1xf32>, tensor<f32>
  %std = weft.sqrt %ve : tensor<4x1xf32>
  %r = weft.reciprocal %std : tensor<4x1xf32>
  %m = weft.mul %r, %g : tensor<4x1xf32>, tensor<8xf32>
  %xm = weft.mul %x, %m : tensor<4x8xf32>, tensor<4x8xf32>
  %meanm = weft.mul %mean, %m : tensor<4x1xf32>, tensor<4x8xf32>
  %shift = weft.sub %b, %meanm : tensor<8xf32>, tensor<4x8xf32>
  %y = weft.add %xm, %shift : tensor<4x8xf32>, tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// The mean is over a different axis than the variance: not a layer norm.
// CHECK-LABEL: func.func @mismatched_axes
// CHECK-NOT: weft.layer_norm
func.func @mismatched_axes(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %eps = weft.constant dense<1.0e-05> : tensor<f32>
  %mean = weft.reduce_mean %x <{axes = array<i64: 0>, keepdims}> : tensor<4x8xf32>
  %d = weft.sub %x, %mean : tensor<4x8xf32>, tensor<1x8xf32>
  %sq = weft.mul %d, %d : tensor<4x8xf32>, tensor<4x8xf32>
  %var = weft.reduce_mean %sq <{axes = array<i64: 1>, keepdims}> : tensor<4x8xf32>
  %ve = weft.add %var, %eps : tensor<4x1xf32>, tensor<f32>
  %std = weft.sqrt %ve : tensor<4x1xf32>
  %n = weft.div %d, %std : tensor<4x8xf32>, tensor<4x1xf32>
  return %n : tensor<4x8xf32>
}

// -----

// A scale of another shape than the normalized one stays a multiply.
// CHECK-LABEL: func.func @scale_not_per_feature
// CHECK: weft.layer_norm
// CHECK: weft.mul
func.func @scale_not_per_feature(%x: tensor<4x8xf32>, %g: tensor<4x1xf32>) -> tensor<4x8xf32> {
  %eps = weft.constant dense<1.0e-05> : tensor<f32>
  %mean = weft.reduce_mean %x <{axes = array<i64: 1>, keepdims}> : tensor<4x8xf32>
  %d = weft.sub %x, %mean : tensor<4x8xf32>, tensor<4x1xf32>
  %sq = weft.mul %d, %d : tensor<4x8xf32>, tensor<4x8xf32>
  %var = weft.reduce_mean %sq <{axes = array<i64: 1>, keepdims}> : tensor<4x8xf32>
  %ve = weft.add %var, %eps : tensor<4x1xf32>, tensor<f32>
  %std = weft.sqrt %ve : tensor<4x1xf32>
  %n = weft.div %d, %std : tensor<4x8xf32>, tensor<4x1xf32>
  %s = weft.mul %n, %g : tensor<4x8xf32>, tensor<4x1xf32>
  return %s : tensor<4x8xf32>
}
