// The collectives of an MLP block, an attention block and a full GPT layer
// under each strategy. Megatron tensor parallelism needs exactly one
// all-reduce per block; with sequence parallelism it becomes one
// reduce-scatter plus one all-gather; data parallelism needs none.

// RUN: weft-opt %s -split-input-file --weft-shard-presets="mesh=dp=4 parallel=dp" --weft-propagate-sharding --weft-partition | FileCheck %s --check-prefix=DP
// RUN: weft-opt %s -split-input-file --weft-shard-presets="mesh=tp=4 parallel=megatron" --weft-propagate-sharding --weft-partition | FileCheck %s --check-prefix=TP
// RUN: weft-opt %s -split-input-file --weft-shard-presets="mesh=dp=2,tp=2 parallel=dp,megatron" --weft-propagate-sharding --weft-partition | FileCheck %s --check-prefix=DPTP
// RUN: weft-opt %s -split-input-file --weft-shard-presets="mesh=tp=2 parallel=megatron sequence-parallel" --weft-propagate-sharding --weft-partition | FileCheck %s --check-prefix=SP

// DP-LABEL: func.func @mlp_block
// DP-SAME: %arg0: tensor<1x8x32xf32> {weft.input = "x", weft.sharding = "[dp], [], []"}
// DP-SAME: tensor<32x128xf32> {weft.param = "fc.weight"}
// DP-NOT: shard.
// DP: return {{.*}} : tensor<1x8x32xf32>

// TP-LABEL: func.func @mlp_block
// TP-SAME: tensor<32x32xf32> {weft.param = "fc.weight", weft.sharding = "[], [tp]"}
// TP-SAME: tensor<32xf32> {weft.param = "fc.bias", weft.sharding = "[tp]"}
// TP-SAME: tensor<32x32xf32> {weft.param = "proj.weight", weft.sharding = "[tp], []"}
// TP-SAME: tensor<32xf32> {weft.param = "proj.bias"}
// TP-NOT: shard.
// TP: weft.linear {{.*}} : tensor<4x8x32xf32>, tensor<32x32xf32>, tensor<32xf32>
// TP: weft.gelu
// TP: %[[PARTIAL:.*]] = weft.linear {{.*}} : tensor<4x8x32xf32>, tensor<32x32xf32>
// TP: %[[SUM:.*]] = shard.all_reduce %[[PARTIAL]] on @mesh grid_axes = [0] : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
// TP-NOT: shard.
// TP: weft.add %[[SUM]], %{{.*}} : tensor<4x8x32xf32>, tensor<32xf32>
// TP-NOT: shard.
// TP: return

// DPTP-LABEL: func.func @mlp_block
// DPTP-SAME: %arg0: tensor<2x8x32xf32> {weft.input = "x", weft.sharding = "[dp], [], []"}
// DPTP-SAME: tensor<32x64xf32> {weft.param = "fc.weight", weft.sharding = "[], [tp]"}
// DPTP-NOT: shard.
// DPTP: shard.all_reduce %{{.*}} on @mesh grid_axes = [1] : tensor<2x8x32xf32>
// DPTP-NOT: shard.
// DPTP: return

// SP-LABEL: func.func @mlp_block
// SP-SAME: %arg0: tensor<4x4x32xf32> {weft.input = "x", weft.sharding = "[], [tp], []"}
// SP-NOT: shard.
// SP: weft.layer_norm {{.*}} : tensor<4x4x32xf32>
// SP: %[[FULL:.*]] = shard.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 1 : tensor<4x4x32xf32> -> tensor<4x8x32xf32>
// SP-NOT: shard.
// SP: weft.linear %[[FULL]]
// SP: %[[PARTIAL:.*]] = weft.linear {{.*}} : tensor<4x8x64xf32>, tensor<64x32xf32>
// SP: shard.reduce_scatter %[[PARTIAL]] on @mesh grid_axes = [0] scatter_axis = 1 : tensor<4x8x32xf32> -> tensor<4x4x32xf32>
// SP-NOT: shard.
// SP: return {{.*}} : tensor<4x4x32xf32>
func.func @mlp_block(%x: tensor<4x8x32xf32> {weft.input = "x"},
    %g: tensor<32xf32> {weft.param = "ln.weight"}, %b: tensor<32xf32> {weft.param = "ln.bias"},
    %w1: tensor<32x128xf32> {weft.param = "fc.weight"}, %b1: tensor<128xf32> {weft.param = "fc.bias"},
    %w2: tensor<128x32xf32> {weft.param = "proj.weight"}, %b2: tensor<32xf32> {weft.param = "proj.bias"})
    -> tensor<4x8x32xf32> attributes {weft.outputs = ["y"]} {
  %0 = weft.layer_norm %x, %g, %b {axis = 2, epsilon = 1.0e-5 : f64} : tensor<4x8x32xf32>, tensor<32xf32>, tensor<32xf32>
  %1 = weft.linear %0, %w1, %b1 : tensor<4x8x32xf32>, tensor<32x128xf32>, tensor<128xf32>
  %2 = weft.gelu %1 : tensor<4x8x128xf32>
  %3 = weft.linear %2, %w2, %b2 : tensor<4x8x128xf32>, tensor<128x32xf32>, tensor<32xf32>
  %4 = weft.add %x, %3 : tensor<4x8x32xf32>, tensor<4x8x32xf32>
  return %4 : tensor<4x8x32xf32>
}

