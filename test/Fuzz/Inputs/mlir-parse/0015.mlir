
// Grouped convolution is not supported by the CPU backend: a clear error.
func.func @grouped_conv(%x: tensor<1x4x8x8xf32>, %w: tensor<4x2x2x2xf32>) -> tensor<1x4x7x7xf32> {
  // expected-error @+1 {{grouped convolution is not supported by the CPU backend yet}}
  %0 = weft.conv %x, %w <{strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 2}> : tensor<1x4x8x8xf32>, tensor<4x2x2x2xf32>
  return %0 : tensor<1x4x7x7xf32>
}
