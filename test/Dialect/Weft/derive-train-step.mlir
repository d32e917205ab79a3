// RUN: weft-opt %s -split-input-file -weft-derive-train-step -verify-diagnostics | FileCheck %s
// RUN: weft-opt %s -split-input-file -weft-derive-train-step="micro-batches=2" -verify-diagnostics | FileCheck %s --check-prefix=ACCUM
// RUN: weft-opt %s -split-input-file -weft-derive-train-step="optimizer=sgd" -verify-diagnostics | FileCheck %s --check-prefix=SGD
// RUN: weft-opt %s -split-input-file -weft-derive-train-step="compute-type=bf16" -verify-diagnostics | FileCheck %s --check-prefix=BF16
// RUN: not weft-opt %s -split-input-file -weft-derive-train-step="token-input=tokens" 2>&1 | FileCheck %s --check-prefix=NAMED
// RUN: weft-opt %s -split-input-file -weft-derive-train-step="fused-attention-backward" -verify-diagnostics | FileCheck %s --check-prefix=FUSED
// RUN: weft-opt %s -split-input-file -weft-derive-train-step="fused-attention-backward compute-type=bf16 attention-in-compute-type" -verify-diagnostics | FileCheck %s --check-prefix=BF16ATTN

// NAMED: weft-derive-train-step: 'main' has no integer input 'tokens' to take as the token ids (its inputs: 'input_ids')

// A one-layer language model: the step takes main's arguments, the labels,
// lr, Adam's bias corrections and the moments, and returns the loss, the
// gradient norm, the new parameters and the new moments. Its contraction
// FLOPs are recorded for MFU: 2 * 6 rows * 4 * 5 = 240 each for the
// linear and its two gradient products (the embedding's gradient is a
// scatter-add, no contraction). The loss is one fused cross-entropy, and
// the embedding's gradient adds rows at the token ids. The loss and
// gradient function stays beside it.
// CHECK-LABEL: func.func @train_loss_grad
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%arg0: tensor<2x3xi64> {weft.input = "input_ids"}, %arg1: tensor<5x4xf32> {weft.param = "emb"}, %arg2: tensor<4x5xf32> {weft.param = "w"}, %arg3: tensor<2x3xi64> {weft.input = "labels"}, %arg4: tensor<f32> {weft.input = "lr"}, %arg5: tensor<f32> {weft.input = "bias1"}, %arg6: tensor<f32> {weft.input = "bias2"}, %arg7: tensor<5x4xf32> {weft.state = "m:emb"}, %arg8: tensor<4x5xf32> {weft.state = "m:w"}, %arg9: tensor<5x4xf32> {weft.state = "v:emb"}, %arg10: tensor<4x5xf32> {weft.state = "v:w"})
// CHECK-SAME: weft.optimizer = {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, flops = 720 : i64, name = "adamw", tokens = "input_ids", vocab = 5 : i64}
// CHECK-SAME: weft.outputs = ["loss", "grad_norm", "param:emb", "param:w", "state:m:emb", "state:m:w", "state:v:emb", "state:v:w"]
// CHECK: weft.softmax_cross_entropy
// CHECK: weft.softmax_cross_entropy_grad
// CHECK: weft.scatter_add {{.*}} -> tensor<5x4xf32>
// CHECK: weft.sqrt

// With two micro-batches the inputs gain a leading dim; each micro-batch is
// a slice, and the mean of the two losses and gradients feeds the update.
// The step is a template (weft.microbatches) with its ops marked.
// ACCUM-LABEL: func.func @train_step
// ACCUM-SAME: (%arg0: tensor<2x2x3xi64> {weft.batch_dim = 1 : i64, weft.input = "input_ids"}
// ACCUM-SAME: %arg3: tensor<2x2x3xi64> {weft.batch_dim = 1 : i64, weft.input = "labels"}
// ACCUM-SAME: weft.microbatches = 2 : i64
// ACCUM-SAME: flops = 1440 : i64
// ACCUM: weft.slice %arg0 <{offsets = array<i64: 0, 0, 0>, sizes = array<i64: 1, 2, 3>{{.*}}weft.microbatch = 0 : i64, weft.phase = "forward"
// ACCUM: weft.softmax_cross_entropy
// ACCUM: weft.slice %arg0 <{offsets = array<i64: 1, 0, 0>, sizes = array<i64: 1, 2, 3>{{.*}}weft.microbatch = 1 : i64, weft.phase = "forward"
// ACCUM: weft.softmax_cross_entropy
// ACCUM: %[[HALF:.*]] = weft.constant {weft.microbatch = 1 : i64, weft.phase = "update"} dense<5.000000e-01> : tensor<f32>
// ACCUM: weft.mul %{{.*}}, %[[HALF]]
// ACCUM: weft.sqrt

