// RUN: weft-opt %s -split-input-file -weft-gpu-mark-launches | FileCheck %s
// The CUDA pipeline marks launches only in a profiling build (the marks make
// gpu-async-region wait for the GPU at each).
// RUN: weftc %S/Inputs/gather.mlir --target=cuda --print-pipeline | FileCheck %s --check-prefix=PLAIN
// RUN: weftc %S/Inputs/gather.mlir --target=cuda --profile-launches --print-pipeline | FileCheck %s --check-prefix=PROFILE
// PLAIN-NOT: weft-gpu-mark-launches
// PROFILE: weft-gpu-kernel-report,weft-gpu-mark-launches{callee=weft_cuda_launch}

// Each launch and library call the kernel report numbered is preceded by
// the runtime's mark with its id; what it did not number is left alone.
// CHECK-LABEL: func.func private @weft_cuda_launch(i64)
// CHECK-LABEL: func.func @main
// CHECK:      %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK-NEXT: call @weft_cuda_launch(%[[ZERO]])
// CHECK-NEXT: gpu.launch
// CHECK:      %[[ONE:.*]] = arith.constant 1 : i64
// CHECK-NEXT: call @weft_cuda_launch(%[[ONE]])
// CHECK-NEXT: call @weft_cuda_gemm_f32
// CHECK-NOT:  call @weft_cuda_launch
// CHECK:      gpu.launch
// CHECK:      return
func.func private @weft_cuda_gemm_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) attributes {weft.gemm}
func.func @main(%x: memref<4xf32>, %u: memref<*xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %flags = arith.constant 5 : i64
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<4xf32>
    memref.store %v, %x[%tx] : memref<4xf32>
    gpu.terminator
  } {weft.launch_id = 0 : i64}
  call @weft_cuda_gemm_f32(%u, %u, %u, %u, %u, %flags) {weft.launch_id = 1 : i64} : (memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) -> ()
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    gpu.terminator
  }
  return
}
