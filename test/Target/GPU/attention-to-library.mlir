// RUN: weft-opt %s -split-input-file -weft-attention-to-library | FileCheck %s
// RUN: weft-opt %s -split-input-file -weft-attention-to-library="callee=weft_emulated_attention" | FileCheck %s --check-prefix=EMULATED

// A bf16 attention and its backward: the forward saves its log-sum-exp,
// the backward reads it, and both call the fused kernels, declared with the
// runtime contract's signatures.
// CHECK-DAG: func.func private @weft_cuda_attention_forward_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, i64, f64) attributes {weft.fused_attention = "forward"}
// CHECK-DAG: func.func private @weft_cuda_attention_backward_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, i64, f64) attributes {weft.fused_attention = "backward"}
// CHECK-LABEL: func.func @forward_and_backward
// CHECK: %[[O:.*]], %[[LSE:.*]] = weft.attention %arg0, %arg1, %arg2 <{causal, save_log_sum_exp}> {weft.library_call = @weft_cuda_attention_forward_bf16}
// CHECK: weft.attention_grad %arg0, %arg1, %arg2, %[[O]], %arg3 log_sum_exp(%[[LSE]] : tensor<1x4x16xf32>) <{causal}> {weft.library_call = @weft_cuda_attention_backward_bf16}
// EMULATED-LABEL: func.func @forward_and_backward
// EMULATED: weft.library_call = @weft_emulated_attention_forward_bf16
// EMULATED: weft.library_call = @weft_emulated_attention_backward_bf16
func.func @forward_and_backward(%q: tensor<1x4x16x8xbf16>, %k: tensor<1x2x16x8xbf16>, %v: tensor<1x2x16x8xbf16>, %do: tensor<1x4x16x8xbf16>) -> (tensor<1x4x16x8xbf16>, tensor<1x4x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>) {
  %o = weft.attention %q, %k, %v <{causal}> : tensor<1x4x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>
  %dq, %dk, %dv = weft.attention_grad %q, %k, %v, %o, %do <{causal}> : tensor<1x4x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x4x16x8xbf16>, tensor<1x4x16x8xbf16>
  return %o, %dq, %dk, %dv : tensor<1x4x16x8xbf16>, tensor<1x4x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>
}

// -----

// An i1 mask becomes the additive mask the kernels read, once for both.
// CHECK-LABEL: func.func @boolean_mask
// CHECK-DAG: %[[ZERO:.*]] = weft.constant dense<0.000000e+00> : tensor<bf16>
// CHECK-DAG: %[[HIDDEN:.*]] = weft.constant dense<0xFF80> : tensor<bf16>
// CHECK: %[[ADD:.*]] = weft.where %arg3, %[[ZERO]], %[[HIDDEN]] : tensor<2x1x1x16xi1>, tensor<bf16>, tensor<bf16>
// CHECK: weft.attention %arg0, %arg1, %arg2, %[[ADD]] <{save_log_sum_exp}>
// CHECK: weft.attention_grad {{.*}} mask(%[[ADD]] : tensor<2x1x1x16xbf16>) log_sum_exp(
func.func @boolean_mask(%q: tensor<2x4x16x8xbf16>, %k: tensor<2x4x16x8xbf16>, %v: tensor<2x4x16x8xbf16>, %m: tensor<2x1x1x16xi1>) -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>) {
  %o = weft.attention %q, %k, %v, %m : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x1x1x16xi1>
  %dq, %dk, %dv = weft.attention_grad %q, %k, %v, %o, %o mask(%m : tensor<2x1x1x16xi1>) : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>
  return %o, %dq : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>
}

// -----

// A backward whose forward is elsewhere (a micro-batch's forward function)
// gets its statistics from a forward computed beside it.
// CHECK-LABEL: func.func @forward_elsewhere
// CHECK: %{{.*}}, %[[LSE:.*]] = weft.attention %arg0, %arg0, %arg0 <{save_log_sum_exp}> {weft.library_call = @weft_cuda_attention_forward_bf16}
// CHECK: weft.attention_grad %arg0, %arg0, %arg0, %arg1, %arg1 log_sum_exp(%[[LSE]] : tensor<1x2x8xf32>)
func.func @forward_elsewhere(%q: tensor<1x2x8x8xbf16>, %o: tensor<1x2x8x8xbf16>) -> tensor<1x2x8x8xbf16> {
  %dq, %dk, %dv = weft.attention_grad %q, %q, %q, %o, %o : tensor<1x2x8x8xbf16>, tensor<1x2x8x8xbf16>, tensor<1x2x8x8xbf16>, tensor<1x2x8x8xbf16>, tensor<1x2x8x8xbf16>
  return %dq : tensor<1x2x8x8xbf16>
}

// -----

// Shapes cuDNN's fused attention refuses (weft/runtime/Contract.h) keep
// the decomposition: a head dim that is not a multiple of 8, and a
// backward at S = T = 1, whose forward still runs fused.
// CHECK-LABEL: func.func @refused_shapes
// CHECK: weft.attention %arg0, %arg0, %arg0 <{causal}> :
// CHECK: weft.attention_grad %arg0, %arg0, %arg0, %{{.*}}, %{{.*}} <{causal}> :
// CHECK: weft.attention %arg1, %arg1, %arg1 {weft.library_call = @weft_cuda_attention_forward_bf16}
// CHECK: weft.attention_grad %arg1, %arg1, %arg1, %{{.*}}, %{{.*}} :
// CHECK-NOT: weft.library_call
// CHECK: return
func.func @refused_shapes(%q12: tensor<1x2x8x12xbf16>, %q1: tensor<1x2x1x8xbf16>) -> (tensor<1x2x8x12xbf16>, tensor<1x2x1x8xbf16>) {
  %o12 = weft.attention %q12, %q12, %q12 <{causal}> : tensor<1x2x8x12xbf16>, tensor<1x2x8x12xbf16>, tensor<1x2x8x12xbf16>
  %dq12, %dk12, %dv12 = weft.attention_grad %q12, %q12, %q12, %o12, %o12 <{causal}> : tensor<1x2x8x12xbf16>, tensor<1x2x8x12xbf16>, tensor<1x2x8x12xbf16>, tensor<1x2x8x12xbf16>, tensor<1x2x8x12xbf16>
  %o1 = weft.attention %q1, %q1, %q1 : tensor<1x2x1x8xbf16>, tensor<1x2x1x8xbf16>, tensor<1x2x1x8xbf16>
  %dq1, %dk1, %dv1 = weft.attention_grad %q1, %q1, %q1, %o1, %o1 : tensor<1x2x1x8xbf16>, tensor<1x2x1x8xbf16>, tensor<1x2x1x8xbf16>, tensor<1x2x1x8xbf16>, tensor<1x2x1x8xbf16>
  return %dq12, %dq1 : tensor<1x2x8x12xbf16>, tensor<1x2x1x8xbf16>
}

// -----

// f32 keeps the decomposition: cuDNN's fused attention takes no f32.
// CHECK-LABEL: func.func @f32_stays
// CHECK-NOT: weft.library_call
// CHECK-NOT: save_log_sum_exp
// CHECK: return
func.func @f32_stays(%q: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %o = weft.attention %q, %q, %q <{causal}> : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
  %dq, %dk, %dv = weft.attention_grad %q, %q, %q, %o, %o <{causal}> : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
  return %dq : tensor<1x2x8x4xf32>
}
