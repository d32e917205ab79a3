// x -> bf16 -> f32, compiled by weftc (test/Target/CPU/bf16-conversions.test).
module {
  func.func @main(%x: tensor<4096xf32> {weft.input = "x"}) -> tensor<4096xf32>
      attributes {weft.outputs = ["y"]} {
    %h = weft.cast %x : tensor<4096xf32> to tensor<4096xbf16>
    %y = weft.cast %h : tensor<4096xbf16> to tensor<4096xf32>
    return %y : tensor<4096xf32>
  }
}
