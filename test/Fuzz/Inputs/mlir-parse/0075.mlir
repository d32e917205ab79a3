

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