// Mixed precision: the linear runs on bf16 copies of its operands; the
// parameters (and their gradients, through the casts' adjoints) stay f32.
// The cross-entropy reads the bf16 logits as the lm_head wrote them, with
// f32 per-position results, and its gradient is bf16: no f32 copy of the
// logits or of their gradient.
// BF16-LABEL: func.func @train_step
// BF16-SAME: %arg2: tensor<4x5xf32> {weft.param = "w"}
// BF16: %[[X:.*]] = weft.cast %{{.*}} : tensor<2x3x4xf32> to tensor<2x3x4xbf16>
// BF16: %[[W:.*]] = weft.cast %arg2 : tensor<4x5xf32> to tensor<4x5xbf16>
// BF16: %[[Y:.*]] = weft.linear %[[X]], %[[W]] : tensor<2x3x4xbf16>, tensor<4x5xbf16>
// BF16-NOT: weft.cast %[[Y]]
// BF16: %[[LOSS:.*]], %[[LSE:.*]] = weft.softmax_cross_entropy %[[Y]], %{{.*}} : tensor<2x3x5xbf16>, tensor<2x3xi64> -> tensor<2x3xf32>
// BF16-NOT: tensor<2x3x5xf32>
// BF16: weft.softmax_cross_entropy_grad %[[Y]], %{{.*}}, %[[LSE]], %{{.*}} : tensor<2x3x5xbf16>, tensor<2x3xi64>, tensor<2x3xf32>

// SGD keeps one momentum buffer per parameter and has no bias corrections.
// SGD-LABEL: func.func @train_step
// SGD-SAME: %arg4: tensor<f32> {weft.input = "lr"}, %arg5: tensor<5x4xf32> {weft.state = "momentum:emb"}, %arg6: tensor<4x5xf32> {weft.state = "momentum:w"})
// SGD-SAME: name = "sgd"
func.func @main(%ids: tensor<2x3xi64> {weft.input = "input_ids"}, %emb: tensor<5x4xf32> {weft.param = "emb"}, %w: tensor<4x5xf32> {weft.param = "w"}) -> tensor<2x3x5xf32> {
  %x = weft.gather %emb, %ids <{axis = 0}> : tensor<5x4xf32>, tensor<2x3xi64>
  %logits = weft.linear %x, %w : tensor<2x3x4xf32>, tensor<4x5xf32>
  return %logits : tensor<2x3x5xf32>
}

// -----

// expected-error @below {{weft-derive-train-step: the first result of 'main' must be float logits [..., vocab]}}
func.func @main(%ids: tensor<2x3xi64> {weft.input = "input_ids"}) -> tensor<2x3xi64> {
  return %ids : tensor<2x3xi64>
}

// -----

// A classifier's logits have no row per token: no next-token labels.
// expected-error @below {{weft-derive-train-step: the first result of 'main' ('scores'), 'tensor<2x5xf32>', holds 2 rows of logits, and the token input 'input_ids', 'tensor<2x3xi64>', holds 6 tokens: training needs one row of logits per token (the next token is its label)}}
func.func @main(%ids: tensor<2x3xi64> {weft.input = "input_ids"}, %emb: tensor<5x4xf32> {weft.param = "emb"}, %w: tensor<4x5xf32> {weft.param = "w"}) -> tensor<2x5xf32> attributes {weft.outputs = ["scores"]} {
  %x = weft.gather %emb, %ids <{axis = 0}> : tensor<5x4xf32>, tensor<2x3xi64>
  %sum = weft.reduce_sum %x <{axes = array<i64: 1>}> : tensor<2x3x4xf32>
  %logits = weft.linear %sum, %w : tensor<2x4xf32>, tensor<4x5xf32>
  return %logits : tensor<2x5xf32>
}

