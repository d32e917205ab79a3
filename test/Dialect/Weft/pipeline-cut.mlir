// RUN: weft-opt %s -weft-derive-train-step="micro-batches=2 mark-phases=true optimizer=sgd weight-decay=0" -weft-shard-presets="mesh=pp=2" -weft-split-stages="stages=2 boundaries=1" -weft-outline-microbatches="function=train_step" -weft-pipeline-cut="function=train_step rank=0 schedule=1f1b microbatches=2" | FileCheck %s --check-prefix=RANK0
// RUN: weft-opt %s -weft-derive-train-step="micro-batches=2 mark-phases=true optimizer=sgd weight-decay=0" -weft-shard-presets="mesh=pp=2" -weft-split-stages="stages=2 boundaries=1" -weft-outline-microbatches="function=train_step" -weft-pipeline-cut="function=train_step rank=1 schedule=1f1b microbatches=2" | FileCheck %s --check-prefix=RANK1
// RUN: weft-opt %s -weft-derive-train-step="micro-batches=2 mark-phases=true optimizer=sgd weight-decay=0" -weft-shard-presets="mesh=pp=2" -weft-split-stages="stages=2 boundaries=1" -weft-outline-microbatches="function=train_step" -weft-pipeline-cut="function=train_step rank=1 schedule=gpipe microbatches=2" | FileCheck %s --check-prefix=GPIPE
// RUN: weft-opt %s -weft-derive-train-step="micro-batches=2 mark-phases=true optimizer=sgd weight-decay=0" -weft-shard-presets="mesh=pp=2" -weft-split-stages="stages=2 boundaries=1" -weft-outline-microbatches="function=train_step split-backward=true" -weft-pipeline-cut="function=train_step rank=1 schedule=zb-h1 microbatches=2" | FileCheck %s --check-prefix=ZB
// RUN: not weft-opt %s -weft-derive-train-step="micro-batches=2 mark-phases=true optimizer=sgd weight-decay=0" -weft-shard-presets="mesh=pp=2" -weft-split-stages="stages=2 boundaries=1" -weft-outline-microbatches="function=train_step split-backward=true" -weft-pipeline-cut="function=train_step rank=1 schedule=1f1b microbatches=2" 2>&1 | FileCheck %s --check-prefix=WHOLE
// RUN: not weft-opt %s -weft-derive-train-step="micro-batches=2 mark-phases=true" -weft-shard-presets="mesh=pp=2" -weft-outline-microbatches="function=train_step" -weft-pipeline-cut="function=train_step microbatches=2" 2>&1 | FileCheck %s --check-prefix=UNSPLIT
// RUN: not weft-opt %s -weft-derive-train-step="micro-batches=2 mark-phases=true" -weft-shard-presets="mesh=dp=2 parallel=dp" -weft-split-stages="stages=2" -weft-outline-microbatches="function=train_step" -weft-pipeline-cut="function=train_step microbatches=2" 2>&1 | FileCheck %s --check-prefix=NOPP
// RUN: not weft-opt %s -weft-derive-train-step="micro-batches=2 mark-phases=true" -weft-shard-presets="mesh=pp=2" -weft-split-stages="stages=2" -weft-outline-microbatches="function=train_step" -weft-pipeline-cut="function=train_step rank=2 microbatches=2" 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not weft-opt %s -weft-derive-train-step="micro-batches=2 mark-phases=true" -weft-shard-presets="mesh=pp=2" -weft-split-stages="stages=2" -weft-pipeline-cut="function=train_step microbatches=2" 2>&1 | FileCheck %s --check-prefix=NOLOOP

