// Two transposes that move the innermost dim.
func.func @main(%x: tensor<45x70xf32> {weft.input = "x"}, %z: tensor<3x40x33xf32> {weft.input = "z"}) -> (tensor<70x45xf32>, tensor<33x3x40xf32>) attributes {weft.outputs = ["xt", "zt"]} {
  %xt = weft.transpose %x <{permutation = array<i64: 1, 0>}> : tensor<45x70xf32>
  %zt = weft.transpose %z <{permutation = array<i64: 2, 0, 1>}> : tensor<3x40x33xf32>
  return %xt, %zt : tensor<70x45xf32>, tensor<33x3x40xf32>
}