// -----

// The token ids are the only integer input, whatever its name; with
// several, the user names them (weftc --token-input).
// expected-error @below {{weft-derive-train-step: 'main' has several integer inputs ('idx', 'positions'): name the token ids with --token-input (its inputs: 'idx', 'positions')}}
func.func @main(%idx: tensor<2x3xi64> {weft.input = "idx"}, %pos: tensor<2x3xi64> {weft.input = "positions"}, %emb: tensor<5x4xf32> {weft.param = "emb"}) -> tensor<2x3x4xf32> {
  %x = weft.gather %emb, %idx <{axis = 0 : i64}> : tensor<5x4xf32>, tensor<2x3xi64>
  return %x : tensor<2x3x4xf32>
}

// -----

// For context parallelism a mask-free self-attention is differentiated
// into one weft.attention_grad, which the partitioner runs as a ring or an
// all-to-all; without the option its adjoint is decomposed.
// FUSED-LABEL: func.func @train_loss_grad(%arg0: tensor<1x4xi64>
// FUSED: weft.attention {{.*}} {weft.fused_backward}
// FUSED: weft.attention_grad {{.*}} <{causal}>
// FUSED-LABEL: func.func @train_step
// For a target whose fused kernels run attention at the compute type, the
// attention is bf16 and its backward reads the log-sum-exp the forward
// saves, so a step split into functions passes it on.
// BF16ATTN-LABEL: func.func @train_loss_grad(%arg0: tensor<1x4xi64>
// BF16ATTN: %[[OUT:.*]], %[[LSE:.*]] = weft.attention {{.*}} <{causal, save_log_sum_exp}> {weft.fused_backward} : tensor<1x2x4x8xbf16>
// BF16ATTN: weft.attention_grad {{.*}}, %[[OUT]], %{{.*}} log_sum_exp(%[[LSE]] : tensor<1x2x4xf32>) <{causal}>
// BF16ATTN-LABEL: func.func @train_step
// CHECK-LABEL: func.func @train_loss_grad(%arg0: tensor<1x4xi64>
// CHECK-NOT: weft.attention_grad
// CHECK: weft.softmax
func.func @main(%ids: tensor<1x4xi64> {weft.input = "input_ids"}, %emb: tensor<6x16xf32> {weft.param = "emb"}) -> tensor<1x4x6xf32> {
  %x = weft.gather %emb, %ids <{axis = 0}> : tensor<6x16xf32>, tensor<1x4xi64>
  %h = weft.reshape %x : tensor<1x4x16xf32> -> tensor<1x4x2x8xf32>
  %q = weft.transpose %h <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<1x4x2x8xf32>
  %o = weft.attention %q, %q, %q <{causal}> : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  %t = weft.transpose %o <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<1x2x4x8xf32>
  %y = weft.reshape %t : tensor<1x4x2x8xf32> -> tensor<1x4x16xf32>
  %logits = weft.linear %y, %emb <{transpose_weight}> : tensor<1x4x16xf32>, tensor<6x16xf32>
  return %logits : tensor<1x4x6xf32>
}

// -----

