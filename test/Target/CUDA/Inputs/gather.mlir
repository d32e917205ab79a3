// Rows of a table picked by computed ids (ids + shift), which the runner
// cannot check before the run: each input is in range, their sum need not be.
func.func @main(%table: tensor<16x8xf32> {weft.input = "table"}, %ids: tensor<2x3xi64> {weft.input = "ids"}, %shift: tensor<i64> {weft.input = "shift"}) -> tensor<2x3x8xf32> attributes {weft.outputs = ["rows"]} {
  %shifted = weft.add %ids, %shift : tensor<2x3xi64>, tensor<i64>
  %rows = weft.gather %table, %shifted <{axis = 0}> : tensor<16x8xf32>, tensor<2x3xi64>
  return %rows : tensor<2x3x8xf32>
}
