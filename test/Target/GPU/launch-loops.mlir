// RUN: weft-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(weft-gpu-launch-loops{threads-per-block=128})' | FileCheck %s

// A parallel nest runs one iteration per thread: the iteration space is
// linearized, covered by blocks of 128 threads, and each thread recovers its
// indices last dim fastest; threads past the end do nothing. Static bounds
// give a constant grid.
// CHECK-LABEL: func.func @parallel
// CHECK-DAG:     [[TOTAL:%c6400[_0-9]*]] = arith.constant 6400 : index
// CHECK-DAG:     [[C128:%c128[_0-9]*]] = arith.constant 128 : index
// CHECK-DAG:     [[BLOCKS:%c50[_0-9]*]] = arith.constant 50 : index
// CHECK-NOT:     scf.if
// CHECK:         gpu.launch blocks([[BX:%[a-z0-9]+]], {{.*}}) in ({{%[a-z0-9]+}} = [[BLOCKS]], {{.*}}) threads([[TX:%[a-z0-9]+]], {{.*}}) in ({{%[a-z0-9]+}} = [[C128]],
// CHECK-NEXT:      [[BASE:%[0-9]+]] = arith.muli [[BX]], [[C128]]
// CHECK-NEXT:      [[ID:%[0-9]+]] = arith.addi [[BASE]], [[TX]]
// CHECK-NEXT:      [[IN:%[0-9]+]] = arith.cmpi ult, [[ID]], [[TOTAL]]
// CHECK-NEXT:      scf.if [[IN]] {
// CHECK-NEXT:        arith.remui [[ID]]
// CHECK:             arith.divui [[ID]]
// CHECK:             memref.load
// CHECK-NEXT:        math.exp
// CHECK-NEXT:        memref.store
// CHECK:           gpu.terminator
// CHECK-NOT:     scf.parallel
func.func @parallel(%a: memref<64x100xf32>, %b: memref<64x100xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c100 = arith.constant 100 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c100) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<64x100xf32>
    %y = math.exp %x : f32
    memref.store %y, %b[%i, %j] : memref<64x100xf32>
    scf.reduce
  }
  return
}

// -----

// Dynamic bounds: the grid is computed, and an empty space launches nothing.
// CHECK-LABEL: func.func @dynamic
// CHECK:         [[TOTAL:%[0-9]+]] = arith.muli
// CHECK-NEXT:    [[C128:%c128[_0-9]*]] = arith.constant 128 : index
// CHECK-NEXT:    [[BLOCKS:%[0-9]+]] = arith.ceildivui [[TOTAL]], [[C128]]
// CHECK:         [[ANY:%[0-9]+]] = arith.cmpi ugt, [[TOTAL]]
// CHECK-NEXT:    scf.if [[ANY]] {
// CHECK:           gpu.launch blocks({{.*}}) in ({{%[a-z0-9]+}} = [[BLOCKS]], {{.*}}) threads({{.*}}) in ({{%[a-z0-9]+}} = [[C128]],
func.func @dynamic(%a: memref<?x100xf32>, %b: memref<?x100xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c100 = arith.constant 100 : index
  %n = memref.dim %a, %c0 : memref<?x100xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c100) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<?x100xf32>
    memref.store %x, %b[%i, %j] : memref<?x100xf32>
    scf.reduce
  }
  return
}

// -----

// A sequential nest (a full reduction) runs on one thread.
// CHECK-LABEL: func.func @sequential
// CHECK:         [[ONE:%c1_[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:    gpu.launch blocks({{.*}}) in ({{%[a-z0-9]+}} = [[ONE]], {{%[a-z0-9]+}} = [[ONE]], {{%[a-z0-9]+}} = [[ONE]]) threads({{.*}}) in ({{%[a-z0-9]+}} = [[ONE]], {{%[a-z0-9]+}} = [[ONE]], {{%[a-z0-9]+}} = [[ONE]])
// CHECK-NEXT:      scf.for
// CHECK:           gpu.terminator
func.func @sequential(%a: memref<100xf32>, %sum: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c100 = arith.constant 100 : index
  scf.for %i = %c0 to %c100 step %c1 {
    %x = memref.load %a[%i] : memref<100xf32>
    %s = memref.load %sum[] : memref<f32>
    %t = arith.addf %s, %x : f32
    memref.store %t, %sum[] : memref<f32>
  }
  return
}

