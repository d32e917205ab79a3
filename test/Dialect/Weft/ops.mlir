// RUN: weft-opt %s | FileCheck %s
// RUN: weft-opt %s | weft-opt | FileCheck %s
// RUN: weft-opt -mlir-print-op-generic %s | weft-opt | FileCheck %s

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %i: tensor<2x3xi64>,
                       %m: tensor<2x3xi1>) {
  // CHECK: weft.add %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32>
  %0 = weft.add %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: weft.sub
  %1 = weft.sub %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: weft.mul
  %2 = weft.mul %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: weft.div
  %3 = weft.div %i, %i : tensor<2x3xi64>, tensor<2x3xi64>
  // CHECK: weft.pow
  %4 = weft.pow %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: weft.max
  %5 = weft.max %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: weft.min
  %6 = weft.min %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: weft.and
  %7 = weft.and %m, %m : tensor<2x3xi1>, tensor<2x3xi1>
  // CHECK: weft.or
  %8 = weft.or %m, %m : tensor<2x3xi1>, tensor<2x3xi1>
  // CHECK: weft.xor
  %9 = weft.xor %m, %m : tensor<2x3xi1>, tensor<2x3xi1>
  // CHECK: weft.equal
  %10 = weft.equal %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: weft.less
  %11 = weft.less %i, %i : tensor<2x3xi64>, tensor<2x3xi64>
  // CHECK: weft.less_equal
  %12 = weft.less_equal %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: weft.greater
  %13 = weft.greater %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: weft.greater_equal
  %14 = weft.greater_equal %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: weft.where %{{.*}} : tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>
  %15 = weft.where %m, %a, %b : tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>
  // CHECK: weft.sqrt
  %16 = weft.sqrt %a : tensor<2x3xf32>
  // CHECK: weft.rsqrt
  %17 = weft.rsqrt %a : tensor<2x3xf32>
  // CHECK: weft.exp
  %18 = weft.exp %a : tensor<2x3xf32>
  // CHECK: weft.log
  %19 = weft.log %a : tensor<2x3xf32>
  // CHECK: weft.tanh
  %20 = weft.tanh %a : tensor<2x3xf32>
  // CHECK: weft.erf
  %21 = weft.erf %a : tensor<2x3xf32>
  // CHECK: weft.sigmoid
  %22 = weft.sigmoid %a : tensor<2x3xf32>
  // CHECK: weft.silu
  %23 = weft.silu %a : tensor<2x3xf32>
  // CHECK: weft.reciprocal
  %24 = weft.reciprocal %a : tensor<2x3xf32>
  // CHECK: weft.sin
  %25 = weft.sin %a : tensor<2x3xf32>
  // CHECK: weft.cos
  %26 = weft.cos %a : tensor<2x3xf32>
  // CHECK: weft.neg
  %27 = weft.neg %i : tensor<2x3xi64>
  // CHECK: weft.abs
  %28 = weft.abs %a : tensor<2x3xf32>
  // CHECK: weft.relu
  %29 = weft.relu %a : tensor<2x3xf32>
  // CHECK: weft.gelu %{{.*}} : tensor<2x3xf32>
  %30 = weft.gelu %a : tensor<2x3xf32>
  // CHECK: weft.gelu %{{.*}} {approximate = "tanh"} : tensor<2x3xf32>
  %31 = weft.gelu %a {approximate = "tanh"} : tensor<2x3xf32>
  // CHECK: weft.gelu_grad %{{.*}}, %{{.*}} {approximate = "tanh"} : tensor<2x3xf32>
  %gelu_grad = weft.gelu_grad %a, %a {approximate = "tanh"} : tensor<2x3xf32>
  // CHECK: weft.not
  %32 = weft.not %m : tensor<2x3xi1>
  // CHECK: weft.cast %{{.*}} : tensor<2x3xi64> to tensor<2x3xf32>
  %33 = weft.cast %i : tensor<2x3xi64> to tensor<2x3xf32>
  return
}

