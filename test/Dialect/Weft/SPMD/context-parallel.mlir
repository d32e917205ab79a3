// Context parallelism: the input's sequence is split over cp. As a ring,
// attention keeps it split and passes key/value chunks around the axis
// (shard.shift); as an all-to-all (Ulysses), the split moves to the heads
// around each attention. Everything else is token-local and stays split.
// The ring's ranks hold a head and a tail chunk each (rank r: chunks r and
// 2n-1-r), so that a causal mask leaves them the same work; with
// ring-contiguous each holds one chunk and computes every block.

// RUN: weft-opt %s -split-input-file --weft-shard-presets="mesh=cp=2 parallel=cp" --weft-propagate-sharding --weft-partition | FileCheck %s --check-prefix=RING
// RUN: weft-opt %s -split-input-file --weft-shard-presets="mesh=cp=2 parallel=cp context-attention=ring-contiguous" --weft-propagate-sharding --weft-partition | FileCheck %s --check-prefix=CONTIG
// RUN: weft-opt %s -split-input-file --weft-shard-presets="mesh=cp=4 parallel=cp context-attention=all-to-all" --weft-propagate-sharding --weft-partition | FileCheck %s --check-prefix=A2A
// RUN: weft-opt %s -split-input-file --weft-shard-presets="mesh=dp=2,cp=2 parallel=dp,cp" --weft-propagate-sharding --weft-partition | FileCheck %s --check-prefix=DPCP
// RUN: not weft-opt %s -split-input-file --weft-shard-presets="mesh=cp=2" 2>&1 | FileCheck %s --check-prefix=NOCP

// RING: shard.grid @mesh(shape = 2) {weft.axis_names = ["cp"], weft.context_attention = "ring", weft.context_axis = "cp"}
// RING-LABEL: func.func @self_attention
// RING-SAME: %arg0: tensor<2x8x32xf32> {weft.input = "x", weft.sharding = "[], [cp], []"}
// RING-NOT: shard.all_gather
// RING: %[[RANK:.*]] = shard.process_multi_index on @mesh axes = [0]
// The diagonal step: head queries x head keys, tail queries x both halves.
// RING: weft.matmul {{.*}} : tensor<2x4x4x8xf32>, tensor<2x4x8x4xf32>
// RING: weft.matmul {{.*}} : tensor<2x4x4x8xf32>, tensor<2x4x8x8xf32>
// RING: shard.shift {{.*}} on @mesh grid_axes = [0] shift_axis = 0 offset = 1 rotate : tensor<2x4x8x8xf32>
// RING: shard.shift {{.*}} on @mesh grid_axes = [0] shift_axis = 0 offset = 1 rotate : tensor<2x4x8x8xf32>
// RING-NOT: shard.shift
// Then half a block: tail queries x the arriving head keys, and the block
// the rank picks (from an earlier rank: head x head, else tail x tail).
// RING: weft.matmul {{.*}} : tensor<2x4x4x8xf32>, tensor<2x4x8x4xf32>
// RING: %[[EARLY:.*]] = arith.cmpi uge, %[[RANK]], %c1
// RING: weft.where {{.*}} : tensor<i1>, tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>
// RING: weft.matmul {{.*}} : tensor<2x4x4x8xf32>, tensor<2x4x8x4xf32>
// RING-NOT: tensor<2x4x8x8xf32>
// RING-NOT: shard.
// RING: weft.concat {{.*}} <{axis = 2 : i64}> : tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>
// RING: return {{.*}} : tensor<2x8x32xf32>

// CONTIG: shard.grid @mesh(shape = 2) {weft.axis_names = ["cp"], weft.context_attention = "ring-contiguous", weft.context_axis = "cp"}
// CONTIG-LABEL: func.func @self_attention
// CONTIG-NOT: shard.all_gather
// CONTIG: shard.process_multi_index on @mesh axes = [0]
// CONTIG: weft.matmul {{.*}} : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
// CONTIG: shard.shift {{.*}} on @mesh grid_axes = [0] shift_axis = 0 offset = 1 rotate : tensor<2x4x8x8xf32>
// CONTIG: shard.shift {{.*}} on @mesh grid_axes = [0] shift_axis = 0 offset = 1 rotate : tensor<2x4x8x8xf32>
// CONTIG-NOT: shard.shift
// CONTIG: weft.matmul {{.*}} : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
// CONTIG-NOT: shard.
// CONTIG: return {{.*}} : tensor<2x8x32xf32>

// A2A-LABEL: func.func @self_attention
// A2A-SAME: %arg0: tensor<2x4x32xf32> {weft.input = "x", weft.sharding = "[], [cp], []"}
// A2A: shard.all_to_all {{.*}} on @mesh grid_axes = [0] split_axis = 1 concat_axis = 2 : tensor<2x4x4x8xf32> -> tensor<2x1x16x8xf32>
// A2A-NOT: shard.
// A2A: weft.attention {{.*}} <{causal}> : tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>
// A2A: shard.all_to_all {{.*}} on @mesh grid_axes = [0] split_axis = 2 concat_axis = 1 : tensor<2x1x16x8xf32> -> tensor<2x4x4x8xf32>
// A2A-NOT: shard.
// A2A: return {{.*}} : tensor<2x4x32xf32>

