// RUN: weft-opt %s -weft-strided-copies-to-loops -split-input-file | FileCheck %s

// A copy out of a strided view becomes a linalg copy (parallel loops later).
// CHECK-LABEL: func.func @from_slice
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%{{.*}} : memref<4x8xf32, strided<[16, 1]>>) outs(%{{.*}} : memref<4x8xf32>)
func.func @from_slice(%a: memref<4x8xf32, strided<[16, 1]>>, %b: memref<4x8xf32>) {
  memref.copy %a, %b : memref<4x8xf32, strided<[16, 1]>> to memref<4x8xf32>
  return
}

// -----

// Into a strided view, too.
// CHECK-LABEL: func.func @into_slice
// CHECK: linalg.copy ins(%{{.*}} : memref<4x8xf32>) outs(%{{.*}} : memref<4x8xf32, strided<[16, 1], offset: 8>>)
func.func @into_slice(%a: memref<4x8xf32>, %b: memref<4x8xf32, strided<[16, 1], offset: 8>>) {
  memref.copy %a, %b : memref<4x8xf32> to memref<4x8xf32, strided<[16, 1], offset: 8>>
  return
}

// -----

// Contiguous to contiguous stays a memcpy.
// CHECK-LABEL: func.func @contiguous
// CHECK: memref.copy
// CHECK-NOT: linalg.copy
func.func @contiguous(%a: memref<4x8xf32>, %b: memref<4x8xf32>) {
  memref.copy %a, %b : memref<4x8xf32> to memref<4x8xf32>
  return
}
