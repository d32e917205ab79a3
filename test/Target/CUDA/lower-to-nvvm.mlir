// RUN: weft-opt %s --weft-lower-to-nvvm=format=isa | FileCheck %s

// The whole CUDA lowering of a bias add and a softmax: temporaries in
// device memory, one kernel per loop nest launched from the host code
// through the runtime's mgpu* functions, and each kernel compiled to PTX
// for sm_90 and for sm_80 (format=bin has ptxas assemble both).
// CHECK-LABEL: llvm.func @main
// CHECK:         llvm.call @mgpuMemAlloc
// CHECK:         gpu.launch_func <%{{.*}} : !llvm.ptr> @main_kernel::@main_kernel blocks in (%{{.*}}) threads in (%{{.*}}) : i64 args(
// CHECK:         gpu.launch_func <%{{.*}} : !llvm.ptr> @main_kernel_0::@main_kernel blocks in
// CHECK:         llvm.call @mgpuMemFree
// CHECK:         llvm.return
// CHECK:       gpu.binary @main_kernel  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">, {{.*}}.target sm_90{{.*}}.entry main_kernel{{.*}}#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">, {{.*}}.target sm_80{{.*}}.entry main_kernel
// The softmax row: its maximum and its exponentials (libdevice's expf).
// CHECK:       gpu.binary @main_kernel_0 {{.*(max.f32.*ex2.approx|ex2.approx.*max.f32)}}
func.func @main(%x: tensor<4x32xf32>, %b: tensor<32xf32>) -> tensor<4x32xf32> {
  %0 = weft.add %x, %b : tensor<4x32xf32>, tensor<32xf32>
  %1 = weft.softmax %0 {axis = 1} : tensor<4x32xf32>
  return %1 : tensor<4x32xf32>
}