// DPCP-LABEL: func.func @self_attention
// DPCP-SAME: %arg0: tensor<1x8x32xf32> {weft.input = "x", weft.sharding = "[dp], [cp], []"}
// DPCP: shard.shift {{.*}} on @mesh grid_axes = [1] shift_axis = 1 offset = 1 rotate : tensor<1x4x8x8xf32>

// Without the cp strategy every cp rank would compute the same step.
// NOCP: error: mesh axis 'cp' (size 2) is used by no strategy, so its ranks would all compute the same step
func.func @self_attention(%x: tensor<2x16x32xf32> {weft.input = "x"}) -> tensor<2x16x32xf32> {
  %r = weft.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %q = weft.transpose %r <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x16x4x8xf32>
  %o = weft.attention %q, %q, %q <{causal}> : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
  %t = weft.transpose %o <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x16x8xf32>
  %y = weft.reshape %t : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}

// -----

// The gradient's ring at cp=2, after the forward's two shifts (keys and
// values): one turn of the keys rebuilds the log-sum-exp; a second carries
// the values and the key/value gradients (three shifts), which take one
// more step home (two).
// Under the head/tail layout each later step's blocks are half blocks.
// RING-LABEL: func.func @attention_grad
// RING-COUNT-8: shard.shift
// RING-NOT: shard.shift
// RING-NOT: weft.matmul {{.*}} : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
// RING: return {{.*}} : tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>
// CONTIG-LABEL: func.func @attention_grad
// CONTIG-COUNT-8: shard.shift
// CONTIG-NOT: shard.shift
// CONTIG: return {{.*}} : tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>

// Under all-to-all the gradient reads the operands already moved to heads
// and moves its three results back.
// A2A-LABEL: func.func @attention_grad
// A2A-COUNT-1: shard.all_to_all {{.*}} -> tensor<2x1x16x8xf32>
// A2A-NOT: shard.
// A2A: weft.attention_grad {{.*}} <{causal}> : tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>
// A2A-COUNT-3: shard.all_to_all {{.*}} -> tensor<2x4x4x8xf32>
func.func @attention_grad(%x: tensor<2x16x32xf32> {weft.input = "x"}) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) {
  %r = weft.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %q = weft.transpose %r <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x16x4x8xf32>
  %o = weft.attention %q, %q, %q <{causal}> : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
  %g:3 = weft.attention_grad %q, %q, %q, %o, %o <{causal}> : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
  %t0 = weft.transpose %g#0 <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x16x8xf32>
  %y0 = weft.reshape %t0 : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  %t1 = weft.transpose %g#1 <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x16x8xf32>
  %y1 = weft.reshape %t1 : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  %t2 = weft.transpose %g#2 <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x16x8xf32>
  %y2 = weft.reshape %t2 : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  return %y0, %y1, %y2 : tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>
}

// -----

// All-to-all needs heads that divide by cp.
// RUN: not weft-opt %s -split-input-file --weft-shard-presets="mesh=cp=8 parallel=cp context-attention=all-to-all" --weft-propagate-sharding --weft-partition 2>&1 | FileCheck %s --check-prefix=HEADS
// HEADS: error: context parallelism (all-to-all) splits the heads over mesh axis 'cp' (size 8), but operand 0 has 4 heads per rank: not divisible (--cp-attention ring splits the sequence instead)

// -----

// An attention with an explicit mask keeps its sequence whole: it is
// computed on the gathered sequence, and the partitioner says so.
// RUN: weft-opt %s -split-input-file --weft-shard-presets="mesh=cp=2 parallel=cp" --weft-propagate-sharding --weft-partition 2>&1 >/dev/null | FileCheck %s --check-prefix=GATHERED
// GATHERED: warning: context parallelism: this attention has an explicit mask, so its sequence is gathered over 'cp' instead of passed around a ring or split by heads
// The gathered sequence is put back in order (its chunks came rank by
// rank, each rank's head and tail chunk together), and split again after.
// RING-LABEL: func.func @masked_attention
// RING: %[[WHOLE:.*]] = shard.all_gather {{.*}} gather_axis = 2 : tensor<2x4x8x8xf32> -> tensor<2x4x16x8xf32>
// RING-NEXT: %[[C0:.*]] = weft.slice %[[WHOLE]] <{offsets = array<i64: 0, 0, 0, 0>, sizes = array<i64: 2, 4, 4, 8>
// RING-NEXT: %[[C1:.*]] = weft.slice %[[WHOLE]] <{offsets = array<i64: 0, 0, 8, 0>, sizes = array<i64: 2, 4, 4, 8>
// RING-NEXT: %[[C2:.*]] = weft.slice %[[WHOLE]] <{offsets = array<i64: 0, 0, 12, 0>, sizes = array<i64: 2, 4, 4, 8>
// RING-NEXT: %[[C3:.*]] = weft.slice %[[WHOLE]] <{offsets = array<i64: 0, 0, 4, 0>, sizes = array<i64: 2, 4, 4, 8>
// RING-NEXT: weft.concat %[[C0]], %[[C1]], %[[C2]], %[[C3]] <{axis = 2 : i64}>
// RING: weft.attention {{.*}} : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<16x16xf32>
func.func @masked_attention(%x: tensor<2x16x32xf32> {weft.input = "x"}, %m: tensor<16x16xf32>) -> tensor<2x16x32xf32> {
  %r = weft.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %q = weft.transpose %r <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x16x4x8xf32>
  %o = weft.attention %q, %q, %q, %m : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<16x16xf32>
  %t = weft.transpose %o <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x16x8xf32>
  %y = weft.reshape %t : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}
