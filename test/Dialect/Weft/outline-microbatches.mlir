// RUN: weft-opt %s -split-input-file -weft-derive-train-step="micro-batches=3 optimizer=sgd weight-decay=0" -weft-outline-microbatches="function=train_step" | FileCheck %s --check-prefix=ACCUM
// RUN: weft-opt %s -split-input-file -weft-derive-train-step="micro-batches=2 optimizer=sgd weight-decay=0" -weft-shard-presets="mesh=pp=2" -weft-split-stages="stages=2 boundaries=1" -weft-outline-microbatches="function=train_step" | FileCheck %s --check-prefix=STAGES
// RUN: weft-opt %s -split-input-file -weft-derive-train-step="micro-batches=2 optimizer=sgd weight-decay=0" -weft-outline-microbatches="function=train_step recompute=full" -canonicalize | FileCheck %s --check-prefix=FULL
// RUN: weft-opt %s -split-input-file -weft-derive-train-step="micro-batches=2 optimizer=sgd weight-decay=0" -weft-outline-microbatches="function=train_step recompute=selective" | FileCheck %s --check-prefix=SELECTIVE
// RUN: not weft-opt %s -split-input-file -weft-derive-train-step -weft-outline-microbatches="function=train_step" 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: not weft-opt %s -split-input-file -weft-derive-train-step="micro-batches=2" -weft-outline-microbatches="function=train_step recompute=some" 2>&1 | FileCheck %s --check-prefix=MODE

// Three micro-batches on one stage: the template's second micro-batch
// becomes a forward and a backward function, called three times on the
// slices 0, 1 and 2 of the inputs. The backward takes the running sums
// (zeros first, then the previous call's) and returns them with its part
// added; the update reads the last call's.
// ACCUM-LABEL: func.func @train_step
// ACCUM-NOT: weft.linear
// ACCUM: weft.slice %arg0 <{offsets = array<i64: 0, 0, 0>
// ACCUM: %[[F0:.*]]:11 = call @train_step_stage0_forward({{.*}}) {weft.microbatch = 0 : i64, weft.phase = "forward", weft.stage = 0 : i64}
// ACCUM: %[[B0:.*]]:5 = call @train_step_stage0_backward(%[[F0]]#0, {{.*}}) {weft.microbatch = 0 : i64, weft.phase = "backward", weft.stage = 0 : i64}
// ACCUM: weft.slice %arg0 <{offsets = array<i64: 1, 0, 0>
// ACCUM: %[[F1:.*]]:11 = call @train_step_stage0_forward
// ACCUM: %[[B1:.*]]:5 = call @train_step_stage0_backward(%[[F1]]#0, {{.*}}%[[B0]]#2, {{.*}}%[[B0]]#0, %[[B0]]#1, %[[B0]]#3, %[[B0]]#4) {weft.microbatch = 1 : i64
// ACCUM: weft.slice %arg0 <{offsets = array<i64: 2, 0, 0>
// ACCUM: call @train_step_stage0_forward
// ACCUM: %[[B2:.*]]:5 = call @train_step_stage0_backward({{.*}}%[[B1]]#2, {{.*}}%[[B1]]#0, %[[B1]]#1, %[[B1]]#3, %[[B1]]#4) {weft.microbatch = 2 : i64
// ACCUM-NOT: call
// ACCUM: weft.sqrt
// ACCUM: return
// ACCUM-NOT: weft.microbatches
// ACCUM-LABEL: func.func private @train_step_stage0_forward
// ACCUM: weft.linear
// ACCUM: weft.log_softmax
// ACCUM: return
// ACCUM-LABEL: func.func private @train_step_stage0_backward
// ACCUM-NOT: weft.microbatch
// ACCUM: weft.linear {{.*}}<{transpose_weight}>
// ACCUM: return

// Two stages: a round calls the forwards in stage order, then the
// backwards from the last stage; stage 0's forward returns its output
// (for stage 1) and the stash its backward reads.
// STAGES-LABEL: func.func @train_step
// STAGES: %[[F0:.*]]:2 = call @train_step_stage0_forward({{.*}}) {weft.microbatch = 0 : i64, weft.phase = "forward", weft.stage = 0 : i64}
// STAGES: %[[F1:.*]]:9 = call @train_step_stage1_forward(%[[F0]]#1, {{.*}}) {weft.microbatch = 0 : i64, weft.phase = "forward", weft.stage = 1 : i64}
// STAGES: %[[B1:.*]]:4 = call @train_step_stage1_backward({{.*}}) {weft.microbatch = 0 : i64, weft.phase = "backward", weft.stage = 1 : i64}
// STAGES: call @train_step_stage0_backward(%[[B1]]#0, %arg2, %[[F0]]#0, {{.*}}) {weft.microbatch = 0 : i64, weft.phase = "backward", weft.stage = 0 : i64}
// STAGES: call @train_step_stage0_forward({{.*}}) {weft.microbatch = 1 : i64
// STAGES: call @train_step_stage1_forward({{.*}}) {weft.microbatch = 1 : i64
// STAGES: call @train_step_stage1_backward({{.*}}) {weft.microbatch = 1 : i64
// STAGES: call @train_step_stage0_backward({{.*}}) {weft.microbatch = 1 : i64
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
// FULL: weft.log_softmax
// FULL: weft.linear {{.*}}<{transpose_weight}>

// Selective recomputation: the forward's contractions stay in the stash,
// the elementwise work on them (the label masks) is redone.
// SELECTIVE-LABEL: func.func private @train_step_stage0_forward
// SELECTIVE: weft.linear
// SELECTIVE-LABEL: func.func private @train_step_stage0_backward
// SELECTIVE-NOT: weft.linear %{{.*}}, %arg{{[0-9]+}}  :
// SELECTIVE-NOT: weft.log_softmax
// SELECTIVE: weft.not
// SELECTIVE: weft.cast
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
