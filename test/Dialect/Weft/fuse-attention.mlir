// RUN: weft-opt %s -split-input-file -weft-fuse-attention | FileCheck %s
// RUN: weft-eval %s -split-input-file --compare-pipeline=weft-fuse-attention | FileCheck %s --check-prefix=SAME

// The rewrite computes the same function (reference evaluator, random inputs):
// SAME: @causal_where result #0: {{.*}}: ok
// SAME: @additive_mask result #0: {{.*}}: ok
// SAME: @three_d result #0: {{.*}}: ok
// SAME: @negated_mask result #0: {{.*}}: ok
// SAME: @multiplicative_mask result #0: {{.*}}: ok
// SAME: @softmax_wrong_axis result #0: {{.*}}: ok
// SAME: @masked_head_view result #0: {{.*}}: ok
// SAME: @clamped_scores result #0: {{.*}}: ok
// SAME: @four_d_softmax result #0: {{.*}}: ok
// SAME: @alibi result #0: {{.*}}: ok
// SAME: @multi_query result #0: {{.*}}: ok
// SAME: @two_keep_masks result #0: {{.*}}: ok

// Scores scaled by a division, causal Where mask with a large negative fill.
// CHECK-LABEL: func.func @causal_where
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x8xf32>, %[[KT:.*]]: tensor<1x2x8x4xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK: %[[K:.*]] = weft.transpose %[[KT]] <{permutation = array<i64: 0, 1, 3, 2>}>
// CHECK: %[[O:.*]] = weft.attention %[[Q]], %[[K]], %[[V]] <{causal}>
// CHECK-NOT: weft.softmax
// CHECK: return %[[O]]
func.func @causal_where(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %mask = weft.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %fill = weft.constant dense<-3.40282347E+38> : tensor<f32>
  %c = weft.constant dense<2.82842708> : tensor<f32>
  %s = weft.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>
  %sd = weft.div %s, %c : tensor<1x2x4x4xf32>, tensor<f32>
  %m = weft.where %mask, %sd, %fill : tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>
  %p = weft.softmax %m {axis = 3} : tensor<1x2x4x4xf32>
  %o = weft.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Additive mask and a non-default scale (q pre-scaled by 0.5).
// CHECK-LABEL: func.func @additive_mask
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<1x1x4x4xf32>
// CHECK: weft.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[M]] <{scale = 5.000000e-01 : f64}>
func.func @additive_mask(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x8xf32>, %mask: tensor<1x1x4x4xf32>) -> tensor<1x2x4x8xf32> {
  %c = weft.constant dense<0.5> : tensor<f32>
  %qs = weft.mul %q, %c : tensor<1x2x4x8xf32>, tensor<f32>
  %s = weft.matmul %qs, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>
  %m = weft.add %s, %mask : tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>
  %p = weft.softmax %m {axis = 3} : tensor<1x2x4x4xf32>
  %o = weft.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// 3-D operands ([batch*heads, seq, dim], as torch.nn.MultiheadAttention
// exports) get a unit heads dim.
// CHECK-LABEL: func.func @three_d
// CHECK: weft.unsqueeze
// CHECK: %[[A:.*]] = weft.attention {{.*}} : tensor<8x1x5x4xf32>
// CHECK: weft.squeeze %[[A]] <{axes = array<i64: 1>}>
func.func @three_d(%q: tensor<8x5x4xf32>, %kt: tensor<8x4x5xf32>, %v: tensor<8x5x4xf32>) -> tensor<8x5x4xf32> {
  %c = weft.constant dense<0.5> : tensor<f32>
  %s = weft.matmul %q, %kt : tensor<8x5x4xf32>, tensor<8x4x5xf32>
  %sd = weft.mul %s, %c : tensor<8x5x5xf32>, tensor<f32>
  %p = weft.softmax %sd {axis = 2} : tensor<8x5x5xf32>
  %o = weft.matmul %p, %v : tensor<8x5x5xf32>, tensor<8x5x4xf32>
  return %o : tensor<8x5x4xf32>
}

// -----

// Where with swapped arms masks where the condition holds: the mask is
// negated. A non-causal constant stays a mask.
// CHECK-LABEL: func.func @negated_mask
// CHECK: %[[N:.*]] = weft.not
// CHECK: weft.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[N]] <{scale = 1.000000e+00 : f64}>
func.func @negated_mask(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x8xf32>, %pad: tensor<1x1x1x4xi1>) -> tensor<1x2x4x8xf32> {
  %fill = weft.constant dense<0xFF800000> : tensor<f32>
  %s = weft.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>
  %m = weft.where %pad, %fill, %s : tensor<1x1x1x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>
  %p = weft.softmax %m {axis = 3} : tensor<1x2x4x4xf32>
  %o = weft.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Megatron's multiplicative mask s * m - 10000 * (1 - m) is not equivalent
// for a non-binary m: left alone.
// CHECK-LABEL: func.func @multiplicative_mask
// CHECK-NOT: weft.attention
func.func @multiplicative_mask(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x8xf32>, %mask: tensor<1x1x4x4xf32>) -> tensor<1x2x4x8xf32> {
  %one = weft.constant dense<1.0> : tensor<f32>
  %big = weft.constant dense<10000.0> : tensor<f32>
  %s = weft.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>
  %sm = weft.mul %s, %mask : tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>
  %inv = weft.sub %one, %mask : tensor<f32>, tensor<1x1x4x4xf32>
  %pen = weft.mul %inv, %big : tensor<1x1x4x4xf32>, tensor<f32>
  %m = weft.sub %sm, %pen : tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>
  %p = weft.softmax %m {axis = 3} : tensor<1x2x4x4xf32>
  %o = weft.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Softmax over a non-last axis is not attention.
// CHECK-LABEL: func.func @softmax_wrong_axis
// CHECK-NOT: weft.attention
func.func @softmax_wrong_axis(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = weft.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>
  %p = weft.softmax %s {axis = 2} : tensor<1x2x4x4xf32>
  %o = weft.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// BART: 3-D [B*H, S, T] scores masked in a [B, H, S, T] view between two
// reshapes; the operands are viewed as [B, H, S, D].
// CHECK-LABEL: func.func @masked_head_view
// CHECK-SAME: %[[PAD:[a-z0-9]+]]: tensor<2x1x1x5xi1>
// CHECK: %[[NOT:.*]] = weft.not %[[PAD]]
// CHECK: %[[Q:.*]] = weft.reshape %{{.*}} : tensor<6x4x8xf32> -> tensor<2x3x4x8xf32>
// CHECK: %[[A:.*]] = weft.attention %[[Q]], %{{.*}}, %{{.*}}, %[[NOT]] <{scale = 1.000000e+00 : f64}> : {{.*}}, tensor<2x1x1x5xi1>
// CHECK: weft.reshape %[[A]] : tensor<2x3x4x8xf32> -> tensor<6x4x8xf32>
func.func @masked_head_view(%q: tensor<6x4x8xf32>, %kt: tensor<6x8x5xf32>, %v: tensor<6x5x8xf32>, %pad: tensor<2x1x1x5xi1>) -> tensor<6x4x8xf32> {
  %fill = weft.constant dense<0xFF800000> : tensor<1xf32>
  %s = weft.matmul %q, %kt : tensor<6x4x8xf32>, tensor<6x8x5xf32>
  %s4 = weft.reshape %s : tensor<6x4x5xf32> -> tensor<2x3x4x5xf32>
  %m = weft.where %pad, %fill, %s4 : tensor<2x1x1x5xi1>, tensor<1xf32>, tensor<2x3x4x5xf32>
  %m3 = weft.reshape %m : tensor<2x3x4x5xf32> -> tensor<6x4x5xf32>
  %p = weft.softmax %m3 {axis = 2} : tensor<6x4x5xf32>
  %o = weft.matmul %p, %v : tensor<6x4x5xf32>, tensor<6x5x8xf32>
  return %o : tensor<6x4x8xf32>
}

// -----

// OPT: 3-D scores of a pre-scaled query, viewed as [B, H, S, T] for an
// additive mask and a clamp at the float minimum (which changes no
// softmax), then viewed back.
// CHECK-LABEL: func.func @clamped_scores
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<2x1x4x4xf32>
// CHECK: %[[A:.*]] = weft.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[M]] <{scale = 5.000000e-01 : f64}> : tensor<2x3x4x8xf32>
// CHECK-NOT: weft.max
// CHECK-NOT: weft.softmax
// CHECK: weft.reshape %[[A]] : tensor<2x3x4x8xf32> -> tensor<6x4x8xf32>
func.func @clamped_scores(%q: tensor<6x4x8xf32>, %kt: tensor<6x8x4xf32>, %v: tensor<6x4x8xf32>, %mask: tensor<2x1x4x4xf32>) -> tensor<6x4x8xf32> {
  %c = weft.constant dense<0.5> : tensor<f32>
  %low = weft.constant dense<-3.40282347E+38> : tensor<f32>
  %qs = weft.mul %q, %c : tensor<6x4x8xf32>, tensor<f32>
  %s = weft.matmul %qs, %kt : tensor<6x4x8xf32>, tensor<6x8x4xf32>
  %s4 = weft.reshape %s : tensor<6x4x4xf32> -> tensor<2x3x4x4xf32>
  %m = weft.add %s4, %mask : tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>
  %cl = weft.max %m, %low : tensor<2x3x4x4xf32>, tensor<f32>
  %m3 = weft.reshape %cl : tensor<2x3x4x4xf32> -> tensor<6x4x4xf32>
  %p = weft.softmax %m3 {axis = 2} : tensor<6x4x4xf32>
  %o = weft.matmul %p, %v : tensor<6x4x4xf32>, tensor<6x4x8xf32>
  return %o : tensor<6x4x8xf32>
}

// -----

// GPT-NeoX: 3-D scores (`baddbmm`) viewed as [B, H, S, T], a causal Where
// and a padding mask added, a 4-D softmax multiplied by 4-D values.
// CHECK-LABEL: func.func @four_d_softmax
// CHECK-SAME: %[[PAD:[a-z0-9]+]]: tensor<2x1x1x4xf32>
// CHECK: %[[Q:.*]] = weft.reshape %{{.*}} : tensor<6x4x8xf32> -> tensor<2x3x4x8xf32>
// CHECK: %[[A:.*]] = weft.attention %[[Q]], %{{.*}}, %{{.*}}, %[[PAD]] <{causal, scale = 2.500000e-01 : f64}> : tensor<2x3x4x8xf32>
// CHECK: return %[[A]]
func.func @four_d_softmax(%q: tensor<6x4x8xf32>, %kt: tensor<6x8x4xf32>, %v: tensor<2x3x4x8xf32>, %pad: tensor<2x1x1x4xf32>) -> tensor<2x3x4x8xf32> {
  %causal = weft.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %fill = weft.constant dense<-3.40282347E+38> : tensor<f32>
  %c = weft.constant dense<0.25> : tensor<f32>
  %s = weft.matmul %q, %kt : tensor<6x4x8xf32>, tensor<6x8x4xf32>
  %ss = weft.mul %s, %c : tensor<6x4x4xf32>, tensor<f32>
  %s4 = weft.reshape %ss : tensor<6x4x4xf32> -> tensor<2x3x4x4xf32>
  %w = weft.where %causal, %s4, %fill : tensor<1x1x4x4xi1>, tensor<2x3x4x4xf32>, tensor<f32>
  %m = weft.add %w, %pad : tensor<2x3x4x4xf32>, tensor<2x1x1x4xf32>
  %p = weft.softmax %m {axis = 3} : tensor<2x3x4x4xf32>
  %o = weft.matmul %p, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>
  return %o : tensor<2x3x4x8xf32>
}

// -----

// Bloom: ALiBi's [B*H, 1, T] bias added to the 3-D scores, a causal mask
// added to their [B, H, S, T] view, the scores scaled after the bias: one
// summed mask, the bias viewed per head.
// CHECK-LABEL: func.func @alibi
// CHECK-SAME: %[[BIAS:[a-z0-9]+]]: tensor<6x1x4xf32>, %[[CAUSAL:[a-z0-9]+]]: tensor<2x1x4x4xf32>
// CHECK: %[[B4:.*]] = weft.reshape %[[BIAS]] : tensor<6x1x4xf32> -> tensor<2x3x1x4xf32>
// CHECK: %[[BS:.*]] = weft.mul %[[B4]], %{{.*}} : tensor<2x3x1x4xf32>, tensor<f32>
// CHECK: %[[M:.*]] = weft.add %[[CAUSAL]], %[[BS]]
// CHECK: %[[A:.*]] = weft.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[M]] <{scale = 1.000000e+00 : f64}>
// CHECK: weft.reshape %[[A]] : tensor<2x3x4x8xf32> -> tensor<6x4x8xf32>
func.func @alibi(%q: tensor<6x4x8xf32>, %kt: tensor<6x8x4xf32>, %v: tensor<6x4x8xf32>, %bias: tensor<6x1x4xf32>, %causal: tensor<2x1x4x4xf32>) -> tensor<6x4x8xf32> {
  %c = weft.constant dense<0.5> : tensor<f32>
  %two = weft.constant dense<2.0> : tensor<f32>
  %s = weft.matmul %q, %kt : tensor<6x4x8xf32>, tensor<6x8x4xf32>
  %ss = weft.mul %s, %c : tensor<6x4x4xf32>, tensor<f32>
  %sb = weft.add %bias, %ss : tensor<6x1x4xf32>, tensor<6x4x4xf32>
  %sb2 = weft.mul %sb, %two : tensor<6x4x4xf32>, tensor<f32>
  %s4 = weft.reshape %sb2 : tensor<6x4x4xf32> -> tensor<2x3x4x4xf32>
  %m = weft.add %s4, %causal : tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>
  %p = weft.softmax %m {axis = 3} : tensor<2x3x4x4xf32>
  %p3 = weft.reshape %p : tensor<2x3x4x4xf32> -> tensor<6x4x4xf32>
  %o = weft.matmul %p3, %v : tensor<6x4x4xf32>, tensor<6x4x8xf32>
  return %o : tensor<6x4x8xf32>
}

// -----

// Multi-query attention: one key/value head the product broadcasts to
// every query head.
// CHECK-LABEL: func.func @multi_query
// CHECK: weft.attention %{{.*}}, %{{.*}}, %{{.*}} <{causal}> : tensor<2x3x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>{{$}}
func.func @multi_query(%q: tensor<2x3x4x8xf32>, %kt: tensor<2x1x8x4xf32>, %v: tensor<2x1x4x8xf32>) -> tensor<2x3x4x8xf32> {
  %mask = weft.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %fill = weft.constant dense<-1.0e+09> : tensor<f32>
  %c = weft.constant dense<0.353553385> : tensor<f32>
  %s = weft.matmul %q, %kt : tensor<2x3x4x8xf32>, tensor<2x1x8x4xf32>
  %ss = weft.mul %s, %c : tensor<2x3x4x4xf32>, tensor<f32>
  %m = weft.where %mask, %ss, %fill : tensor<4x4xi1>, tensor<2x3x4x4xf32>, tensor<f32>
  %p = weft.softmax %m {axis = 3} : tensor<2x3x4x4xf32>
  %o = weft.matmul %p, %v : tensor<2x3x4x4xf32>, tensor<2x1x4x8xf32>
  return %o : tensor<2x3x4x8xf32>
}

// -----

// Two keep-masks cannot be one operand: left alone.
// CHECK-LABEL: func.func @two_keep_masks
// CHECK-NOT: weft.attention
func.func @two_keep_masks(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x8xf32>, %a: tensor<1x1x4x4xi1>, %b: tensor<1x1x1x4xi1>) -> tensor<1x2x4x8xf32> {
  %fill = weft.constant dense<-1.0e+09> : tensor<f32>
  %s = weft.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>
  %m1 = weft.where %a, %s, %fill : tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>
  %m2 = weft.where %b, %m1, %fill : tensor<1x1x1x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>
  %p = weft.softmax %m2 {axis = 3} : tensor<1x2x4x4xf32>
  %o = weft.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}
