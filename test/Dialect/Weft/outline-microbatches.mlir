// RUN: weft-opt %s -split-input-file -weft-derive-train-step="micro-batches=3 optimizer=sgd weight-decay=0" -weft-outline-microbatches="function=train_step" | FileCheck %s --check-prefix=ACCUM
// RUN: weft-opt %s -split-input-file -weft-derive-train-step="micro-batches=2 optimizer=sgd weight-decay=0" -weft-shard-presets="mesh=pp=2" -weft-split-stages="stages=2 boundaries=1" -weft-outline-microbatches="function=train_step" | FileCheck %s --check-prefix=STAGES
// RUN: weft-opt %s -split-input-file -weft-derive-train-step="micro-batches=2 optimizer=sgd weight-decay=0" -weft-outline-microbatches="function=train_step recompute=full" -canonicalize | FileCheck %s --check-prefix=FULL
// RUN: weft-opt %s -split-input-file -weft-derive-train-step="micro-batches=2 optimizer=sgd weight-decay=0" -weft-outline-microbatches="function=train_step recompute=selective" | FileCheck %s --check-prefix=SELECTIVE
// RUN: weft-opt %s -split-input-file -weft-derive-train-step="micro-batches=2 optimizer=sgd weight-decay=0" -weft-shard-presets="mesh=pp=2" -weft-split-stages="stages=2 boundaries=1" -weft-outline-microbatches="function=train_step split-backward=true" | FileCheck %s --check-prefix=SPLIT
// RUN: not weft-opt %s -split-input-file -weft-derive-train-step -weft-outline-microbatches="function=train_step" 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: not weft-opt %s -split-input-file -weft-derive-train-step="micro-batches=2" -weft-outline-microbatches="function=train_step recompute=some" 2>&1 | FileCheck %s --check-prefix=MODE

// Three micro-batches on one stage: the template's second micro-batch
// becomes a forward and a backward function, called in a loop of three
// iterations on the slice of the inputs at the loop's index. The loop
// carries the running sums, each in a buffer of its own from zeros; the
// backward takes them and its result is written over them; the update
// reads the loop's results.
// ACCUM-LABEL: func.func @train_step
// ACCUM-NOT: weft.linear
// ACCUM: %[[LOSS:.*]] = bufferization.alloc_tensor() copy(%{{.*}}) : tensor<f32>
// ACCUM: %[[SUMS:.*]]:5 = scf.for %[[K:.*]] = %c0 to %c3 step %c1 iter_args(%[[LOSSSUM:.*]] = %[[LOSS]], {{.*}})
// ACCUM: tensor.extract_slice %arg0[%[[K]], 0, 0] [1, 2, 4] [1, 1, 1] : tensor<3x2x4xi64> to tensor<1x2x4xi64>
// ACCUM: %[[F:.*]]:8 = func.call @train_step_stage0_forward({{.*}}) {weft.phase = "forward", weft.stage = 0 : i64}
// ACCUM: %[[B:.*]]:5 = func.call @train_step_stage0_backward(%[[F]]#0, {{.*}}%[[LOSSSUM]]{{.*}}) {weft.phase = "backward", weft.stage = 0 : i64}
// ACCUM: bufferization.materialize_in_destination %[[B]]#2 in %[[LOSSSUM]]
// ACCUM-NOT: call
// ACCUM: scf.yield
// ACCUM-NOT: call
// ACCUM: weft.mul %[[SUMS]]#0
// ACCUM: weft.sqrt
// ACCUM: return
// ACCUM-NOT: weft.microbatches
// ACCUM-LABEL: func.func private @train_step_stage0_forward
// ACCUM: weft.linear
// ACCUM: weft.softmax_cross_entropy
// ACCUM: return
// ACCUM-LABEL: func.func private @train_step_stage0_backward
// ACCUM-NOT: weft.microbatch
// ACCUM: weft.linear {{.*}}<{transpose_weight}>
// ACCUM: return