// -----

// DP-LABEL: func.func @attention_block
// DP-NOT: shard.
// DP: weft.attention {{.*}} : tensor<1x4x8x8xf32>
// DP-NOT: shard.
// DP: return

// The fused QKV weight is split part by part ("x3"): each rank holds its
// heads' columns of Q, K and V.
// TP-LABEL: func.func @attention_block
// TP-SAME: tensor<32x24xf32> {weft.param = "qkv.weight", weft.sharding = "[], [tp]x3"}
// TP-SAME: tensor<24xf32> {weft.param = "qkv.bias", weft.sharding = "[tp]x3"}
// TP-SAME: tensor<8x32xf32> {weft.param = "out.weight", weft.sharding = "[tp], []"}
// TP-NOT: shard.
// TP: weft.split {{.*}}sizes = array<i64: 8, 8, 8>
// TP: weft.attention {{.*}} : tensor<4x1x8x8xf32>, tensor<4x1x8x8xf32>, tensor<4x1x8x8xf32>
// TP: %[[PARTIAL:.*]] = weft.linear {{.*}} : tensor<4x8x8xf32>, tensor<8x32xf32>
// TP: shard.all_reduce %[[PARTIAL]] on @mesh grid_axes = [0]
// TP-NOT: shard.
// TP: return

// DPTP-LABEL: func.func @attention_block
// DPTP-NOT: shard.
// DPTP: weft.attention {{.*}} : tensor<2x2x8x8xf32>
// DPTP: shard.all_reduce %{{.*}} on @mesh grid_axes = [1] : tensor<2x8x32xf32>
// DPTP-NOT: shard.
// DPTP: return

// SP-LABEL: func.func @attention_block
// SP-NOT: shard.
// SP: shard.all_gather %{{.*}} gather_axis = 1 : tensor<4x4x32xf32> -> tensor<4x8x32xf32>
// SP-NOT: shard.
// SP: weft.attention {{.*}} : tensor<4x2x8x8xf32>
// SP: shard.reduce_scatter %{{.*}} scatter_axis = 1 : tensor<4x8x32xf32> -> tensor<4x4x32xf32>
// SP-NOT: shard.
// SP: return
func.func @attention_block(%x: tensor<4x8x32xf32> {weft.input = "x"},
    %g: tensor<32xf32> {weft.param = "ln.weight"}, %b: tensor<32xf32> {weft.param = "ln.bias"},
    %wqkv: tensor<32x96xf32> {weft.param = "qkv.weight"}, %bqkv: tensor<96xf32> {weft.param = "qkv.bias"},
    %wo: tensor<32x32xf32> {weft.param = "out.weight"}, %bo: tensor<32xf32> {weft.param = "out.bias"})
    -> tensor<4x8x32xf32> attributes {weft.outputs = ["y"]} {
  %0 = weft.layer_norm %x, %g, %b {axis = 2, epsilon = 1.0e-5 : f64} : tensor<4x8x32xf32>, tensor<32xf32>, tensor<32xf32>
  %1 = weft.linear %0, %wqkv, %bqkv : tensor<4x8x32xf32>, tensor<32x96xf32>, tensor<96xf32>
  %2:3 = weft.split %1 <{axis = 2 : i64, sizes = array<i64: 32, 32, 32>}> : tensor<4x8x96xf32>
  %q = weft.reshape %2#0 : tensor<4x8x32xf32> -> tensor<4x8x4x8xf32>
  %k = weft.reshape %2#1 : tensor<4x8x32xf32> -> tensor<4x8x4x8xf32>
  %v = weft.reshape %2#2 : tensor<4x8x32xf32> -> tensor<4x8x4x8xf32>
  %qt = weft.transpose %q <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<4x8x4x8xf32>
  %kt = weft.transpose %k <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<4x8x4x8xf32>
  %vt = weft.transpose %v <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<4x8x4x8xf32>
  %a = weft.attention %qt, %kt, %vt <{causal}> : tensor<4x4x8x8xf32>, tensor<4x4x8x8xf32>, tensor<4x4x8x8xf32>
  %at = weft.transpose %a <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<4x4x8x8xf32>
  %m = weft.reshape %at : tensor<4x8x4x8xf32> -> tensor<4x8x32xf32>
  %o = weft.linear %m, %wo, %bo : tensor<4x8x32xf32>, tensor<32x32xf32>, tensor<32xf32>
  %y = weft.add %x, %o : tensor<4x8x32xf32>, tensor<4x8x32xf32>
  return %y : tensor<4x8x32xf32>
}

