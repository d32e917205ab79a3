// RUN: weft-opt %s -weft-distinct-results -split-input-file | FileCheck %s
// RUN: weft-opt %s -weft-distinct-results -buffer-results-to-out-params="hoist-static-allocs modify-public-functions" -split-input-file | FileCheck %s --check-prefix=OUT

// The second return of one buffer is a copy; the first stays.
// CHECK-LABEL: func.func @twice
// CHECK: %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK: %[[COPY:.*]] = memref.alloc() : memref<4xf32>
// CHECK: memref.copy %[[A]], %[[COPY]] : memref<4xf32> to memref<4xf32>
// CHECK: return %[[A]], %[[B:.*]], %[[COPY]] : memref<4xf32>, memref<4xf32>, memref<4xf32>
// Then each result has an out-param of its own (upstream's pass crashed,
// erasing the one allocation twice).
// OUT-LABEL: func.func @twice(%arg0: memref<4xf32>, %arg1: memref<4xf32>, %arg2: memref<4xf32>, %arg3: memref<4xf32>)
// OUT: memref.copy %arg1, %arg3
// OUT: memref.copy %arg0, %arg2
func.func @twice(%b: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>, memref<4xf32>) {
  %a = memref.alloc() : memref<4xf32>
  return %a, %b, %a : memref<4xf32>, memref<4xf32>, memref<4xf32>
}

// -----

// Distinct buffers are left alone.
// CHECK-LABEL: func.func @distinct
// CHECK-NOT: memref.copy
// CHECK: return %arg0, %arg1
func.func @distinct(%a: memref<4xf32>, %b: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  return %a, %b : memref<4xf32>, memref<4xf32>
}
