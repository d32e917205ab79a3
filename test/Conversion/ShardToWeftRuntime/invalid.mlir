// RUN: weft-opt %s -split-input-file --convert-shard-to-weft-runtime -verify-diagnostics

shard.grid @mesh(shape = 4)
func.func @max_reduction(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{the runtime's collectives reduce by sum only}}
  %r = shard.all_reduce %x on @mesh grid_axes = [0] reduction = max : tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = ?)
func.func @dynamic_grid(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{needs a shard.grid of static shape}}
  %r = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 4)
func.func @unsupported_element(%x: tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>> {
  // expected-error @+1 {{the runtime has no collectives on 'complex<f32>'}}
  %r = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xcomplex<f32>> -> tensor<4xcomplex<f32>>
  return %r : tensor<4xcomplex<f32>>
}
