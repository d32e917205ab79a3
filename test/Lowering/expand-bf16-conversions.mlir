// RUN: weft-opt %s -split-input-file -weft-expand-bf16-conversions | FileCheck %s

// f32 -> bf16: integer rounding on the bits, selects on i32 only, one
// bitcast of the i16 result.
// CHECK-LABEL: func.func @truncate
// CHECK: %[[BITS:.*]] = arith.bitcast %arg0 : f32 to i32
// CHECK: %[[NAN:.*]] = arith.cmpf uno, %arg0, %arg0 : f32
// CHECK: arith.select %[[NAN]], {{.*}} : i32
// CHECK: %[[KEPT:.*]] = arith.trunci {{.*}} : i32 to i16
// CHECK: %[[R:.*]] = arith.bitcast %[[KEPT]] : i16 to bf16
// CHECK-NOT: arith.truncf
// CHECK: return %[[R]]
func.func @truncate(%x: f32) -> bf16 {
  %y = arith.truncf %x : f32 to bf16
  return %y : bf16
}

// -----

// bf16 -> f32: the bits shifted into the high half; vectors alike.
// CHECK-LABEL: func.func @extend
// CHECK: %[[BITS:.*]] = arith.bitcast %arg0 : vector<8xbf16> to vector<8xi16>
// CHECK: %[[WIDE:.*]] = arith.extui %[[BITS]] : vector<8xi16> to vector<8xi32>
// CHECK: %[[HIGH:.*]] = arith.shli %[[WIDE]], {{.*}} : vector<8xi32>
// CHECK: arith.bitcast %[[HIGH]] : vector<8xi32> to vector<8xf32>
// CHECK-NOT: arith.extf
func.func @extend(%x: vector<8xbf16>) -> vector<8xf32> {
  %y = arith.extf %x : vector<8xbf16> to vector<8xf32>
  return %y : vector<8xf32>
}

// -----

// Other conversions are left alone.
// CHECK-LABEL: func.func @others
// CHECK: arith.truncf %arg0 : f32 to f16
// CHECK: arith.extf %arg1 : f16 to f32
func.func @others(%x: f32, %h: f16) -> (f16, f32) {
  %a = arith.truncf %x : f32 to f16
  %b = arith.extf %h : f16 to f32
  return %a, %b : f16, f32
}
