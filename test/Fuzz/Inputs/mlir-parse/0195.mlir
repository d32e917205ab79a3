

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
