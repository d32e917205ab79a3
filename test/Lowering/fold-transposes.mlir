// RUN: weft-opt %s -split-input-file --weft-fold-transposes | FileCheck %s

// A head split of one projection (a [B, S, H, D] slice of [B, S, 3 * H *
// D]) transposed to [B, H, S, D] for the fused attention, which reads it
// (here as q, k and v at once): the call reads the slice through a
// permuted view, the copy goes.
// CHECK-LABEL: func.func @read_heads
// CHECK-NOT:     linalg.generic
// CHECK:         %[[Q:.*]] = memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [2, 4, 16, 16], strides: [3072, 16, 192, 1]
// CHECK:         %[[CAST:.*]] = memref.cast %[[Q]] : memref<2x4x16x16xbf16, strided<[3072, 16, 192, 1]>> to memref<*xbf16>
// CHECK:         call @weft_cuda_attention_forward_bf16(%[[CAST]], %[[CAST]], %[[CAST]], %[[CAST]],
#head = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func private @weft_cuda_attention_forward_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, i64, f64) attributes {weft.fused_attention = "forward"}
func.func @read_heads(%qkv: memref<2x16x192xbf16>, %out: memref<2x4x16x16xbf16>, %lse: memref<2x4x16xf32>) {
  %flags = arith.constant 1 : i64
  %scale = arith.constant 0.25 : f64
  %slice = memref.subview %qkv[0, 0, 0] [2, 16, 64] [1, 1, 1] : memref<2x16x192xbf16> to memref<2x16x64xbf16, strided<[3072, 192, 1]>>
  %heads = memref.expand_shape %slice [[0], [1], [2, 3]] output_shape [2, 16, 4, 16] : memref<2x16x64xbf16, strided<[3072, 192, 1]>> into memref<2x16x4x16xbf16, strided<[3072, 192, 16, 1]>>
  %q = memref.alloc() : memref<2x4x16x16xbf16>
  linalg.generic {indexing_maps = [#head, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%heads : memref<2x16x4x16xbf16, strided<[3072, 192, 16, 1]>>) outs(%q : memref<2x4x16x16xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    linalg.yield %in : bf16
  }
  %cq = memref.cast %q : memref<2x4x16x16xbf16> to memref<*xbf16>
  %co = memref.cast %out : memref<2x4x16x16xbf16> to memref<*xbf16>
  %cl = memref.cast %lse : memref<2x4x16xf32> to memref<*xf32>
  call @weft_cuda_attention_forward_bf16(%cq, %cq, %cq, %cq, %co, %cl, %flags, %scale) : (memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, i64, f64) -> ()
  return
}

// -----

// The source is written between the copy and the call: the copy stays.
// CHECK-LABEL: func.func @source_rewritten
// CHECK:         linalg.generic
// CHECK:         linalg.fill
// CHECK:         call @weft_cuda_attention_forward_bf16
#head = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func private @weft_cuda_attention_forward_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, i64, f64) attributes {weft.fused_attention = "forward"}
func.func @source_rewritten(%heads: memref<2x16x4x16xbf16>, %out: memref<2x4x16x16xbf16>, %lse: memref<2x4x16xf32>) {
  %flags = arith.constant 1 : i64
  %scale = arith.constant 0.25 : f64
  %zero = arith.constant 0.0 : bf16
  %q = memref.alloc() : memref<2x4x16x16xbf16>
  linalg.generic {indexing_maps = [#head, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%heads : memref<2x16x4x16xbf16>) outs(%q : memref<2x4x16x16xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    linalg.yield %in : bf16
  }
  linalg.fill ins(%zero : bf16) outs(%heads : memref<2x16x4x16xbf16>)
  %cq = memref.cast %q : memref<2x4x16x16xbf16> to memref<*xbf16>
  %co = memref.cast %out : memref<2x4x16x16xbf16> to memref<*xbf16>
  %cl = memref.cast %lse : memref<2x4x16xf32> to memref<*xf32>
  call @weft_cuda_attention_forward_bf16(%cq, %cq, %cq, %cq, %co, %cl, %flags, %scale) : (memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, i64, f64) -> ()
  return
}

// -----

// A copy whose target a GEMM (here any op but the fused attention) reads
// stays: the GEMM needs its own layout.
// CHECK-LABEL: func.func @other_reader
// CHECK:         linalg.generic {{.*}} ins(%arg0
// CHECK:         linalg.matmul
#head = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @other_reader(%heads: memref<2x16x4x16xbf16>, %w: memref<16x16xbf16>, %y: memref<128x16xf32>) {
  %q = memref.alloc() : memref<2x4x16x16xbf16>
  linalg.generic {indexing_maps = [#head, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%heads : memref<2x16x4x16xbf16>) outs(%q : memref<2x4x16x16xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    linalg.yield %in : bf16
  }
  %rows = memref.collapse_shape %q [[0, 1, 2], [3]] : memref<2x4x16x16xbf16> into memref<128x16xbf16>
  linalg.matmul ins(%rows, %w : memref<128x16xbf16>, memref<16x16xbf16>) outs(%y : memref<128x16xf32>)
  return
}

// -----

// The forward's output transposed back to [B, S, H, D], and the backward's
// gradients transposed and copied into their concatenation: the calls
// write views of the copies' targets, the copies go, and the targets'
// allocations move above the calls.
// CHECK-LABEL: func.func @write_heads
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<2x16x4x16xbf16>
// CHECK:         %[[OUTVIEW:.*]] = memref.reinterpret_cast %[[OUT]] to offset: [0], sizes: [2, 4, 16, 16], strides: [1024, 16, 64, 1]
// CHECK:         memref.cast %[[OUTVIEW]]
// CHECK:         call @weft_cuda_attention_forward_bf16
// CHECK:         %[[GRADS:.*]] = memref.alloc() : memref<2x16x192xbf16>
// CHECK:         %[[DQ:.*]] = memref.subview %[[GRADS]][0, 0, 64] [2, 16, 64]
// CHECK:         %[[DQHEADS:.*]] = memref.expand_shape %[[DQ]] {{\[}}[0], [1], [2, 3]] output_shape [2, 16, 4, 16]
// CHECK:         %[[DQVIEW:.*]] = memref.reinterpret_cast %[[DQHEADS]] to offset: [64], sizes: [2, 4, 16, 16], strides: [3072, 16, 192, 1]
// CHECK:         memref.cast %[[DQVIEW]]
// CHECK:         call @weft_cuda_attention_backward_bf16
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     memref.copy
// CHECK:         return %[[OUT]], %[[GRADS]]
#head = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func private @weft_cuda_attention_forward_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, i64, f64) attributes {weft.fused_attention = "forward"}
func.func private @weft_cuda_attention_backward_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, i64, f64) attributes {weft.fused_attention = "backward"}
func.func @write_heads(%q: memref<2x4x16x16xbf16>, %lse: memref<2x4x16xf32>, %dout: memref<2x4x16x16xbf16>, %dk: memref<2x4x16x16xbf16>, %dv: memref<2x4x16x16xbf16>) -> (memref<2x16x4x16xbf16>, memref<2x16x192xbf16>) {
  %flags = arith.constant 1 : i64
  %scale = arith.constant 0.25 : f64
  %cq = memref.cast %q : memref<2x4x16x16xbf16> to memref<*xbf16>
  %cl = memref.cast %lse : memref<2x4x16xf32> to memref<*xf32>
  %o = memref.alloc() : memref<2x4x16x16xbf16>
  %co = memref.cast %o : memref<2x4x16x16xbf16> to memref<*xbf16>
  call @weft_cuda_attention_forward_bf16(%cq, %cq, %cq, %cq, %co, %cl, %flags, %scale) : (memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, i64, f64) -> ()
  %out = memref.alloc() : memref<2x16x4x16xbf16>
  linalg.generic {indexing_maps = [#head, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%o : memref<2x4x16x16xbf16>) outs(%out : memref<2x16x4x16xbf16>) {
  ^bb0(%in: bf16, %x: bf16):
    linalg.yield %in : bf16
  }
  %cdo = memref.cast %dout : memref<2x4x16x16xbf16> to memref<*xbf16>
  %cdk = memref.cast %dk : memref<2x4x16x16xbf16> to memref<*xbf16>
  %cdv = memref.cast %dv : memref<2x4x16x16xbf16> to memref<*xbf16>
  %dq = memref.alloc() : memref<2x4x16x16xbf16>
  %cdq = memref.cast %dq : memref<2x4x16x16xbf16> to memref<*xbf16>
  call @weft_cuda_attention_backward_bf16(%cq, %cq, %cq, %cq, %co, %cdo, %cl, %cdq, %cdk, %cdv, %flags, %scale) : (memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, i64, f64) -> ()
  %dqt = memref.alloc() : memref<2x16x4x16xbf16>
  linalg.generic {indexing_maps = [#head, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dq : memref<2x4x16x16xbf16>) outs(%dqt : memref<2x16x4x16xbf16>) {
  ^bb0(%in: bf16, %x: bf16):
    linalg.yield %in : bf16
  }
  %rows = memref.collapse_shape %dqt [[0], [1], [2, 3]] : memref<2x16x4x16xbf16> into memref<2x16x64xbf16>
  %grads = memref.alloc() : memref<2x16x192xbf16>
  %slot = memref.subview %grads[0, 0, 64] [2, 16, 64] [1, 1, 1] : memref<2x16x192xbf16> to memref<2x16x64xbf16, strided<[3072, 192, 1], offset: 64>>
  memref.copy %rows, %slot : memref<2x16x64xbf16> to memref<2x16x64xbf16, strided<[3072, 192, 1], offset: 64>>
  return %out, %grads : memref<2x16x4x16xbf16>, memref<2x16x192xbf16>
}

// -----

// The target is read between the call's write and the copy: writing it
// earlier would change what that read sees, so the copy stays.
// CHECK-LABEL: func.func @target_read_before
// CHECK:         call @weft_cuda_attention_forward_bf16
// CHECK:         linalg.generic {{.*}} ins(%arg2
// CHECK:         linalg.generic {{.*}} ins(%[[O:.*]] : memref<2x4x16x16xbf16>)
#head = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func private @weft_cuda_attention_forward_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, i64, f64) attributes {weft.fused_attention = "forward"}
func.func @target_read_before(%q: memref<2x4x16x16xbf16>, %lse: memref<2x4x16xf32>, %out: memref<2x16x4x16xbf16>, %copy: memref<2x16x4x16xbf16>) {
  %flags = arith.constant 1 : i64
  %scale = arith.constant 0.25 : f64
  %cq = memref.cast %q : memref<2x4x16x16xbf16> to memref<*xbf16>
  %cl = memref.cast %lse : memref<2x4x16xf32> to memref<*xf32>
  %o = memref.alloc() : memref<2x4x16x16xbf16>
  %co = memref.cast %o : memref<2x4x16x16xbf16> to memref<*xbf16>
  call @weft_cuda_attention_forward_bf16(%cq, %cq, %cq, %cq, %co, %cl, %flags, %scale) : (memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, i64, f64) -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%out : memref<2x16x4x16xbf16>) outs(%copy : memref<2x16x4x16xbf16>) {
  ^bb0(%in: bf16, %x: bf16):
    %two = arith.addf %in, %in : bf16
    linalg.yield %two : bf16
  }
  linalg.generic {indexing_maps = [#head, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%o : memref<2x4x16x16xbf16>) outs(%out : memref<2x16x4x16xbf16>) {
  ^bb0(%in: bf16, %x: bf16):
    linalg.yield %in : bf16
  }
  return
}

// -----

// An elementwise result copied into a concatenation's slice: the op writes
// the slice itself (on every target; no attention involved).
// CHECK-LABEL: func.func @into_slice
// CHECK:         %[[ALL:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK:         %[[SLOT:.*]] = memref.subview %[[ALL]][0, 4] [4, 4] [1, 1]
// CHECK:         linalg.generic {{.*}} outs(%[[SLOT]] : memref<4x4xf32, strided<[8, 1], offset: 4>>)
// CHECK-NOT:     memref.copy
// CHECK:         return %[[ALL]]
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @into_slice(%x: memref<4x4xf32>) -> memref<4x8xf32> {
  %part = memref.alloc() : memref<4x4xf32>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x4xf32>) outs(%part : memref<4x4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %two = arith.addf %in, %in : f32
    linalg.yield %two : f32
  }
  %all = memref.alloc() : memref<4x8xf32>
  %slot = memref.subview %all[0, 4] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1], offset: 4>>
  memref.copy %part, %slot : memref<4x4xf32> to memref<4x4xf32, strided<[8, 1], offset: 4>>
  return %all : memref<4x8xf32>
}

// -----

// The target is written after the copy while the buffer is still read:
// the reader must see the copied values, so the copy stays.
// CHECK-LABEL: func.func @target_rewritten
// CHECK:         memref.copy
// CHECK:         linalg.fill
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @target_rewritten(%x: memref<4x4xf32>, %t: memref<4x4xf32>, %y: memref<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %part = memref.alloc() : memref<4x4xf32>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x4xf32>) outs(%part : memref<4x4xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  memref.copy %part, %t : memref<4x4xf32> to memref<4x4xf32>
  linalg.fill ins(%zero : f32) outs(%t : memref<4x4xf32>)
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%part : memref<4x4xf32>) outs(%y : memref<4x4xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  return
}

// -----

// A buffer allocated outside the loop whose body copies it: each
// iteration's first use may read the last one's value, so the copy stays.
// CHECK-LABEL: func.func @buffer_outside_loop
// CHECK:         scf.for
// CHECK:           memref.copy
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @buffer_outside_loop(%x: memref<4x4xf32>, %t: memref<4x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %part = memref.alloc() : memref<4x4xf32>
  scf.for %i = %c0 to %c3 step %c1 {
    linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x4xf32>) outs(%part : memref<4x4xf32>) {
    ^bb0(%in: f32, %o: f32):
      %s = arith.addf %in, %o : f32
      linalg.yield %s : f32
    }
    memref.copy %part, %t : memref<4x4xf32> to memref<4x4xf32>
  }
  return
}
