

// Integer division by zero and out-of-range gathers are left to run time.
// CHECK-LABEL: func.func @undefined_not_folded
// CHECK: weft.div
// CHECK: weft.gather
func.func @undefined_not_folded() -> (tensor<2xi64>, tensor<1xi64>) {
  %a = weft.constant dense<[4, 6]> : tensor<2xi64>
  %z = weft.constant dense<[2, 0]> : tensor<2xi64>
  %d = weft.div %a, %z : tensor<2xi64>, tensor<2xi64>
  %i = weft.constant dense<[5]> : tensor<1xi64>
  %g = weft.gather %a, %i <{axis = 0}> : tensor<2xi64>, tensor<1xi64>
  return %d, %g : tensor<2xi64>, tensor<1xi64>
}
