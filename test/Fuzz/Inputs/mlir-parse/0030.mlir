

// A layer whose projections form no column/row pair (here a norm over the
// hidden dim sits between them) keeps its weights whole: a warning names
// the layer instead of a silent replicated "tp" run. Layer h.1 splits.
func.func @no_pair_in_a_layer(%x: tensor<4x8x32xf32> {weft.input = "x"}, %w1: tensor<32x64xf32> {weft.param = "h.0.fc.weight"}, %w2: tensor<64x32xf32> {weft.param = "h.0.proj.weight"}, %g: tensor<64xf32> {weft.param = "h.0.norm.weight"}, %w3: tensor<32x64xf32> {weft.param = "h.1.fc.weight"}, %w4: tensor<64x32xf32> {weft.param = "h.1.proj.weight"}, %gn: tensor<32xf32> {weft.param = "h.1.norm.weight"}) -> tensor<4x8x32xf32> attributes {weft.outputs = ["y"]} {
  // expected-warning @unknown {{megatron: layer '/h.0' has contractions by parameters but no column/row pair to split; its weights stay replicated on every 'tp' rank}}
  %0 = weft.linear %x, %w1 : tensor<4x8x32xf32>, tensor<32x64xf32> loc("/h.0/fc/MatMul")
  %1 = weft.rms_norm %0, %g {axis = 2, epsilon = 1.0e-05 : f64} : tensor<4x8x64xf32>, tensor<64xf32> loc("/h.0/norm")
  %2 = weft.linear %1, %w2 : tensor<4x8x64xf32>, tensor<64x32xf32> loc("/h.0/proj/MatMul")
  %r = weft.add %2, %x : tensor<4x8x32xf32>, tensor<4x8x32xf32> loc("/h.0/residual")
  %n = weft.rms_norm %r, %gn {axis = 2, epsilon = 1.0e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> loc("/h.1/norm")
  %3 = weft.linear %n, %w3 : tensor<4x8x32xf32>, tensor<32x64xf32> loc("/h.1/fc/MatMul")
  %4 = weft.relu %3 : tensor<4x8x64xf32> loc("/h.1/relu")
  %5 = weft.linear %4, %w4 : tensor<4x8x64xf32>, tensor<64x32xf32> loc("/h.1/proj/MatMul")
  return %5 : tensor<4x8x32xf32>
}