// -----

// A loop that calls functions is the host's control flow (the micro-batch
// loop): it stays, and the nests in its body become kernels.
// CHECK-LABEL: func.func @host_loop
// CHECK:         scf.for
// CHECK-NEXT:      func.call @stage
// CHECK:           gpu.launch
// CHECK:             memref.store
func.func private @stage(memref<8xf32>)
func.func @host_loop(%a: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  scf.for %m = %c0 to %c4 step %c1 {
    func.call @stage(%a) : (memref<8xf32>) -> ()
    scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
      memref.store %zero, %a[%i] : memref<8xf32>
      scf.reduce
    }
  }
  return
}

// -----

// Buffer management stays on the host (weft-gpu-device-memory makes it
// device calls), and so do ops that touch no memory.
// CHECK-LABEL: func.func @buffers
// CHECK-NOT:     gpu.launch
// CHECK:         memref.alloc
// CHECK:         memref.copy
// CHECK:         memref.dealloc
func.func @buffers(%a: memref<8xf32>) {
  %b = memref.alloc() : memref<8xf32>
  memref.copy %a, %b : memref<8xf32> to memref<8xf32>
  memref.dealloc %b : memref<8xf32>
  return
}

// -----

func.func @host_read(%a: memref<f32>) -> f32 {
  %x = memref.load %a[] : memref<f32>
  // expected-error @+1 {{weft-gpu-launch-loops: the host reads a value computed from device memory here; it cannot run in a kernel}}
  return %x : f32
}

// -----

// Scalar code (a rank-0 elementwise op) runs on one thread, the arithmetic
// between its loads and stores with it; pure ops the host also reads stay.
// CHECK-LABEL: func.func @scalar
// CHECK:         %[[TWO:.*]] = arith.constant 2.0
// CHECK:         gpu.launch
// CHECK-NEXT:      %[[X:.*]] = memref.load %arg0[]
// CHECK-NEXT:      %[[Y:.*]] = arith.mulf %[[X]], %[[TWO]]
// CHECK-NEXT:      memref.store %[[Y]], %arg1[]
// CHECK-NEXT:      gpu.terminator
func.func @scalar(%a: memref<f32>, %b: memref<f32>) {
  %two = arith.constant 2.0 : f32
  %x = memref.load %a[] : memref<f32>
  %y = arith.mulf %x, %two : f32
  memref.store %y, %b[] : memref<f32>
  return
}

// -----

// Each thread takes 16 bytes' worth of its narrowest element (bf16: 8) of
// the innermost dim, from the one its index picks on: it reaches them
// through one view of each buffer at constant indices, all its loads
// first, then the arithmetic, then all its stores (with the view they
// store to), so that NVPTX can merge the neighbours' accesses. A vector read along the innermost dim and
// one read per row are indexed alike. 512 x 1024 / 8 / 128 = 512 blocks.
// CHECK-LABEL: func.func @neighbours
// CHECK-DAG:     [[THREADS:%c131072[_0-9]*]] = arith.constant 131072 : index
// CHECK-DAG:     [[PERROW:%c256[_0-9]*]] = arith.constant 256 : index
// CHECK-DAG:     [[BLOCKS:%c1024[_0-9]*]] = arith.constant 1024 : index
// CHECK:         gpu.launch blocks({{.*}}) in ({{%[a-z0-9]+}} = [[BLOCKS]], {{.*}}) threads({{.*}}) in ({{%[a-z0-9]+}} = %c128
// CHECK:           [[IN:%[0-9]+]] = arith.cmpi ult, [[ID:%[0-9]+]], [[THREADS]]
// CHECK-NEXT:      scf.if [[IN]] {
// CHECK-NEXT:        [[COL:%[0-9]+]] = arith.remui [[ID]], [[PERROW]]
// CHECK-NEXT:        [[ROW:%[0-9]+]] = arith.divui [[ID]], [[PERROW]]
// CHECK:             [[I:%[0-9]+]] = arith.addi %c0{{.*}}, %{{[0-9]+}}
// CHECK:             [[FIRST:%[0-9]+]] = arith.muli [[COL]], %c8{{.*}}
// CHECK:             [[X:%.*]] = memref.subview %arg0[[[I]], [[FIRST]]] [1, 8] [1, 1] : memref<512x2048xf32> to memref<8xf32, strided<[1], offset: ?>>
// CHECK-NEXT:        memref.load [[X]][%c0
// CHECK-NEXT:        [[B:%.*]] = memref.subview %arg1[[[FIRST]]] [8] [1]
// CHECK-NEXT:        memref.load [[B]][%c0
// CHECK-NEXT:        memref.load %arg2[[[I]]]
// CHECK-NEXT:        memref.load [[X]][%c1
// CHECK-NEXT:        memref.load [[B]][%c1
// CHECK-NOT:         arith.addf
// CHECK-COUNT-7:     memref.load %arg2
// CHECK-NEXT:        arith.addf
// CHECK-NOT:         memref.store
// CHECK-COUNT-8:     arith.truncf
// CHECK-NEXT:        [[Y:%.*]] = memref.subview %arg3[[[I]], [[FIRST]]] [1, 8] [1, 1]
// CHECK-NEXT:        memref.store %{{.*}}, [[Y]][%c0
// CHECK-COUNT-7:     memref.store %{{.*}}, [[Y]][%c
// CHECK-NEXT:      }
// CHECK-NEXT:      gpu.terminator
func.func @neighbours(%x: memref<512x2048xf32>, %bias: memref<2048xf32>, %scale: memref<512xf32>, %y: memref<512x2048xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c512 = arith.constant 512 : index
  %c2048 = arith.constant 2048 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c512, %c2048) step (%c1, %c1) {
    %a = memref.load %x[%i, %j] : memref<512x2048xf32>
    %b = memref.load %bias[%j] : memref<2048xf32>
    %s = memref.load %scale[%i] : memref<512xf32>
    %sum = arith.addf %a, %b : f32
    %scaled = arith.mulf %sum, %s : f32
    %narrow = arith.truncf %scaled : f32 to bf16
    memref.store %narrow, %y[%i, %j] : memref<512x2048xbf16>
    scf.reduce
  }
  return
}

