// RUN: weft-opt %s -split-input-file --weft-lower-to-nvvm=format=isa | FileCheck %s

// The whole CUDA lowering of a bias add and a softmax: temporaries in
// device memory, one kernel per loop nest or row launched from the host code
// through the runtime's mgpu* functions, and each kernel compiled to PTX
// for sm_90 and for sm_80 (format=bin has ptxas assemble both).
// CHECK-LABEL: llvm.func @main
// CHECK:         llvm.call @mgpuMemAlloc
// CHECK:         gpu.launch_func <%{{.*}} : !llvm.ptr> @main_kernel::@main_kernel blocks in (%{{.*}}) threads in (%{{.*}}) : i64 args(
// CHECK:         gpu.launch_func <%{{.*}} : !llvm.ptr> @main_kernel_0::@main_kernel blocks in
// CHECK:         llvm.call @mgpuMemFree
// CHECK:         llvm.return
// CHECK:       gpu.binary @main_kernel  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx81">, {{.*}}.target sm_90{{.*}}.entry main_kernel{{.*}}#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx81">, {{.*}}.target sm_80{{.*}}.entry main_kernel
// The softmax, one block per row (weft-gpu-row-reductions): the row's
// maximum combined with butterfly shuffles and, across warps, shared memory
// and a barrier; then the exponentials (libdevice's expf) and their sum the
// same way; for each chip.
// CHECK:       gpu.binary @main_kernel_0 {{.*}}.target sm_90{{.*}}.shared .align 4 {{.*}}__wg_{{.*}}shfl.sync.bfly.b32{{.*}}max.f32{{.*}}bar.sync{{.*}}ex2.approx{{.*}}shfl.sync.bfly.b32{{.*}}bar.sync{{.*}}.target sm_80{{.*}}shfl.sync.bfly.b32{{.*}}bar.sync
func.func @main(%x: tensor<4x32xf32>, %b: tensor<32xf32>) -> tensor<4x32xf32> {
  %0 = weft.add %x, %b : tensor<4x32xf32>, tensor<32xf32>
  %1 = weft.softmax %0 {axis = 1} : tensor<4x32xf32>
  return %1 : tensor<4x32xf32>
}

// -----

// A bias add over 512 x 1024 elements: each thread adds four neighbours
// (weft-gpu-launch-loops) of buffers the kernel is told are 64-byte aligned
// (weft-gpu-assume-alignment: the runtime's buffers), which NVPTX reads
// and writes with 128-bit accesses.
// CHECK-LABEL: llvm.func @wide
// CHECK:       gpu.binary @wide_kernel {{.*}}.target sm_90{{.*}}.entry wide_kernel{{.*}}ld.global.v4.b32{{.*}}ld.global.v4.b32{{.*}}add.rn.f32{{.*}}st.global.v4.b32
func.func @wide(%x: tensor<512x1024xf32>, %b: tensor<1024xf32>) -> tensor<512x1024xf32> {
  %0 = weft.add %x, %b : tensor<512x1024xf32>, tensor<1024xf32>
  return %0 : tensor<512x1024xf32>
}
