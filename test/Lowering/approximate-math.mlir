// RUN: weft-opt %s --weft-approximate-math | FileCheck %s

// erf, tanh, exp and log on f32 (scalars and vectors) become polynomials
// of arithmetic, which vectorize; f64 and the functions not listed keep
// their libm calls.
// CHECK-LABEL: func.func @approximated
// CHECK-NOT: math.{{erf|tanh|exp|log}}
// CHECK: math.fma
// CHECK-NOT: math.{{erf|tanh|exp|log}}
// CHECK: return
func.func @approximated(%x: f32, %v: vector<8xf32>) -> (f32, f32, f32, f32, vector<8xf32>) {
  %0 = math.erf %x : f32
  %1 = math.tanh %x : f32
  %2 = math.exp %x : f32
  %3 = math.log %x : f32
  %4 = math.erf %v : vector<8xf32>
  return %0, %1, %2, %3, %4 : f32, f32, f32, f32, vector<8xf32>
}

// CHECK-LABEL: func.func @kept
// CHECK-NEXT: math.exp %{{.*}} : f64
// CHECK-NEXT: math.sin %{{.*}} : f32
// CHECK-NEXT: return
func.func @kept(%d: f64, %x: f32) -> (f64, f32) {
  %0 = math.exp %d : f64
  %1 = math.sin %x : f32
  return %0, %1 : f64, f32
}