// Split for zero-bubble schedules: stage 1's backward keeps what stage 0
// waits for (the gradient of its input) and its weight gradients become
// a weight pass, called after every backward and reading what the
// backward and the forward left it; stage 0's input gradient is nobody's,
// so its backward is empty and its weight pass does the work.
// SPLIT-LABEL: func.func @train_step
// SPLIT: scf.for
// SPLIT: func.call @train_step_stage0_forward
// SPLIT: func.call @train_step_stage1_forward
// SPLIT: %[[B1:[0-9]+]]:{{[0-9]+}} = func.call @train_step_stage1_backward({{.*}}) {weft.phase = "backward", weft.stage = 1 : i64}
// SPLIT: func.call @train_step_stage0_backward() {weft.phase = "backward", weft.stage = 0 : i64}
// SPLIT: func.call @train_step_stage1_weights({{.*}}) {weft.phase = "backward-weight", weft.stage = 1 : i64}
// SPLIT: func.call @train_step_stage0_weights(%[[B1]]#0, {{.*}}) {weft.phase = "backward-weight", weft.stage = 0 : i64}
// SPLIT: scf.yield
// SPLIT-LABEL: func.func private @train_step_stage1_backward
// SPLIT-NOT: func.func
// SPLIT: weft.linear {{.*}}<{transpose_weight}>
// SPLIT-LABEL: func.func private @train_step_stage1_weights
// SPLIT: weft.matmul
// SPLIT: weft.add %arg{{[0-9]+}}, %{{[0-9]+}}
// SPLIT: return

// Two stages: an iteration calls the forwards in stage order, then the
// backwards from the last stage; stage 0's forward returns its output
// (for stage 1) and the stash its backward reads.
// STAGES-LABEL: func.func @train_step
// STAGES: scf.for
// STAGES: %[[F0:.*]]:2 = func.call @train_step_stage0_forward({{.*}}) {weft.phase = "forward", weft.stage = 0 : i64}
// STAGES: %[[F1:.*]]:6 = func.call @train_step_stage1_forward(%[[F0]]#1, {{.*}}) {weft.phase = "forward", weft.stage = 1 : i64}
// STAGES: %[[B1:.*]]:4 = func.call @train_step_stage1_backward({{.*}}) {weft.phase = "backward", weft.stage = 1 : i64}
// STAGES: func.call @train_step_stage0_backward(%[[B1]]#0, %arg2, %[[F0]]#0, {{.*}}) {weft.phase = "backward", weft.stage = 0 : i64}
// STAGES-NOT: call @train_step_stage
// STAGES: scf.yield
// STAGES-LABEL: func.func private @train_step_stage0_forward
// STAGES-SAME: -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// STAGES: weft.gather
// STAGES: weft.linear
// STAGES-NOT: weft.linear
// STAGES: return
// STAGES-LABEL: func.func private @train_step_stage1_forward
// STAGES-LABEL: func.func private @train_step_stage1_backward
// STAGES-LABEL: func.func private @train_step_stage0_backward

// Full recomputation: the backward redoes the forward from its inputs, so
// the forward returns nothing here (one stage sends nothing on).
// FULL-LABEL: func.func private @train_step_stage0_forward
// FULL-SAME: tensor<2x4xi64>) {
// FULL-NEXT: return
// FULL-LABEL: func.func private @train_step_stage0_backward
// FULL: weft.gather
// FULL: weft.linear %{{.*}}, %arg2  :
// FULL: weft.linear %{{.*}}, %arg3  :
// FULL: weft.softmax_cross_entropy
// FULL: weft.linear {{.*}}<{transpose_weight}>

// Selective recomputation: the forward's contractions and the
// cross-entropy stay in the stash, the cheap work (the head's transposed
// table, a view of a parameter) is redone instead of stashed.
// SELECTIVE-LABEL: func.func private @train_step_stage0_forward
// SELECTIVE-SAME: -> (tensor<f32>, tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// SELECTIVE: weft.linear
// SELECTIVE-LABEL: func.func private @train_step_stage0_backward
// SELECTIVE-NOT: weft.linear %{{.*}}, %arg{{[0-9]+}}  :
// SELECTIVE-NOT: weft.softmax_cross_entropy{{ }}
// SELECTIVE: weft.transpose %arg0 <{permutation = array<i64: 1, 0>}> : tensor<16x8xf32>
// SELECTIVE: weft.softmax_cross_entropy_grad
// SELECTIVE: weft.linear {{.*}}<{transpose_weight}>

// ONE: error: weft-outline-microbatches: the step is not a micro-batch template
// MODE: error: weft-outline-microbatches: unknown recompute mode 'some' (expected none, selective or full)
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
