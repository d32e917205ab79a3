
shard.grid @mesh(shape = 4)
func.func @max_reduction(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{the runtime's collectives reduce by sum only}}
  %r = shard.all_reduce %x on @mesh grid_axes = [0] reduction = max : tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}
