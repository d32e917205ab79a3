

// Where with swapped arms masks where the condition holds: the mask is
// negated. A non-causal constant stays a mask.
// CHECK-LABEL: func.func @negated_mask
// CHECK: %[[N:.*]] = weft.not
// CHECK: weft.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[N]] <{scale = 1.000000e+00 : f64}>
func.func @negated_mask(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x8xf32>, %pad: tensor<1x1x1x4xi1>) -> tensor<1x2x4x8xf32> {
  %fill = weft.constant dense<0xFF800000> : tensor<f32>
  %s = weft.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>
  %m = weft.where %pad, %fill, %s : tensor<1x1x1x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>
  %p = weft.softmax %m {axis = 3} : tensor<1x2x4x4xf32>
  %o = weft.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}