// An attention the fused kernels refuse (head dim 4: not a multiple of 8)
// stays f32, saving no statistics: it keeps the decomposition.
// FUSED-LABEL: func.func @train_loss_grad(%arg0: tensor<1x4xi64>
// FUSED-LABEL: func.func @train_step
// BF16ATTN-LABEL: func.func @train_loss_grad(%arg0: tensor<1x4xi64>
// BF16ATTN: weft.attention {{.*}} <{causal}> {weft.fused_backward} : tensor<1x2x4x4xf32>
// BF16ATTN-NOT: save_log_sum_exp
// BF16ATTN: weft.attention_grad {{.*}} <{causal}> :
// BF16ATTN-LABEL: func.func @train_step
func.func @main(%ids: tensor<1x4xi64> {weft.input = "input_ids"}, %emb: tensor<6x8xf32> {weft.param = "emb"}) -> tensor<1x4x6xf32> {
  %x = weft.gather %emb, %ids <{axis = 0}> : tensor<6x8xf32>, tensor<1x4xi64>
  %h = weft.reshape %x : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %q = weft.transpose %h <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<1x4x2x4xf32>
  %o = weft.attention %q, %q, %q <{causal}> : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %t = weft.transpose %o <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<1x2x4x4xf32>
  %y = weft.reshape %t : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %logits = weft.linear %y, %emb <{transpose_weight}> : tensor<1x4x8xf32>, tensor<6x8xf32>
  return %logits : tensor<1x4x6xf32>
}

// -----

// A mask that needs no gradient (one computed from the inputs only) is
// fused with its attention: the gradient op takes it. A float mask
// computed from a parameter (a learned bias) needs its gradient, so that
// attention keeps the decomposed adjoint.
// FUSED-LABEL: func.func @train_loss_grad(%arg0: tensor<1x4xi64>
// FUSED: %[[PAD:.*]] = weft.mul %arg1, %arg1 : tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>
// FUSED: weft.attention {{.*}}, %[[PAD]] {weft.fused_backward}
// FUSED: weft.attention %{{.*}}, %{{.*}}, %{{.*}}, %arg3 :
// FUSED-NOT: fused_backward
// FUSED: weft.attention_grad {{.*}} mask(%[[PAD]] : tensor<1x1x1x4xf32>)
// FUSED-NOT: weft.attention_grad
// FUSED-LABEL: func.func @train_step
func.func @main(%ids: tensor<1x4xi64> {weft.input = "input_ids"}, %pad: tensor<1x1x1x4xf32> {weft.input = "attention_mask"}, %emb: tensor<6x8xf32> {weft.param = "emb"}, %bias: tensor<1x2x4x4xf32> {weft.param = "position_bias"}) -> tensor<1x4x6xf32> {
  %x = weft.gather %emb, %ids <{axis = 0}> : tensor<6x8xf32>, tensor<1x4xi64>
  %h = weft.reshape %x : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %q = weft.transpose %h <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<1x4x2x4xf32>
  %m = weft.mul %pad, %pad : tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>
  %o = weft.attention %q, %q, %q, %m : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x1x1x4xf32>
  %o2 = weft.attention %o, %o, %o, %bias : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %t = weft.transpose %o2 <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<1x2x4x4xf32>
  %y = weft.reshape %t : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %logits = weft.linear %y, %emb <{transpose_weight}> : tensor<1x4x8xf32>, tensor<6x8xf32>
  return %logits : tensor<1x4x6xf32>
}

// -----

// A scalar result named aux_loss (a mixture of experts' load-balancing
// loss) is added to the cross-entropy.
// CHECK-LABEL: func.func @train_loss_grad(%arg0: tensor<2x3xi64> {weft.input = "input_ids"}, %arg1: tensor<5x4xf32> {weft.param = "emb"}, %arg2: tensor<4x5xf32> {weft.param = "w"}, %arg3: tensor<f32> {weft.param = "aux_scale"}
// CHECK: %[[AUX:.*]] = weft.mul %arg3, %arg3 : tensor<f32>, tensor<f32>
// CHECK: weft.softmax_cross_entropy
// CHECK: %[[CE:.*]] = weft.div
// CHECK-NEXT: %[[LOSS:.*]] = weft.add %[[CE]], %[[AUX]] : tensor<f32>, tensor<f32>
// CHECK: return %[[LOSS]],
func.func @main(%ids: tensor<2x3xi64> {weft.input = "input_ids"}, %emb: tensor<5x4xf32> {weft.param = "emb"}, %w: tensor<4x5xf32> {weft.param = "w"}, %s: tensor<f32> {weft.param = "aux_scale"}) -> (tensor<2x3x5xf32>, tensor<f32>) attributes {weft.outputs = ["logits", "aux_loss"]} {
  %x = weft.gather %emb, %ids <{axis = 0}> : tensor<5x4xf32>, tensor<2x3xi64>
  %logits = weft.linear %x, %w : tensor<2x3x4xf32>, tensor<4x5xf32>
  %aux = weft.mul %s, %s : tensor<f32>, tensor<f32>
  return %logits, %aux : tensor<2x3x5xf32>, tensor<f32>
}

