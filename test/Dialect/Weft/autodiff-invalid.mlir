// RUN: weft-opt %s -split-input-file -verify-diagnostics --weft-autodiff="function=loss"

func.func @loss(%x: tensor<1x2x5xf32> {weft.param = "x"}, %w: tensor<3x2x2xf32> {weft.param = "w"}) -> tensor<f32> {
  // expected-error @+1 {{autodiff: weft.conv has no gradient rule: its input's adjoint is a transposed convolution, which weft has no op for}}
  %0 = weft.conv %x, %w <{strides = array<i64: 1>, pads = array<i64: 0, 0>, dilations = array<i64: 1>, group = 1}> : tensor<1x2x5xf32>, tensor<3x2x2xf32>
  %1 = weft.reduce_sum %0 <{axes = array<i64: 0, 1, 2>}> : tensor<1x3x4xf32>
  return %1 : tensor<f32>
}

// -----

// expected-error @+1 {{autodiff: the first result must be a scalar float loss}}
func.func @loss(%a: tensor<4xf32> {weft.param = "a"}) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

// A second derivative of GELU (a gradient of a gradient) is not built.
func.func @loss(%x: tensor<4xf32> {weft.param = "x"}) -> tensor<f32> {
  // expected-error @+1 {{autodiff: weft.gelu_grad has no gradient rule (no second derivative of GELU)}}
  %0 = weft.gelu_grad %x, %x {approximate = "tanh"} : tensor<4xf32>
  %1 = weft.reduce_sum %0 <{axes = array<i64: 0>}> : tensor<4xf32>
  return %1 : tensor<f32>
}
