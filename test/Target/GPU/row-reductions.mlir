// RUN: weft-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(weft-gpu-row-reductions))" | FileCheck %s

// A row sum: one block of 256 threads per row; each thread strides over
// the row, each warp reduces with five butterfly shuffles, lane 0 of each
// warp writes to shared memory, and after the barrier every warp reduces
// the 8 warp totals (lane i reads total i); thread 0 adds the output's
// initial value.
// CHECK-LABEL: func.func @row_sum
// CHECK-DAG:     %[[ROWS:.*]] = arith.constant 64 : index
// CHECK-DAG:     %[[LEN:.*]] = arith.constant 768 : index
// CHECK-DAG:     %[[THREADS:.*]] = arith.constant 256 : index
// CHECK:         scf.if
// CHECK:         gpu.launch blocks(%[[ROW:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[THREADS]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) workgroup(%[[SHARED:.*]] : memref<8xf32, #gpu.address_space<workgroup>>)
// CHECK:           %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:           %[[PARTIAL:.*]] = scf.for %[[J:.*]] = %[[T]] to %[[LEN]] step %[[THREADS]] iter_args(%[[A:.*]] = %[[ZERO]]) -> (f32)
// CHECK:             %[[X:.*]] = memref.load %arg0[%{{.*}}, %{{.*}}] : memref<64x768xf32>
// CHECK:             %[[S:.*]] = arith.addf %[[A]], %[[X]] : f32
// CHECK:             scf.yield %[[S]] : f32
// CHECK:           %{{.*}}, %{{.*}} = gpu.shuffle  xor %[[PARTIAL]], %{{.*}}, %{{.*}} : f32
// CHECK-COUNT-4:   gpu.shuffle  xor
// CHECK:           scf.if
// CHECK:             memref.store %{{.*}}, %[[SHARED]][%{{.*}}] : memref<8xf32, #gpu.address_space<workgroup>>
// CHECK:           gpu.barrier
// CHECK:           %[[LANE:.*]] = arith.cmpi ult, %[[LANEID:.*]], %c8
// CHECK:           memref.load %[[SHARED]][%[[LANEID]]]
// CHECK-COUNT-5:   gpu.shuffle  xor
// CHECK:           scf.if
// CHECK:             %[[INIT:.*]] = memref.load %arg1[%{{.*}}] : memref<64xf32>
// CHECK:             %[[TOTAL:.*]] = arith.addf %[[INIT]], %{{.*}} : f32
// CHECK:             memref.store %[[TOTAL]], %arg1[%{{.*}}] : memref<64xf32>
// CHECK:           gpu.terminator
// CHECK-NOT:     linalg.generic
func.func @row_sum(%x: memref<64x768xf32>, %sum: memref<64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x768xf32>) outs(%sum : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A softmax's maximum over the middle dim of [2, 5, 3]: 6 rows, the row
// index split into (i, k) with k fastest (i is the quotient: the row is
// below 6), identity -inf; the body's work before the combiner (here a
// scale) runs per element.
// CHECK-LABEL: func.func @middle_max
// CHECK:         gpu.launch blocks(%[[ROW:[a-z0-9]+]], %{{.*}}, %{{.*}}) in
// CHECK:           arith.constant 0xFF800000 : f32
// CHECK:           %[[K:.*]] = arith.remui %[[ROW]], %c3
// CHECK:           %[[I:.*]] = arith.divui %[[ROW]], %c3
// CHECK:           scf.for %[[J:[a-z0-9]+]] = %{{.*}} to %c5
// CHECK:             affine.apply #{{.*}}(%[[I]], %[[J]], %[[K]])
// CHECK:             memref.load %arg0
// CHECK:             arith.mulf
// CHECK:             arith.maximumf
// CHECK-COUNT-5:   gpu.shuffle  xor
func.func @middle_max(%x: memref<2x5x3xf32>, %max: memref<2x3xf32>) {
  %two = arith.constant 2.0 : f32
  linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, k)>], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x : memref<2x5x3xf32>) outs(%max : memref<2x3xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %scaled = arith.mulf %in, %two : f32
    %m = arith.maximumf %acc, %scaled : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// LayerNorm's scale gradient: a sum over the batch and sequence (two
// reduction loops, linearized into one column index of 8 x 16) for each of
// 64 features: one block per feature.
// CHECK-LABEL: func.func @feature_sums
// CHECK:         gpu.launch blocks(%[[ROW:[a-z0-9]+]], %{{.*}}) threads(%[[T:[a-z0-9]+]], %{{.*}}) in
// CHECK:           scf.for %[[COL:[a-z0-9]+]] = %[[T]] to %{{.*}} step
// CHECK:             %[[S:.*]] = arith.remui %[[COL]], %c16
// CHECK:             %[[B:.*]] = arith.divui %[[COL]], %c16
// CHECK:             affine.apply #{{.*}}(%[[ROW]], %[[B]], %[[S]])
// CHECK:             memref.load %arg0[{{.*}}] : memref<8x16x64xf32>
// CHECK-NOT:     gpu.launch
func.func @feature_sums(%x: memref<8x16x64xf32>, %sum: memref<64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(c, b, s) -> (b, s, c)>, affine_map<(c, b, s) -> (c)>], iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x : memref<8x16x64xf32>) outs(%sum : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The gradient norm's sum of squares over a whole [512, 256] weight: one
// row of 131072 columns, cut into min(132, 131072 / 1024) = 128 chunks, one
// block each; their totals go to a temporary of 128 floats, which a second
// launch of one block (128 threads) combines into the output.
// CHECK-LABEL: func.func @sum_of_squares
// CHECK:         %[[PARTIALS:.*]] = memref.alloc() : memref<128xf32>
// CHECK:         gpu.launch blocks(%[[BLOCK:[a-z0-9]+]], %{{.*}}) threads(%[[T:[a-z0-9]+]], %{{.*}}) in (%{{[a-z0-9_]+}} = %c256{{[_0-9]*}}, {{.*}})
// CHECK:           %[[BEGIN:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK:           %[[END:.*]] = arith.minui
// CHECK:           %[[FIRST:.*]] = arith.addi %[[BEGIN]], %[[T]]
// CHECK:           scf.for %[[COL:.*]] = %[[FIRST]] to %[[END]] step
// CHECK:             arith.mulf
// CHECK-COUNT-5:   gpu.shuffle  xor
// CHECK:           memref.store %{{.*}}, %[[PARTIALS]][%[[BLOCK]]] : memref<128xf32>
// CHECK:         gpu.launch blocks(%{{.*}}) in (%{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}, {{.*}}) threads(%[[T2:[a-z0-9]+]], %{{.*}}) in (%{{[a-z0-9_]+}} = %c128{{[_0-9]*}}, {{.*}})
// CHECK:           scf.for %[[C:.*]] = %[[T2]] to %c128{{[_0-9]*}} step
// CHECK:             memref.load %[[PARTIALS]]
// CHECK:           memref.load %arg1[] : memref<f32>
// CHECK:           memref.store %{{.*}}, %arg1[] : memref<f32>
// CHECK:         memref.dealloc %[[PARTIALS]]
func.func @sum_of_squares(%g: memref<512x256xf32>, %sum: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]}
      ins(%g : memref<512x256xf32>) outs(%sum : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %sq = arith.mulf %in, %in : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Not row reductions: an integer sum, and a body that reads its
// accumulator twice, stay loops.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     gpu.launch
// CHECK:         linalg.generic
// CHECK:         linalg.generic
func.func @left_alone(%x: memref<4x8xi32>, %sum: memref<4xi32>, %y: memref<4x8xf32>, %out: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xi32>) outs(%sum : memref<4xi32>) {
  ^bb0(%in: i32, %acc: i32):
    %s = arith.addi %acc, %in : i32
    linalg.yield %s : i32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<4x8xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %p = arith.mulf %acc, %in : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A row kernel of convert-weft-to-linalg (a softmax, bufferized): one block
// per row, of 32 threads (the row's 32 columns, rounded up to a warp, at
// most threads-per-block); each pass over the row strides over its columns, each reduction
// it carries (the maximum, then the sum of exponentials) is combined over
// the block with its own shared memory, and every thread goes on with the
// total, folded into the loop's initial value; a barrier separates passes.
// CHECK-LABEL: func.func @softmax_rows
// CHECK:         gpu.launch blocks(%[[ROW:.*]], %{{.*}}, %{{.*}}) in ({{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{[a-z0-9]+}} = %c32{{[_0-9]*}}, {{.*}}) workgroup(%[[MAXES:.*]] : memref<1xf32, #gpu.address_space<workgroup>>, %[[SUMS:.*]] : memref<1xf32, #gpu.address_space<workgroup>>)
// CHECK:           %[[IN:.*]] = memref.subview %arg0[%[[R:.*]], 0] [1, 32]
// CHECK:           %[[OUT:.*]] = memref.subview %arg1[%[[R]], 0] [1, 32]
// CHECK:           %[[FIRST:.*]] = arith.addi %c0, %{{.*}}
// CHECK:           %[[PARTIAL:.*]] = scf.for %{{.*}} = %[[FIRST]] to %c32 step %{{.*}} iter_args
// CHECK:             arith.maxnumf
// CHECK-COUNT-5:   gpu.shuffle  xor
// CHECK:           memref.store %{{.*}}, %[[MAXES]]
// CHECK:           gpu.barrier
// CHECK-COUNT-5:   gpu.shuffle  xor
// The last shuffle's combine, then the fold into the loop's initial value.
// CHECK:           arith.maxnumf
// CHECK:           %[[MAX:.*]] = arith.maxnumf %{{.*}}, %{{.*}} fastmath<reassoc,contract>
// CHECK:           gpu.barrier
// CHECK:           scf.for
// CHECK:             arith.subf %{{.*}}, %[[MAX]]
// CHECK:             math.exp
// CHECK:             memref.store %{{.*}}, %[[OUT]]
// CHECK:           memref.store %{{.*}}, %[[SUMS]]
// CHECK:           gpu.barrier
// CHECK-COUNT-5:   gpu.shuffle  xor
// CHECK:           arith.addf
// CHECK:           %[[SUM:.*]] = arith.addf %{{.*}}, %{{.*}} fastmath<reassoc,contract>
// CHECK:           gpu.barrier
// CHECK:           scf.for
// CHECK:             arith.divf %{{.*}}, %[[SUM]]
// CHECK:           gpu.terminator
// CHECK-NOT:     scf.forall
func.func @softmax_rows(%x: memref<4x32xf32>, %y: memref<4x32xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  scf.forall (%r) in (4) {
    %in = memref.subview %x[%r, 0] [1, 32] [1, 1] : memref<4x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    %out = memref.subview %y[%r, 0] [1, 32] [1, 1] : memref<4x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    %max = scf.for %j = %c0 to %c32 step %c1 iter_args(%m = %ninf) -> (f32) {
      %v = memref.load %in[%j] : memref<32xf32, strided<[1], offset: ?>>
      %n = arith.maxnumf %m, %v fastmath<reassoc,contract> : f32
      scf.yield %n : f32
    }
    %sum = scf.for %j = %c0 to %c32 step %c1 iter_args(%s = %zero) -> (f32) {
      %v = memref.load %in[%j] : memref<32xf32, strided<[1], offset: ?>>
      %d = arith.subf %v, %max : f32
      %e = math.exp %d : f32
      memref.store %e, %out[%j] : memref<32xf32, strided<[1], offset: ?>>
      %n = arith.addf %s, %e fastmath<reassoc,contract> : f32
      scf.yield %n : f32
    }
    scf.for %j = %c0 to %c32 step %c1 {
      %e = memref.load %out[%j] : memref<32xf32, strided<[1], offset: ?>>
      %q = arith.divf %e, %sum : f32
      memref.store %q, %out[%j] : memref<32xf32, strided<[1], offset: ?>>
    }
  }
  return
}

// -----

// A row kernel that also writes a value per row (a norm's gradient writes
// each row's mean): every thread holds the row's total, thread 0 stores it.
// CHECK-LABEL: func.func @per_row_value
// CHECK:         gpu.launch blocks(%[[ROW:.*]], %{{.*}}, %{{.*}}) in ({{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in
// CHECK:           %[[MEAN:.*]] = arith.divf %{{.*}}, %{{.*}} : f32
// CHECK:           gpu.barrier
// CHECK:           scf.for
// CHECK:             arith.subf %{{.*}}, %[[MEAN]]
// CHECK:             memref.store
// CHECK:           %[[FIRST:.*]] = arith.cmpi eq, %[[T]], %{{.*}} : index
// CHECK:           scf.if %[[FIRST]] {
// CHECK:             memref.store %[[MEAN]], %arg2[%{{.*}}] : memref<4xf32>
// CHECK:           }
// CHECK:           gpu.terminator
// CHECK-NOT:     scf.forall
func.func @per_row_value(%x: memref<4x32xf32>, %y: memref<4x32xf32>, %means: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %count = arith.constant 32.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  scf.forall (%r) in (4) {
    %in = memref.subview %x[%r, 0] [1, 32] [1, 1] : memref<4x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    %out = memref.subview %y[%r, 0] [1, 32] [1, 1] : memref<4x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    %sum = scf.for %j = %c0 to %c32 step %c1 iter_args(%s = %zero) -> (f32) {
      %v = memref.load %in[%j] : memref<32xf32, strided<[1], offset: ?>>
      %n = arith.addf %s, %v fastmath<reassoc,contract> : f32
      scf.yield %n : f32
    }
    %mean = arith.divf %sum, %count : f32
    scf.for %j = %c0 to %c32 step %c1 {
      %v = memref.load %in[%j] : memref<32xf32, strided<[1], offset: ?>>
      %d = arith.subf %v, %mean : f32
      memref.store %d, %out[%j] : memref<32xf32, strided<[1], offset: ?>>
    }
    memref.store %mean, %means[%r] : memref<4xf32>
  }
  return
}

// -----

// A per-row value stored before a pass (which could read it back) is not a
// row kernel's: thread 0 stores with no barrier after, so the loop stays.
// CHECK-LABEL: func.func @store_before_pass
// CHECK-NOT:     gpu.launch
// CHECK:         scf.forall
func.func @store_before_pass(%x: memref<4x32xf32>, %y: memref<4x32xf32>, %firsts: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  scf.forall (%r) in (4) {
    %in = memref.subview %x[%r, 0] [1, 32] [1, 1] : memref<4x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    %out = memref.subview %y[%r, 0] [1, 32] [1, 1] : memref<4x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    %first = memref.load %in[%c0] : memref<32xf32, strided<[1], offset: ?>>
    memref.store %first, %firsts[%r] : memref<4xf32>
    scf.for %j = %c0 to %c32 step %c1 {
      %f = memref.load %firsts[%r] : memref<4xf32>
      %v = memref.load %in[%j] : memref<32xf32, strided<[1], offset: ?>>
      %d = arith.subf %v, %f : f32
      memref.store %d, %out[%j] : memref<32xf32, strided<[1], offset: ?>>
    }
  }
  return
}

// -----

// A row generic of convert-weft-to-linalg (the cross-entropy, bufferized):
// one block per position, of 64 threads (the row's 64 classes); each pass
// strides over the classes and reduces over the block, the label's logit is
// read once, and thread 0 stores the loss and the log-sum-exp.
// CHECK-LABEL: func.func @cross_entropy_rows
// CHECK:         gpu.launch blocks(%[[ROW:[a-z0-9]+]], %{{.*}}, %{{.*}}) in (%{{[a-z0-9]+}} = %{{[a-z0-9_]+}}, {{.*}}) threads(%[[T:[a-z0-9]+]], %{{.*}}, %{{.*}}) in (%{{[a-z0-9]+}} = %c64{{[_0-9]*}}, {{.*}}) workgroup(%[[MAXES:.*]] : memref<2xf32, #gpu.address_space<workgroup>>, %[[SUMS:.*]] : memref<2xf32, #gpu.address_space<workgroup>>)
// CHECK:           affine.apply #{{.*}}(%[[ROW]])
// CHECK:           %[[LABEL:.*]] = memref.load %arg1
// CHECK:           scf.for
// CHECK:             arith.maxnumf
// CHECK-COUNT-5:   gpu.shuffle  xor
// CHECK:           memref.store %{{.*}}, %[[MAXES]]
// CHECK:           gpu.barrier
// CHECK:           scf.for
// CHECK:             math.exp
// CHECK:           memref.store %{{.*}}, %[[SUMS]]
// CHECK:           math.log
// CHECK:           %[[IS_FIRST:.*]] = arith.cmpi eq, %[[T]], %c0
// CHECK:           scf.if %[[IS_FIRST]]
// CHECK:             memref.store %{{.*}}, %arg2[%{{.*}}]
// CHECK:             memref.store %{{.*}}, %arg3[%{{.*}}]
// CHECK:           gpu.terminator
// CHECK-NOT:     linalg.generic
func.func @cross_entropy_rows(%x: memref<6x64xf32>, %labels: memref<6xi64>, %loss: memref<6xf32>, %lse: memref<6xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%labels : memref<6xi64>) outs(%loss, %lse : memref<6xf32>, memref<6xf32>) {
  ^bb0(%label: i64, %l: f32, %s: f32):
    %row = linalg.index 0 : index
    %max = scf.for %j = %c0 to %c64 step %c1 iter_args(%m = %ninf) -> (f32) {
      %v = memref.load %x[%row, %j] : memref<6x64xf32>
      %n = arith.maxnumf %m, %v fastmath<reassoc,contract> : f32
      scf.yield %n : f32
    }
    %sum = scf.for %j = %c0 to %c64 step %c1 iter_args(%a = %zero) -> (f32) {
      %v = memref.load %x[%row, %j] : memref<6x64xf32>
      %d = arith.subf %v, %max : f32
      %e = math.exp %d : f32
      %n = arith.addf %a, %e fastmath<reassoc,contract> : f32
      scf.yield %n : f32
    }
    %logsum = math.log %sum : f32
    %total = arith.addf %max, %logsum : f32
    %index = arith.index_cast %label : i64 to index
    %picked = memref.load %x[%row, %index] : memref<6x64xf32>
    %value = arith.subf %total, %picked : f32
    linalg.yield %value, %total : f32, f32
  }
  return
}

// -----

// A running sum written per column is a scan, not a reduction: the row
// loop stays as it is.
// CHECK-LABEL: func.func @scan_rows
// CHECK-NOT:     gpu.launch
// CHECK:         scf.forall
func.func @scan_rows(%x: memref<4x32xf32>, %y: memref<4x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  scf.forall (%r) in (4) {
    %total = scf.for %j = %c0 to %c32 step %c1 iter_args(%s = %zero) -> (f32) {
      %v = memref.load %x[%r, %j] : memref<4x32xf32>
      %n = arith.addf %s, %v : f32
      memref.store %n, %y[%r, %j] : memref<4x32xf32>
      scf.yield %n : f32
    }
  }
  return
}

// -----

// The fill of the output right before a reduction is taken in: thread 0
// combines the total with the fill's value instead of reading the output,
// and the fill's own launch is gone. A fill the reduction does not cover
// stays (here the output is read in between).
// CHECK-LABEL: func.func @filled_output
// CHECK-NOT:     linalg.fill
// CHECK:         gpu.launch
// CHECK:           scf.if
// CHECK-NOT:         memref.load %arg1{{\[}}
// CHECK:             %[[INIT:.*]] = arith.constant 1.500000e+00 : f32
// CHECK:             %[[TOTAL:.*]] = arith.addf %[[INIT]], %{{.*}} : f32
// CHECK:             memref.store %[[TOTAL]], %arg1[%{{.*}}] : memref<64xf32>
// CHECK:           gpu.terminator
// CHECK:         linalg.fill
// CHECK:         memref.copy
// CHECK:         gpu.launch
// CHECK:             memref.load %arg2
func.func @filled_output(%x: memref<64x768xf32>, %sum: memref<64xf32>, %other: memref<64xf32>, %seen: memref<64xf32>) {
  %init = arith.constant 1.5 : f32
  linalg.fill ins(%init : f32) outs(%sum : memref<64xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x768xf32>) outs(%sum : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%init : f32) outs(%other : memref<64xf32>)
  memref.copy %other, %seen : memref<64xf32> to memref<64xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x768xf32>) outs(%other : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  return
}