// Two layers on two pp ranks, two micro-batches. The embedding table is
// also the head's (tied): rank 0 reads it for the lookup, rank 1 for the
// logits.
//
// Rank 0 (1f1b: F0 F1 B0 B1) walks its instruction list as a table: the
// case (0: chunk 0's forward, 1: its backward) and the micro-batch of each
// instruction. The forward slices the micro-batch's inputs, sends h.0's
// output on and keeps what its backward reads in slot k mod 2 (two
// micro-batches are in flight); the backward receives the gradient, reads
// the slot and writes the running sums over the carried ones. After the
// loop the rank sends its share of the table's gradient once, then its
// part of the gradient norm, and receives the summed table gradient. It
// returns the table's new value, h.0's and their momentum.
// RANK0-LABEL: func.func @train_step
// RANK0-SAME: weft.outputs = ["loss", "grad_norm", "param:emb", "param:h.0.w", "state:momentum:emb", "state:momentum:h.0.w"]
// RANK0-DAG: %[[CASES:.*]] = arith.constant dense<[0, 0, 1, 1]> : tensor<4xi64>
// RANK0-DAG: %[[MICROBATCHES:.*]] = arith.constant dense<[0, 1, 0, 1]> : tensor<4xi64>
// RANK0-DAG: %[[STASH:.*]] = bufferization.alloc_tensor() : tensor<2x2x4x8xf32>
// RANK0: scf.for %[[I:.*]] = %{{.*}} to %c4 step %{{.*}} iter_args(%{{.*}}, %{{.*}}, %[[SLOTS:.*]] = %[[STASH]])
// RANK0: tensor.extract %[[CASES]][%[[I]]]
// RANK0: tensor.extract %[[MICROBATCHES]][%[[I]]]
// RANK0: scf.index_switch %{{.*}} {weft.case_runs = array<i64: 2, 2>}
// RANK0: case 0 {
// RANK0: call @weft_pipeline_mark
// RANK0: tensor.extract_slice %arg0[
// RANK0: %[[F:.*]]:2 = func.call @train_step_stage0_forward
// RANK0: shard.send %[[F]]#1 on @mesh grid_axes = [0] destination = [1] {weft.tag = 0 : i64} : (tensor<2x4x8xf32>)
// RANK0: %[[SLOT:.*]] = arith.remui %{{.*}}, %c2
// RANK0: tensor.insert_slice %[[F]]#0 into %[[SLOTS]][%[[SLOT]], 0, 0, 0] [1, 2, 4, 8]
// RANK0: case 1 {
// RANK0: call @weft_pipeline_mark
// RANK0: shard.recv %{{.*}} source = [1] {weft.tag = 1 : i64} : (tensor<2x4x8xf32>)
// RANK0: tensor.extract_slice %[[SLOTS]]
// RANK0: func.call @train_step_stage0_backward
// RANK0: bufferization.materialize_in_destination
// RANK0: default {
// RANK0: shard.send %{{.*}} destination = [1] {weft.tag = 2 : i64} : (tensor<16x8xf32>)
// RANK0: call @weft_pipeline_mark
// RANK0: shard.send %{{.*}} destination = [1] {weft.tag = 3 : i64} : (tensor<1xf32>)
// RANK0: shard.recv %{{.*}} source = [1] {weft.tag = 4 : i64} : (tensor<16x8xf32>)
// RANK0: return
//
// Rank 1 (1f1b: F0 B0 F1 B1) keeps only h.1 and the head, and one
// micro-batch in flight: its slots are one deep. The table comes back
// updated from rank 0 at the end.
// RANK1-LABEL: func.func @train_step
// RANK1-SAME: weft.outputs = ["loss", "grad_norm", "param:emb", "param:h.1.w", "state:momentum:h.1.w"]
// RANK1-NOT: h.0.w
// RANK1-DAG: arith.constant dense<[0, 1, 0, 1]> : tensor<4xi64>
// RANK1-DAG: arith.constant dense<[0, 0, 1, 1]> : tensor<4xi64>
// RANK1-DAG: bufferization.alloc_tensor() : tensor<1x2x4x8xf32>
// RANK1: case 0 {
// RANK1: shard.recv %{{.*}} source = [0] {weft.tag = 0 : i64}
// RANK1: func.call @train_step_stage1_forward
// RANK1: case 1 {
// RANK1: func.call @train_step_stage1_backward
// RANK1: shard.send %{{.*}} destination = [0] {weft.tag = 1 : i64}
// RANK1: default {
// RANK1: shard.recv %{{.*}} source = [0] {weft.tag = 2 : i64} : (tensor<16x8xf32>)
// RANK1: shard.send %{{.*}} destination = [0] {weft.tag = 4 : i64} : (tensor<16x8xf32>)
// RANK1: shard.recv %{{.*}} source = [0] {weft.tag = 8 : i64} : (tensor<16x8xf32>)
// RANK1-NEXT: return
//
// Under GPipe rank 1 runs both forwards before the backwards, and holds
// two micro-batches.
// GPIPE-LABEL: func.func @train_step
// GPIPE-DAG: arith.constant dense<[0, 0, 1, 1]> : tensor<4xi64>
// GPIPE-DAG: arith.constant dense<[0, 1, 0, 1]> : tensor<4xi64>
// GPIPE-DAG: bufferization.alloc_tensor() : tensor<2x2x4x8xf32>
//
// UNSPLIT: error: weft-pipeline-cut: run weft-split-stages with 2 stages first
// NOPP: error: weft-pipeline-cut: the module needs a mesh with a 'pp' axis
// RANK: error: weft-pipeline-cut: rank 2 is not on the pp axis of size 2
// NOLOOP: error: weft-pipeline-cut: the step has no micro-batch loop (run weft-outline-microbatches first)
func.func @main(%ids: tensor<2x4xi64> {weft.input = "input_ids"},
                %emb: tensor<16x8xf32> {weft.param = "emb"},
                %w0: tensor<8x8xf32> {weft.param = "h.0.w"},
                %w1: tensor<8x8xf32> {weft.param = "h.1.w"}) -> tensor<2x4x16xf32> {
  %x = weft.gather %emb, %ids <{axis = 0}> : tensor<16x8xf32>, tensor<2x4xi64> loc("/emb/Gather")
  %h0 = weft.linear %x, %w0 : tensor<2x4x8xf32>, tensor<8x8xf32> loc("/h.0/fc/MatMul")
  %h1 = weft.linear %h0, %w1 : tensor<2x4x8xf32>, tensor<8x8xf32> loc("/h.1/fc/MatMul")
  %t = weft.transpose %emb <{permutation = array<i64: 1, 0>}> : tensor<16x8xf32> loc("/head/Transpose")
  %logits = weft.matmul %h1, %t : tensor<2x4x8xf32>, tensor<8x16xf32> loc("/head/MatMul")
  return %logits : tensor<2x4x16xf32>
}

// ZB-H1, rank 1 with the backward split: its list F0 B0 F1 B1 W0 W1 is
// the case table (0 forward, 1 input gradient, 2 weight gradients), and
// the switch has a case for the weight pass.
// ZB-LABEL: func.func @train_step
// ZB: arith.constant dense<[0, 1, 0, 1, 2, 2]> : tensor<6xi64>
// ZB: arith.constant dense<[0, 0, 1, 1, 0, 1]> : tensor<6xi64>
// ZB: scf.index_switch {{.*}} {weft.case_runs = array<i64: 2, 2, 2>}
// ZB: case 2 {
// ZB: func.call @train_step_stage1_weights
// A schedule of whole backward passes cannot run a split one.
// WHOLE: error: weft-pipeline-cut: the 1f1b schedule runs whole backward passes, and stage 1's is split
