// RUN: weft-opt %s -split-input-file -verify-diagnostics --weft-autodiff="function=loss"

func.func @loss(%a: tensor<4xf32> {weft.param = "a"}) -> tensor<f32> {
  // expected-error @+1 {{autodiff: no gradient rule for 'weft.reduce_max'}}
  %0 = weft.reduce_max %a <{axes = array<i64: 0>}> : tensor<4xf32>
  return %0 : tensor<f32>
}

// -----

// expected-error @+1 {{autodiff: the first result must be a scalar float loss}}
func.func @loss(%a: tensor<4xf32> {weft.param = "a"}) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
