// RUN: weft-opt %s -split-input-file -convert-weft-to-linalg | FileCheck %s
// RUN: weft-opt %s -split-input-file -convert-weft-to-linalg | FileCheck %s --check-prefix=NOWEFT

// No weft op survives the conversion.
// NOWEFT-NOT: weft.

// Broadcasting is an indexing map that reads index 0 (or skips the dim).
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[COL:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-LABEL: func.func @broadcast_add
// CHECK: linalg.generic {indexing_maps = [#[[ROW]], #[[COL]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK: arith.addf
func.func @broadcast_add(%a: tensor<3xf32>, %b: tensor<2x1xf32>) -> tensor<2x3xf32> {
  %0 = weft.add %a, %b : tensor<3xf32>, tensor<2x1xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// A contraction: one reduction loop, multiply-accumulate body, zero init.
// CHECK-LABEL: func.func @batched_matmul
// CHECK: linalg.fill
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK: arith.mulf
// CHECK: arith.addf
func.func @batched_matmul(%a: tensor<4x2x3xf32>, %b: tensor<3x5xf32>) -> tensor<4x2x5xf32> {
  %0 = weft.matmul %a, %b : tensor<4x2x3xf32>, tensor<3x5xf32>
  return %0 : tensor<4x2x5xf32>
}

// -----

// Softmax over the last dim is a row kernel: per row, a max pass, an exp
// pass that writes the row and sums it, and a divide pass in place.
// CHECK-LABEL: func.func @softmax
// CHECK: scf.forall (%[[ROW:.*]]) in (2) shared_outs(%[[OUT:.*]] = %{{.*}}) -> (tensor<2x8xf32>)
// CHECK: %[[X:.*]] = tensor.extract_slice %{{.*}}[%[[ROW]], 0] [1, 8] [1, 1] : tensor<2x8xf32> to tensor<8xf32>
// CHECK: %[[MAX:.*]] = scf.for {{.*}} -> (f32)
// CHECK: arith.maxnumf {{.*}} fastmath<reassoc,contract>
// CHECK: %[[EXPS:.*]]:2 = scf.for {{.*}} -> (tensor<8xf32>, f32)
// CHECK: arith.subf %{{.*}}, %[[MAX]]
// CHECK: math.exp
// CHECK: tensor.insert
// CHECK: arith.addf {{.*}} fastmath<reassoc,contract>
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[EXPS]]#0)
// CHECK: arith.divf %{{.*}}, %[[EXPS]]#1
// CHECK: tensor.parallel_insert_slice %{{.*}} into %[[OUT]][%[[ROW]], 0] [1, 8] [1, 1]
func.func @softmax(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = weft.softmax %x {axis = 1} : tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// log_softmax: max, sum of exponentials, then x - max - log(sum).
// CHECK-LABEL: func.func @log_softmax
// CHECK: scf.forall
// CHECK: arith.maxnumf
// CHECK: math.exp
// CHECK: math.log
// CHECK: arith.subf
// CHECK: arith.subf
// CHECK: tensor.insert
func.func @log_softmax(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = weft.log_softmax %x {axis = 1} : tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Softmax along an inner dim reads strided rows: reduction generics.
// CHECK-LABEL: func.func @softmax_inner_axis
// CHECK-NOT: scf.forall
// CHECK: linalg.generic
// CHECK: arith.maxnumf
func.func @softmax_inner_axis(%x: tensor<2x8x3xf32>) -> tensor<2x8x3xf32> {
  %0 = weft.softmax %x {axis = 1} : tensor<2x8x3xf32>
  return %0 : tensor<2x8x3xf32>
}

// -----

// Layer norm over the trailing two dims: rows of 3 x 8 = 24 elements, one
// forall iteration per row, mean and variance passes, then the write pass.
// CHECK-LABEL: func.func @layer_norm
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1]] output_shape [2, 24]
// CHECK: scf.forall (%{{.*}}) in (2)
// CHECK: %[[SUM:.*]] = scf.for {{.*}} -> (f32)
// CHECK: %[[MEAN:.*]] = arith.divf %[[SUM]]
// CHECK: %[[SQUARES:.*]] = scf.for {{.*}} -> (f32)
// CHECK: arith.subf %{{.*}}, %[[MEAN]]
// CHECK: arith.divf %[[SQUARES]]
// CHECK: math.rsqrt
// CHECK: scf.for {{.*}} -> (tensor<24xf32>)
// CHECK: tensor.insert
func.func @layer_norm(%x: tensor<2x3x8xf32>, %g: tensor<3x8xf32>, %b: tensor<3x8xf32>) -> tensor<2x3x8xf32> {
  %0 = weft.layer_norm %x, %g, %b {axis = 1, epsilon = 1.0e-5 : f64} : tensor<2x3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>
  return %0 : tensor<2x3x8xf32>
}

// -----

// RMS norm has no mean pass.
// CHECK-LABEL: func.func @rms_norm
// CHECK: scf.forall (%{{.*}}) in (4)
// CHECK-COUNT-2: scf.for %
// CHECK-NOT: scf.for %
// CHECK: tensor.parallel_insert_slice
func.func @rms_norm(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = weft.rms_norm %x, %g {axis = 1, epsilon = 1.0e-6 : f64} : tensor<4x8xf32>, tensor<8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Grouped-query attention reads key/value head h floordiv group.
// CHECK-DAG: #[[KV:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 2, d3, d4)>
// CHECK-LABEL: func.func @gqa_attention
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[KV]], #{{.*}}]
// CHECK: arith.select
func.func @gqa_attention(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) -> tensor<1x4x3x8xf32> {
  %0 = weft.attention %q, %k, %v <{causal}> : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
  return %0 : tensor<1x4x3x8xf32>
}

// -----

// Reshapes go through a 1-D collapse and expand.
// CHECK-LABEL: func.func @reshape
// CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0, 1, 2]] : tensor<2x3x4xf32> into tensor<24xf32>
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1]] output_shape [6, 4] : tensor<24xf32> into tensor<6x4xf32>
func.func @reshape(%x: tensor<2x3x4xf32>) -> tensor<6x4xf32> {
  %0 = weft.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// -----

// Cross-entropy: one generic over the positions; its body makes the max and
// sum-of-exponentials passes over the row and reads the label's logit (the
// label clamped into range, the loss zeroed where ignored).
// CHECK-LABEL: func.func @softmax_cross_entropy
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel"]
// CHECK: scf.for
// CHECK: arith.maxnumf
// CHECK: scf.for
// CHECK: math.exp
// CHECK: math.log
// CHECK: arith.cmpi eq, %{{.*}}, %c-100_i64
// CHECK: tensor.extract
// CHECK: arith.select
// CHECK: linalg.yield
// CHECK-NOT: linalg.generic
func.func @softmax_cross_entropy(%x: tensor<2x3x8xf32>, %labels: tensor<2x3xi64>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %loss, %lse = weft.softmax_cross_entropy %x, %labels <{ignore_index = -100 : i64}> : tensor<2x3x8xf32>, tensor<2x3xi64> -> tensor<2x3xf32>
  return %loss, %lse : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Its gradient: one elementwise generic over the logits, written into them.
// CHECK-LABEL: func.func @softmax_cross_entropy_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8xf32>,
// CHECK: tensor.collapse_shape %[[X]]
// CHECK: %[[ROWS:.*]] = tensor.expand_shape
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]{{.*}} outs(%[[ROWS]] : tensor<6x8xf32>)
// CHECK: math.exp
// CHECK: linalg.index 1
// CHECK: arith.select
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
func.func @softmax_cross_entropy_grad(%x: tensor<2x3x8xf32>, %labels: tensor<2x3xi64>, %lse: tensor<2x3xf32>, %g: tensor<2x3xf32>) -> tensor<2x3x8xf32> {
  %0 = weft.softmax_cross_entropy_grad %x, %labels, %lse, %g <{ignore_index = -100 : i64}> : tensor<2x3x8xf32>, tensor<2x3xi64>, tensor<2x3xf32>
  return %0 : tensor<2x3x8xf32>
}

// -----

// bf16 logits: both passes read them widened to f32, the per-position
// results stay f32, and the gradient is written back as bf16 into them.
// CHECK-LABEL: func.func @softmax_cross_entropy_bf16
// CHECK: linalg.generic {{.*}}outs(%{{.*}}, %{{.*}} : tensor<6xf32>, tensor<6xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: linalg.yield %{{.*}}, %{{.*}} : f32, f32
// CHECK: linalg.generic {{.*}}outs(%{{.*}} : tensor<6x8xbf16>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @softmax_cross_entropy_bf16(%x: tensor<2x3x8xbf16>, %labels: tensor<2x3xi64>, %g: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3x8xbf16>) {
  %loss, %lse = weft.softmax_cross_entropy %x, %labels <{ignore_index = -100 : i64}> : tensor<2x3x8xbf16>, tensor<2x3xi64> -> tensor<2x3xf32>
  %0 = weft.softmax_cross_entropy_grad %x, %labels, %lse, %g <{ignore_index = -100 : i64}> : tensor<2x3x8xbf16>, tensor<2x3xi64>, tensor<2x3xf32>
  return %loss, %0 : tensor<2x3xf32>, tensor<2x3x8xbf16>
}

