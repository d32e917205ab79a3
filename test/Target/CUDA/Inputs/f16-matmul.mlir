// A product of fp16 operands (an fp16 model's MatMul between its Casts):
// the GEMM multiplies fp16 inputs, accumulating in f32, and the result is
// rounded to fp16.
func.func @main(%x: tensor<2x16x64xf32> {weft.input = "x"}, %w: tensor<64x48xf32> {weft.input = "w"}) -> tensor<2x16x48xf32> attributes {weft.outputs = ["y"]} {
  %xh = weft.cast %x : tensor<2x16x64xf32> to tensor<2x16x64xf16>
  %wh = weft.cast %w : tensor<64x48xf32> to tensor<64x48xf16>
  %yh = weft.matmul %xh, %wh : tensor<2x16x64xf16>, tensor<64x48xf16>
  %y = weft.cast %yh : tensor<2x16x48xf16> to tensor<2x16x48xf32>
  return %y : tensor<2x16x48xf32>
}