// CHECK-LABEL: func.func @contractions
func.func @contractions(%x: tensor<2x16x64xf32>, %w: tensor<64x256xf32>,
                        %wt: tensor<256x64xf32>, %b: tensor<256xf32>,
                        %v: tensor<64xf32>, %img: tensor<1x3x32x32xf32>,
                        %k: tensor<64x3x8x8xf32>, %kb: tensor<64xf32>)
    -> (tensor<2x16x256xf32>, tensor<2x16x256xf32>, tensor<2x16x256xf32>,
        tensor<2x16xf32>, tensor<1x64x4x4xf32>) {
  // CHECK: weft.matmul %{{.*}}, %{{.*}} : tensor<2x16x64xf32>, tensor<64x256xf32>
  %0 = weft.matmul %x, %w : tensor<2x16x64xf32>, tensor<64x256xf32>
  // CHECK: weft.linear %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x16x64xf32>, tensor<64x256xf32>, tensor<256xf32>
  %1 = weft.linear %x, %w, %b : tensor<2x16x64xf32>, tensor<64x256xf32>, tensor<256xf32>
  // CHECK: weft.linear %{{.*}}, %{{.*}} <{transpose_weight}> : tensor<2x16x64xf32>, tensor<256x64xf32>
  %2 = weft.linear %x, %wt <{transpose_weight}> : tensor<2x16x64xf32>, tensor<256x64xf32>
  // CHECK: weft.matmul %{{.*}}, %{{.*}} : tensor<2x16x64xf32>, tensor<64xf32>
  %3 = weft.matmul %x, %v : tensor<2x16x64xf32>, tensor<64xf32>
  // CHECK: weft.conv
  %4 = weft.conv %img, %k, %kb <{dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 8, 8>}> : tensor<1x3x32x32xf32>, tensor<64x3x8x8xf32>, tensor<64xf32>
  return %0, %1, %2, %3, %4 : tensor<2x16x256xf32>, tensor<2x16x256xf32>, tensor<2x16x256xf32>, tensor<2x16xf32>, tensor<1x64x4x4xf32>
}

