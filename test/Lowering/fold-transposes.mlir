// RUN: weft-opt %s -split-input-file --weft-fold-transposes | FileCheck %s

// q, k and v as the head split of one projection ([B, S, H, D] slices of
// [B, S, 3 * H * D]) transposed to [B, H, S, D] for the fused attention:
// the calls read the slices through permuted views, the copies go.
// CHECK-LABEL: func.func @read_heads
// CHECK-NOT:     linalg.generic
// CHECK:         %[[Q:.*]] = memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [2, 4, 16, 16], strides: [3072, 16, 192, 1]
// CHECK:         %[[CAST:.*]] = memref.cast %[[Q]] : memref<2x4x16x16xbf16, strided<[3072, 16, 192, 1]>> to memref<*xbf16>
// CHECK:         call @weft_cuda_attention_forward_bf16(%[[CAST]], %[[CAST]], %[[CAST]], %[[CAST]],
#head = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func private @weft_cuda_attention_forward_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, i64, f64)
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
func.func private @weft_cuda_attention_forward_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, i64, f64)
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
func.func private @weft_cuda_attention_forward_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, i64, f64)
func.func private @weft_cuda_attention_backward_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, i64, f64)
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
func.func private @weft_cuda_attention_forward_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xf32>, i64, f64)
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