// -----

// At bf16 a norm read only by contractions rounds its own result to bf16
// (no f32 copy to cast), and its backward reads the bf16 adjoint, widening
// it as it reads; the scale's gradient takes it widened.
// BF16-LABEL: func.func @train_step
// BF16: %[[N:.*]] = weft.layer_norm %{{.*}}, %arg2 {axis = 2 : i64, epsilon = 1.000000e-05 : f64} : tensor<2x3x4xf32>, tensor<4xf32> -> tensor<2x3x4xbf16>
// BF16-NOT: weft.cast %[[N]]
// BF16: weft.linear %[[N]], %{{.*}} : tensor<2x3x4xbf16>, tensor<4x5xbf16>
// BF16: %[[DX:.*]], %[[MEAN:.*]], %{{.*}} = weft.norm_grad %{{.*}}, %arg2, %[[G:.*]] <{axis = 2 : i64, centered, epsilon = 1.000000e-05 : f64}> : tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3x4xbf16> -> tensor<2x3x1xf32>
// BF16: %[[WIDE:.*]] = weft.cast %[[G]] : tensor<2x3x4xbf16> to tensor<2x3x4xf32>
// BF16: weft.sub %{{.*}}, %[[MEAN]]
// BF16: weft.mul %[[WIDE]], %{{.*}} : tensor<2x3x4xf32>
func.func @main(%ids: tensor<2x3xi64> {weft.input = "input_ids"}, %emb: tensor<5x4xf32> {weft.param = "emb"}, %g: tensor<4xf32> {weft.param = "ln"}, %w: tensor<4x5xf32> {weft.param = "w"}) -> tensor<2x3x5xf32> {
  %x = weft.gather %emb, %ids <{axis = 0}> : tensor<5x4xf32>, tensor<2x3xi64>
  %n = weft.layer_norm %x, %g {axis = 2, epsilon = 1.0e-05 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %logits = weft.linear %n, %w : tensor<2x3x4xf32>, tensor<4x5xf32>
  return %logits : tensor<2x3x5xf32>
}

// -----

// The residual stream's gradient meets the norm's inside the norm's
// gradient, added as its rows are written: no add of the two.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[DX:.*]], %{{.*}}, %{{.*}} = weft.norm_grad %{{.*}}, %arg2, %{{.*}} add %[[RESIDUAL:.*]] <{axis = 2 : i64, centered
// CHECK-NOT: weft.add %[[DX]]
// CHECK-NOT: weft.add %[[RESIDUAL]], %[[DX]]
// CHECK: return
func.func @main(%ids: tensor<2x3xi64> {weft.input = "input_ids"}, %emb: tensor<5x4xf32> {weft.param = "emb"}, %g: tensor<4xf32> {weft.param = "ln"}, %w: tensor<4x4xf32> {weft.param = "w"}, %head: tensor<4x5xf32> {weft.param = "head"}) -> tensor<2x3x5xf32> {
  %x = weft.gather %emb, %ids <{axis = 0}> : tensor<5x4xf32>, tensor<2x3xi64>
  %n = weft.layer_norm %x, %g {axis = 2, epsilon = 1.0e-05 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %h = weft.linear %n, %w : tensor<2x3x4xf32>, tensor<4x4xf32>
  %r = weft.add %x, %h : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %logits = weft.linear %r, %head : tensor<2x3x4xf32>, tensor<4x5xf32>
  return %logits : tensor<2x3x5xf32>
}
