func.func @main(%x: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %0 = weft.attention %x, %x, %x <{causal}> : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}