// -----

// Fewer neighbours where more would leave fewer blocks than the GPU's 132
// multiprocessors: 264 x 128 f32 elements, 2 per thread, 132 blocks.
// CHECK-LABEL: func.func @blocks_kept
// CHECK-DAG:     [[BLOCKS:%c132[_0-9]*]] = arith.constant 132 : index
// CHECK:         gpu.launch blocks({{.*}}) in ({{%[a-z0-9]+}} = [[BLOCKS]], {{.*}})
// CHECK-COUNT-2:     math.exp
// CHECK-NOT:         math.exp
// CHECK:           gpu.terminator
func.func @blocks_kept(%x: memref<264x128xf32>, %y: memref<264x128xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %c264 = arith.constant 264 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c264, %c128) step (%c1, %c1) {
    %a = memref.load %x[%i, %j] : memref<264x128xf32>
    %e = math.exp %a : f32
    memref.store %e, %y[%i, %j] : memref<264x128xf32>
    scf.reduce
  }
  return
}

// -----

// One element per thread where the innermost index picks a row (a
// transposed read: neighbours of a thread would be a row apart) or where
// a load follows a store.
// CHECK-LABEL: func.func @one_each
// CHECK-DAG:     [[BLOCKS:%c4096[_0-9]*]] = arith.constant 4096 : index
// CHECK:         gpu.launch blocks({{.*}}) in ({{%[a-z0-9]+}} = [[BLOCKS]], {{.*}})
// CHECK-COUNT-1:     memref.load
// CHECK-NOT:         memref.load
// CHECK:         gpu.launch blocks({{.*}}) in ({{%[a-z0-9]+}} = %c4096{{[_0-9]*}}, {{.*}})
// CHECK:             memref.store
// CHECK-NEXT:        memref.load
// CHECK-NOT:         memref.load
func.func @one_each(%x: memref<1024x512xf32>, %y: memref<512x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c512 = arith.constant 512 : index
  %c1024 = arith.constant 1024 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c512, %c1024) step (%c1, %c1) {
    %a = memref.load %x[%j, %i] : memref<1024x512xf32>
    memref.store %a, %y[%i, %j] : memref<512x1024xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c512, %c1024) step (%c1, %c1) {
    memref.store %zero, %y[%i, %j] : memref<512x1024xf32>
    %a = memref.load %y[%i, %j] : memref<512x1024xf32>
    memref.store %a, %x[%j, %i] : memref<1024x512xf32>
    scf.reduce
  }
  return
}