// -----

// A gather reads the table with tensor.extract at the (wrapped) index.
// CHECK-LABEL: func.func @gather
// CHECK: arith.index_cast
// CHECK: arith.select
// CHECK: tensor.extract
func.func @gather(%t: tensor<10x4xf32>, %i: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  %0 = weft.gather %t, %i <{axis = 0}> : tensor<10x4xf32>, tensor<2x3xi64>
  return %0 : tensor<2x3x4xf32>
}

// -----

// A bf16 sum (a bias's gradient at --precision bf16) accumulates in f32 and
// rounds once: a bf16 accumulator would lose every addend below 1/256 of
// the running sum over 8192 rows.
// CHECK-LABEL: func.func @bf16_sum
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<8x4xbf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK:         ^bb0(%[[IN:.*]]: bf16, %[[ACC:.*]]: f32):
// CHECK:           %[[WIDE:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK:           arith.addf %[[ACC]], %[[WIDE]]
// CHECK:         linalg.generic {{.*}} ins(%[[SUM]] : tensor<4xf32>) outs(%{{.*}} : tensor<4xbf16>)
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
func.func @bf16_sum(%x: tensor<8x4xbf16>) -> tensor<4xbf16> {
  %0 = weft.reduce_sum %x <{axes = array<i64: 0>}> : tensor<8x4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// A norm's input gradient is one row kernel: passes over the row for the
// mean, the variance and the means of g^ and g^ x^ together, then one that
// writes the gradient; the row's statistics go out as per-row values.
// CHECK-LABEL: func.func @norm_grad
// CHECK:       scf.forall {{.*}} shared_outs({{.*}}) -> (tensor<6x8xf32>, tensor<6xf32>, tensor<6xf32>)
// CHECK:         scf.for
// CHECK:         scf.for
// CHECK:         math.rsqrt
// CHECK:         scf.for {{.*}} -> (f32, f32)
// CHECK:         scf.for {{.*}} -> (tensor<8xf32>)
// CHECK:           tensor.insert
// CHECK:         tensor.insert %{{.*}} into %{{.*}} : tensor<1xf32>
// CHECK:         tensor.insert %{{.*}} into %{{.*}} : tensor<1xf32>
// CHECK:         scf.forall.in_parallel
// CHECK-NOT:   linalg.generic
func.func @norm_grad(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>, %dy: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>) {
  %dx, %mean, %inv = weft.norm_grad %x, %g, %dy <{axis = 2 : i64, centered, epsilon = 1.0e-05 : f64}> : tensor<2x3x8xf32>, tensor<8xf32> -> tensor<2x3x1xf32>
  return %dx, %mean, %inv : tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>
}

// -----

// A bf16 result gradient is widened as it is read; the addend is added as
// the gradient is written.
// CHECK-LABEL: func.func @norm_grad_narrow_add
// CHECK-SAME:    %[[DY:[a-z0-9]+]]: tensor<2x3x8xbf16>, %[[R:[a-z0-9]+]]: tensor<2x3x8xf32>
// CHECK-DAG:   %[[DYM:.*]] = tensor.expand_shape {{.*}} into tensor<6x8xbf16>
// CHECK-DAG:   %[[RM:.*]] = tensor.expand_shape {{.*}} into tensor<6x8xf32>
// CHECK:       scf.forall
// CHECK:         scf.for {{.*}} -> (tensor<8xf32>)
// CHECK:           tensor.extract %[[DYM]]
// CHECK-NEXT:      arith.extf %{{.*}} : bf16 to f32
// CHECK-NEXT:      arith.mulf
// CHECK-NEXT:      arith.subf
// CHECK-NEXT:      arith.subf
// CHECK-NEXT:      %[[DX:.*]] = arith.mulf
// CHECK-NEXT:      %[[ADDEND:.*]] = tensor.extract %[[RM]]
// CHECK-NEXT:      arith.addf %[[DX]], %[[ADDEND]] : f32
func.func @norm_grad_narrow_add(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>, %dy: tensor<2x3x8xbf16>, %r: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>) {
  %dx, %mean, %inv = weft.norm_grad %x, %g, %dy add %r <{axis = 2 : i64, centered, epsilon = 1.0e-05 : f64}> : tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x8xbf16> -> tensor<2x3x1xf32>
  return %dx, %mean, %inv : tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>
}

// -----

// A norm with a bf16 result: the row is computed in f32 and rounded as it
// is written.
// CHECK-LABEL: func.func @narrow_layer_norm
// CHECK:       scf.forall {{.*}} shared_outs(%{{.*}} = %{{.*}}) -> (tensor<6x8xbf16>)
// CHECK:         math.rsqrt
// CHECK:         arith.truncf %{{.*}} : f32 to bf16
// CHECK:         tensor.insert %{{.*}} : tensor<8xbf16>
func.func @narrow_layer_norm(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>) -> tensor<2x3x8xbf16> {
  %0 = weft.layer_norm %x, %g {axis = 2, epsilon = 1.0e-05 : f64} : tensor<2x3x8xf32>, tensor<8xf32> -> tensor<2x3x8xbf16>
  return %0 : tensor<2x3x8xbf16>
}

// -----

// GELU's gradient, one elementwise kernel: grad times the derivative of
// GELU's tanh form (0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx); at bf16
// the operands are widened, the arithmetic is f32 and the result rounded.
// CHECK-LABEL: func.func @gelu_grad
// CHECK: linalg.generic
// CHECK: arith.constant 0.797884583 : f32
// CHECK: math.tanh
// CHECK: arith.constant 1.341450e-01 : f32
// CHECK: arith.subf
// CHECK: linalg.yield
// CHECK-LABEL: func.func @gelu_grad_bf16
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: math.erf
// CHECK: math.exp
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @gelu_grad(%g: tensor<2x8xf32>, %x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = weft.gelu_grad %g, %x {approximate = "tanh"} : tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}
func.func @gelu_grad_bf16(%g: tensor<2x8xbf16>, %x: tensor<2x8xbf16>) -> tensor<2x8xbf16> {
  %0 = weft.gelu_grad %g, %x : tensor<2x8xbf16>
  return %0 : tensor<2x8xbf16>
}