// CHECK-LABEL: func.func @reductions_and_norms
func.func @reductions_and_norms(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %i: tensor<4x5xi64>)
    -> (tensor<2x16x1xf32>, tensor<2x64xf32>, tensor<16x64xf32>, tensor<4xi64>, tensor<5xi64>) {
  // CHECK: weft.reduce_mean %{{.*}} <{axes = array<i64: 2>, keepdims}> : tensor<2x16x64xf32>
  %0 = weft.reduce_mean %x <{axes = array<i64: 2>, keepdims}> : tensor<2x16x64xf32>
  // CHECK: weft.reduce_sum %{{.*}} <{axes = array<i64: 1>}> : tensor<2x16x64xf32>
  %1 = weft.reduce_sum %x <{axes = array<i64: 1>}> : tensor<2x16x64xf32>
  // CHECK: weft.reduce_max
  %2 = weft.reduce_max %x <{axes = array<i64: 0>}> : tensor<2x16x64xf32>
  // CHECK: weft.reduce_min
  %3 = weft.reduce_min %i <{axes = array<i64: 1>}> : tensor<4x5xi64>
  // CHECK: weft.reduce_prod
  %4 = weft.reduce_prod %i <{axes = array<i64: 0>}> : tensor<4x5xi64>
  // CHECK: weft.softmax %{{.*}} {axis = 2 : i64} : tensor<2x16x64xf32>
  %5 = weft.softmax %x {axis = 2} : tensor<2x16x64xf32>
  // CHECK: weft.log_softmax
  %6 = weft.log_softmax %x {axis = 2} : tensor<2x16x64xf32>
  // CHECK: weft.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
  %7 = weft.layer_norm %x, %g, %g {axis = 2, epsilon = 1.0e-05 : f64} : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
  // CHECK: weft.layer_norm %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 1.000000e-05 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  %8 = weft.layer_norm %x, %g {axis = 2, epsilon = 1.0e-05 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  // CHECK: weft.rms_norm
  %9 = weft.rms_norm %x, %g {axis = 2, epsilon = 1.0e-06 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  return %0, %1, %2, %3, %4 : tensor<2x16x1xf32>, tensor<2x64xf32>, tensor<16x64xf32>, tensor<4xi64>, tensor<5xi64>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x20x32xf32>,
                     %v: tensor<1x2x20x16xf32>, %m: tensor<1x1x16x20xi1>,
                     %am: tensor<16x20xf32>) -> (tensor<1x8x16x16xf32>, tensor<1x8x16x16xf32>) {
  // CHECK: weft.attention %{{.*}}, %{{.*}}, %{{.*}} <{causal}> : tensor<1x8x16x32xf32>, tensor<1x2x20x32xf32>, tensor<1x2x20x16xf32>
  %0 = weft.attention %q, %k, %v <{causal}> : tensor<1x8x16x32xf32>, tensor<1x2x20x32xf32>, tensor<1x2x20x16xf32>
  // CHECK: weft.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} <{scale = 1.250000e-01 : f64}> : {{.*}}, tensor<1x1x16x20xi1>
  %1 = weft.attention %q, %k, %v, %m <{scale = 0.125 : f64}> : tensor<1x8x16x32xf32>, tensor<1x2x20x32xf32>, tensor<1x2x20x16xf32>, tensor<1x1x16x20xi1>
  // CHECK: weft.attention {{.*}} tensor<16x20xf32>
  %2 = weft.attention %q, %k, %v, %am : tensor<1x8x16x32xf32>, tensor<1x2x20x32xf32>, tensor<1x2x20x16xf32>, tensor<16x20xf32>
  return %0, %1 : tensor<1x8x16x16xf32>, tensor<1x8x16x16xf32>
}

// CHECK-LABEL: func.func @attention_grad
func.func @attention_grad(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x16x32xf32>,
                          %v: tensor<1x2x16x16xf32>, %o: tensor<1x8x16x16xf32>) {
  // CHECK: weft.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} <{causal}> : tensor<1x8x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x16xf32>, tensor<1x8x16x16xf32>, tensor<1x8x16x16xf32>
  %0:3 = weft.attention_grad %q, %k, %v, %o, %o <{causal}> : tensor<1x8x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x16xf32>, tensor<1x8x16x16xf32>, tensor<1x8x16x16xf32>
  return
}

// The forward saving its log-sum-exp, and a backward reading it and a mask.
// CHECK-LABEL: func.func @attention_saving_statistics
func.func @attention_saving_statistics(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x16x32xf32>,
                          %v: tensor<1x2x16x16xf32>, %m: tensor<1x1x1x16xi1>) {
  // CHECK: %{{.*}}, %[[LSE:.*]] = weft.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} <{save_log_sum_exp}> : {{.*}}, tensor<1x1x1x16xi1>
  %o, %lse = weft.attention %q, %k, %v, %m <{save_log_sum_exp}> : tensor<1x8x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x16xf32>, tensor<1x1x1x16xi1>
  // CHECK: weft.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} mask(%{{.*}} : tensor<1x1x1x16xi1>) log_sum_exp(%[[LSE]] : tensor<1x8x16xf32>) <{causal}>
  %0:3 = weft.attention_grad %q, %k, %v, %o, %o mask(%m : tensor<1x1x1x16xi1>) log_sum_exp(%lse : tensor<1x8x16xf32>) <{causal}> : tensor<1x8x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x16xf32>, tensor<1x8x16x16xf32>, tensor<1x8x16x16xf32>
  return
}

// CHECK-LABEL: func.func @cross_entropy
func.func @cross_entropy(%logits: tensor<2x16x64xf32>, %labels: tensor<2x16xi64>)
    -> (tensor<2x16xf32>, tensor<2x16x64xf32>) {
  // CHECK: weft.softmax_cross_entropy %{{.*}}, %{{.*}} <{ignore_index = -100 : i64}> : tensor<2x16x64xf32>, tensor<2x16xi64> -> tensor<2x16xf32>
  %loss, %lse = weft.softmax_cross_entropy %logits, %labels <{ignore_index = -100 : i64}> : tensor<2x16x64xf32>, tensor<2x16xi64> -> tensor<2x16xf32>
  // CHECK: weft.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} <{ignore_index = -100 : i64}> : tensor<2x16x64xf32>, tensor<2x16xi64>, tensor<2x16xf32>
  %grad = weft.softmax_cross_entropy_grad %logits, %labels, %lse, %loss <{ignore_index = -100 : i64}> : tensor<2x16x64xf32>, tensor<2x16xi64>, tensor<2x16xf32>
  return %loss, %grad : tensor<2x16xf32>, tensor<2x16x64xf32>
}

// bf16 logits with f32 per-position results (a bf16 lm_head's).
// CHECK-LABEL: func.func @cross_entropy_narrow_logits
func.func @cross_entropy_narrow_logits(%logits: tensor<2x16x64xbf16>, %labels: tensor<2x16xi64>)
    -> (tensor<2x16xf32>, tensor<2x16x64xbf16>) {
  // CHECK: weft.softmax_cross_entropy %{{.*}}, %{{.*}} <{ignore_index = -100 : i64}> : tensor<2x16x64xbf16>, tensor<2x16xi64> -> tensor<2x16xf32>
  %loss, %lse = weft.softmax_cross_entropy %logits, %labels <{ignore_index = -100 : i64}> : tensor<2x16x64xbf16>, tensor<2x16xi64> -> tensor<2x16xf32>
  // CHECK: weft.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} <{ignore_index = -100 : i64}> : tensor<2x16x64xbf16>, tensor<2x16xi64>, tensor<2x16xf32>
  %grad = weft.softmax_cross_entropy_grad %logits, %labels, %lse, %loss <{ignore_index = -100 : i64}> : tensor<2x16x64xbf16>, tensor<2x16xi64>, tensor<2x16xf32>
  return %loss, %grad : tensor<2x16xf32>, tensor<2x16x64xbf16>
}

// CHECK-LABEL: func.func @data_movement
func.func @data_movement(%x: tensor<2x16x64xf32>, %ids: tensor<1x16xi64>,
                         %table: tensor<256x64xf32>, %s: tensor<1x64xf32>) {
  // CHECK: weft.constant dense<9.99999974E-6> : tensor<f32>
  %c = weft.constant dense<1.0e-05> : tensor<f32>
  // CHECK: weft.range {start = 0 : i64, step = 1 : i64} : tensor<16xi64>
  %r = weft.range {start = 0 : i64, step = 1 : i64} : tensor<16xi64>
  // CHECK: weft.gather %{{.*}}, %{{.*}} <{axis = 0 : i64}> : tensor<256x64xf32>, tensor<1x16xi64>
  %0 = weft.gather %table, %ids <{axis = 0}> : tensor<256x64xf32>, tensor<1x16xi64>
  // CHECK: weft.scatter_add %{{.*}}, %{{.*}} : tensor<1x16x64xf32>, tensor<1x16xi64> -> tensor<256x64xf32>
  %s0 = weft.scatter_add %0, %ids : tensor<1x16x64xf32>, tensor<1x16xi64> -> tensor<256x64xf32>
  // CHECK: weft.reshape %{{.*}} : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
  %1 = weft.reshape %x : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
  // CHECK: weft.transpose %{{.*}} <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x16x4x16xf32>
  %2 = weft.transpose %1 <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x16x4x16xf32>
  // CHECK: weft.concat %{{.*}}, %{{.*}} <{axis = 1 : i64}> : tensor<2x16x64xf32>, tensor<2x16x64xf32>
  %3 = weft.concat %x, %x <{axis = 1}> : tensor<2x16x64xf32>, tensor<2x16x64xf32>
  // CHECK: weft.split %{{.*}} <{axis = 2 : i64, sizes = array<i64: 16, 48>}> : tensor<2x16x64xf32>
  %4:2 = weft.split %x <{axis = 2, sizes = array<i64: 16, 48>}> : tensor<2x16x64xf32>
  // CHECK: weft.slice %{{.*}} <{offsets = array<i64: 0, 15, 0>, sizes = array<i64: 2, 8, 64>, strides = array<i64: 1, -2, 1>}> : tensor<2x16x64xf32>
  %5 = weft.slice %x <{offsets = array<i64: 0, 15, 0>, sizes = array<i64: 2, 8, 64>, strides = array<i64: 1, -2, 1>}> : tensor<2x16x64xf32>
  // CHECK: weft.expand %{{.*}} : tensor<1x64xf32> -> tensor<16x64xf32>
  %6 = weft.expand %s : tensor<1x64xf32> -> tensor<16x64xf32>
  // CHECK: weft.squeeze %{{.*}} <{axes = array<i64: 0>}> : tensor<1x64xf32>
  %7 = weft.squeeze %s <{axes = array<i64: 0>}> : tensor<1x64xf32>
  // CHECK: weft.unsqueeze %{{.*}} <{axes = array<i64: 0, 3>}> : tensor<1x64xf32>
  %8 = weft.unsqueeze %s <{axes = array<i64: 0, 3>}> : tensor<1x64xf32>
  // CHECK: weft.trilu %{{.*}} : tensor<1x64xf32>
  %9 = weft.trilu %s : tensor<1x64xf32>
  // CHECK: weft.trilu %{{.*}} {diagonal = 1 : i64, upper} : tensor<1x64xf32>
  %10 = weft.trilu %s {diagonal = 1, upper} : tensor<1x64xf32>
  return
}

// CHECK-LABEL: func.func @model_signature
// CHECK-SAME: (%{{.*}}: tensor<1x16xi64> {weft.input = "input_ids"}, %{{.*}}: tensor<256x64xf32> {weft.param = "wte"})
// CHECK-SAME: weft.outputs = ["embeddings"]
func.func @model_signature(%ids: tensor<1x16xi64> {weft.input = "input_ids"},
                           %wte: tensor<256x64xf32> {weft.param = "wte"})
    -> tensor<1x16x64xf32> attributes {weft.outputs = ["embeddings"]} {
  %0 = weft.gather %wte, %ids <{axis = 0}> : tensor<256x64xf32>, tensor<1x16xi64>
  return %0 : tensor<1x16x64xf32>
}

// CHECK-LABEL: func.func @norm_grad
func.func @norm_grad(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %dy: tensor<2x16x64xf32>)
    -> (tensor<2x16x64xf32>, tensor<2x16x1xf32>, tensor<2x16x64xf32>) {
  // CHECK: weft.norm_grad %{{.*}}, %{{.*}}, %{{.*}} <{axis = 2 : i64, centered, epsilon = 1.000000e-05 : f64}> : tensor<2x16x64xf32>, tensor<64xf32> -> tensor<2x16x1xf32>
  %dx, %mean, %inv = weft.norm_grad %x, %g, %dy <{axis = 2 : i64, centered, epsilon = 1.0e-05 : f64}> : tensor<2x16x64xf32>, tensor<64xf32> -> tensor<2x16x1xf32>
  // CHECK: weft.norm_grad %{{.*}}, %{{.*}}, %{{.*}} <{axis = 2 : i64, epsilon = 9.9999999999999995E-7 : f64}>
  %rx, %rmean, %rinv = weft.norm_grad %x, %g, %dy <{axis = 2 : i64, epsilon = 1.0e-06 : f64}> : tensor<2x16x64xf32>, tensor<64xf32> -> tensor<2x16x1xf32>
  return %dx, %inv, %rx : tensor<2x16x64xf32>, tensor<2x16x1xf32>, tensor<2x16x64xf32>
}

// A norm's gradient may read a narrower result gradient and add an addend.
// CHECK-LABEL: func.func @norm_grad_narrow_add
func.func @norm_grad_narrow_add(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %dy: tensor<2x16x64xbf16>, %r: tensor<2x16x64xf32>)
    -> tensor<2x16x64xf32> {
  // CHECK: weft.norm_grad %{{.*}}, %{{.*}}, %{{.*}} add %{{.*}} <{axis = 2 : i64, centered, epsilon = 1.000000e-05 : f64}> : tensor<2x16x64xf32>, tensor<64xf32>, tensor<2x16x64xbf16> -> tensor<2x16x1xf32>
  %dx, %mean, %inv = weft.norm_grad %x, %g, %dy add %r <{axis = 2 : i64, centered, epsilon = 1.0e-05 : f64}> : tensor<2x16x64xf32>, tensor<64xf32>, tensor<2x16x64xbf16> -> tensor<2x16x1xf32>
  return %dx : tensor<2x16x64xf32>
}

// A norm may round its result to a narrower float as it writes it.
// CHECK-LABEL: func.func @narrow_norms
func.func @narrow_norms(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>) -> (tensor<2x16x64xbf16>, tensor<2x16x64xbf16>) {
  // CHECK: weft.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 1.000000e-05 : f64} : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<2x16x64xbf16>
  %0 = weft.layer_norm %x, %g, %g {axis = 2, epsilon = 1.0e-05 : f64} : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<2x16x64xbf16>
  // CHECK: weft.rms_norm %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 9.9999999999999995E-7 : f64} : tensor<2x16x64xf32>, tensor<64xf32> -> tensor<2x16x64xbf16>
  %1 = weft.rms_norm %x, %g {axis = 2, epsilon = 1.0e-06 : f64} : tensor<2x16x64xf32>, tensor<64xf32> -> tensor<2x16x64xbf16>
  return %0, %1 : tensor<2x16x64xbf16>, tensor<2x16x64xbf16>
}
