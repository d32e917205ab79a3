

func.func @attention_mask_shape(%q: tensor<1x4x16x8xf32>, %m: tensor<16x15xi1>) {
  // expected-error @+1 {{'weft.attention' mask [16, 15] does not broadcast to the scores [1, 4, 16, 16]}}
  %0 = weft.attention %q, %q, %q, %m : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<16x15xi1>
  return
}
