

func.func @conv_kernel(%x: tensor<1x3x2x2xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'weft.conv' kernel larger than the padded input in spatial dim 0}}
  %0 = weft.conv %x, %w <{strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}> : tensor<1x3x2x2xf32>, tensor<4x3x3x3xf32>
  return
}
