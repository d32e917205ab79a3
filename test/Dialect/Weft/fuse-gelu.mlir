// RUN: weft-opt %s -split-input-file -weft-fuse-gelu | FileCheck %s
// RUN: weft-eval %s -split-input-file --compare-pipeline=weft-fuse-gelu | FileCheck %s --check-prefix=SAME

// The rewrite computes the same function (reference evaluator, random inputs):
// SAME: @erf_form result #0: {{.*}}: ok
// SAME: @erf_premultiplied_half result #0: {{.*}}: ok
// SAME: @tanh_form result #0: {{.*}}: ok
// SAME: @tanh_megatron_form result #0: {{.*}}: ok
// SAME: @wrong_half result #0: {{.*}}: ok

// PyTorch: x * 0.5 * (1 + erf(x / 1.4142135)).
// CHECK-LABEL: func.func @erf_form
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[G:.*]] = weft.gelu %[[X]] : tensor<4x8xf32>
// CHECK-NOT: weft.erf
// CHECK: return %[[G]]
func.func @erf_form(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sqrt2 = weft.constant dense<1.41421354> : tensor<f32>
  %one = weft.constant dense<1.0> : tensor<f32>
  %half = weft.constant dense<0.5> : tensor<f32>
  %d = weft.div %x, %sqrt2 : tensor<4x8xf32>, tensor<f32>
  %e = weft.erf %d : tensor<4x8xf32>
  %a = weft.add %e, %one : tensor<4x8xf32>, tensor<f32>
  %m = weft.mul %x, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %y = weft.mul %m, %half : tensor<4x8xf32>, tensor<f32>
  return %y : tensor<4x8xf32>
}

// -----

// (0.5 * x) * (1 + erf(x * 0.70710678)).
// CHECK-LABEL: func.func @erf_premultiplied_half
// CHECK: weft.gelu %{{.*}} : tensor<4x8xf32>
func.func @erf_premultiplied_half(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = weft.constant dense<0.707106769> : tensor<f32>
  %one = weft.constant dense<1.0> : tensor<f32>
  %half = weft.constant dense<0.5> : tensor<f32>
  %hx = weft.mul %half, %x : tensor<f32>, tensor<4x8xf32>
  %d = weft.mul %x, %c : tensor<4x8xf32>, tensor<f32>
  %e = weft.erf %d : tensor<4x8xf32>
  %a = weft.add %one, %e : tensor<f32>, tensor<4x8xf32>
  %y = weft.mul %hx, %a : tensor<4x8xf32>, tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// GPT-2: 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x^3))).
// CHECK-LABEL: func.func @tanh_form
// CHECK: weft.gelu %{{.*}} {approximate = "tanh"} : tensor<4x8xf32>
// CHECK-NOT: weft.tanh
func.func @tanh_form(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %three = weft.constant dense<3.0> : tensor<f32>
  %k = weft.constant dense<0.044715> : tensor<f32>
  %c = weft.constant dense<0.797884583> : tensor<f32>
  %one = weft.constant dense<1.0> : tensor<f32>
  %half = weft.constant dense<0.5> : tensor<f32>
  %cube = weft.pow %x, %three : tensor<4x8xf32>, tensor<f32>
  %kc = weft.mul %k, %cube : tensor<f32>, tensor<4x8xf32>
  %in = weft.add %x, %kc : tensor<4x8xf32>, tensor<4x8xf32>
  %arg = weft.mul %c, %in : tensor<f32>, tensor<4x8xf32>
  %t = weft.tanh %arg : tensor<4x8xf32>
  %a = weft.add %t, %one : tensor<4x8xf32>, tensor<f32>
  %hx = weft.mul %half, %x : tensor<f32>, tensor<4x8xf32>
  %y = weft.mul %hx, %a : tensor<4x8xf32>, tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Megatron: 0.5 * x * (1 + tanh(0.7978845608 * x * (1 + 0.044715 * x * x))).
// CHECK-LABEL: func.func @tanh_megatron_form
// CHECK: weft.gelu %{{.*}} {approximate = "tanh"}
func.func @tanh_megatron_form(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %k = weft.constant dense<0.044715> : tensor<f32>
  %c = weft.constant dense<0.797884583> : tensor<f32>
  %one = weft.constant dense<1.0> : tensor<f32>
  %half = weft.constant dense<0.5> : tensor<f32>
  %cx = weft.mul %c, %x : tensor<f32>, tensor<4x8xf32>
  %kx = weft.mul %k, %x : tensor<f32>, tensor<4x8xf32>
  %kxx = weft.mul %kx, %x : tensor<4x8xf32>, tensor<4x8xf32>
  %p = weft.add %one, %kxx : tensor<f32>, tensor<4x8xf32>
  %arg = weft.mul %cx, %p : tensor<4x8xf32>, tensor<4x8xf32>
  %t = weft.tanh %arg : tensor<4x8xf32>
  %a = weft.add %one, %t : tensor<f32>, tensor<4x8xf32>
  %hx = weft.mul %half, %x : tensor<f32>, tensor<4x8xf32>
  %y = weft.mul %hx, %a : tensor<4x8xf32>, tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A wrong constant (0.6 instead of 0.5) is not a GELU.
// CHECK-LABEL: func.func @wrong_half
// CHECK-NOT: weft.gelu
func.func @wrong_half(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sqrt2 = weft.constant dense<1.41421354> : tensor<f32>
  %one = weft.constant dense<1.0> : tensor<f32>
  %half = weft.constant dense<0.6> : tensor<f32>
  %d = weft.div %x, %sqrt2 : tensor<4x8xf32>, tensor<f32>
  %e = weft.erf %d : tensor<4x8xf32>
  %a = weft.add %e, %one : tensor<4x8xf32>, tensor<f32>
  %m = weft.mul %x, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %y = weft.mul %m, %half : tensor<4x8xf32>, tensor<f32>
  return %y : tensor<4x8xf32>
}
