

func.func @unsqueeze_axes(%x: tensor<2xf32>) {
  // expected-error @+1 {{'weft.unsqueeze' axis 5 is out of range [0, 2)}}
  %0 = weft.unsqueeze %x <{axes = array<i64: 5>}> : tensor<2xf32>
  return
}