// -----

// A GPT layer: attention then MLP, no bias on the projections (Llama-like),
// so the partial sums go straight into the residual adds.
// DP-LABEL: func.func @gpt_layer
// DP-NOT: shard.
// DP: return

// TP-LABEL: func.func @gpt_layer
// TP-NOT: shard.
// TP: weft.attention
// TP-NOT: shard.
// TP: shard.all_reduce
// TP-NOT: shard.
// TP: weft.gelu
// TP-NOT: shard.
// TP: shard.all_reduce
// TP-NOT: shard.
// TP: return

// DPTP-LABEL: func.func @gpt_layer
// DPTP-COUNT-2: shard.all_reduce %{{.*}} on @mesh grid_axes = [1] : tensor<2x8x32xf32>
// DPTP-NOT: shard.
// DPTP: return

// SP-LABEL: func.func @gpt_layer
// SP-NOT: shard.
// SP: shard.all_gather
// SP-NOT: shard.
// SP: shard.reduce_scatter
// SP-NOT: shard.
// SP: shard.all_gather
// SP-NOT: shard.
// SP: shard.reduce_scatter
// SP-NOT: shard.
// SP: return
func.func @gpt_layer(%x: tensor<4x8x32xf32> {weft.input = "x"},
    %g1: tensor<32xf32> {weft.param = "ln1.weight"}, %b1: tensor<32xf32> {weft.param = "ln1.bias"},
    %wqkv: tensor<32x96xf32> {weft.param = "qkv.weight"},
    %wo: tensor<32x32xf32> {weft.param = "out.weight"},
    %g2: tensor<32xf32> {weft.param = "ln2.weight"}, %b2: tensor<32xf32> {weft.param = "ln2.bias"},
    %w1: tensor<32x128xf32> {weft.param = "fc.weight"},
    %w2: tensor<128x32xf32> {weft.param = "proj.weight"})
    -> tensor<4x8x32xf32> attributes {weft.outputs = ["y"]} {
  %0 = weft.layer_norm %x, %g1, %b1 {axis = 2, epsilon = 1.0e-5 : f64} : tensor<4x8x32xf32>, tensor<32xf32>, tensor<32xf32>
  %1 = weft.linear %0, %wqkv : tensor<4x8x32xf32>, tensor<32x96xf32>
  %2:3 = weft.split %1 <{axis = 2 : i64, sizes = array<i64: 32, 32, 32>}> : tensor<4x8x96xf32>
  %q = weft.reshape %2#0 : tensor<4x8x32xf32> -> tensor<4x8x4x8xf32>
  %k = weft.reshape %2#1 : tensor<4x8x32xf32> -> tensor<4x8x4x8xf32>
  %v = weft.reshape %2#2 : tensor<4x8x32xf32> -> tensor<4x8x4x8xf32>
  %qt = weft.transpose %q <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<4x8x4x8xf32>
  %kt = weft.transpose %k <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<4x8x4x8xf32>
  %vt = weft.transpose %v <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<4x8x4x8xf32>
  %a = weft.attention %qt, %kt, %vt <{causal}> : tensor<4x4x8x8xf32>, tensor<4x4x8x8xf32>, tensor<4x4x8x8xf32>
  %at = weft.transpose %a <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<4x4x8x8xf32>
  %m = weft.reshape %at : tensor<4x8x4x8xf32> -> tensor<4x8x32xf32>
  %o = weft.linear %m, %wo : tensor<4x8x32xf32>, tensor<32x32xf32>
  %h = weft.add %x, %o : tensor<4x8x32xf32>, tensor<4x8x32xf32>
  %n = weft.layer_norm %h, %g2, %b2 {axis = 2, epsilon = 1.0e-5 : f64} : tensor<4x8x32xf32>, tensor<32xf32>, tensor<32xf32>
  %f = weft.linear %n, %w1 : tensor<4x8x32xf32>, tensor<32x128xf32>
  %gl = weft.gelu %f : tensor<4x8x128xf32>
  %p = weft.linear %gl, %w2 : tensor<4x8x128xf32>, tensor<128x32xf32>
  %y = weft.add %h, %p : tensor<4x8x32xf32>, tensor<4x8x32xf32>
  return %y : tensor<4x8x32xf32>
}
