

// expected-error @+1 {{unknown weft argument attribute 'weft.weight'}}
func.func @unknown_arg_attr(%x: tensor<4xf32> {weft.weight = "w"}) {
  return
}
