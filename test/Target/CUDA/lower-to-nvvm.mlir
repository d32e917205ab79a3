// RUN: weft-opt %s --weft-lower-to-nvvm=format=isa | FileCheck %s

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
