
// A launch becomes loops over its blocks, then its threads (z outermost),
// and device memory becomes host memory. Each store is checked first: the
// runtime is given the buffer's base, the element's address (base +
// (offset + index * stride) * 4 bytes), its size, that it writes, and the
// kernel's name.
// CHECK-LABEL: func.func private @weft_emulation_check_access(i64, i64, i64, i64, i64)
// CHECK-LABEL: func.func @launch
// CHECK:         %[[BUF:.*]] = memref.alloc() : memref<8xf32>
// CHECK:         %[[NAMES:.*]] = memref.get_global @__weft_kernel_name_0 : memref<{{[0-9]+}}xi8>
// CHECK:         %[[NAMEPTR:.*]] = memref.extract_aligned_pointer_as_index %[[NAMES]]
// CHECK:         %[[NAME:.*]] = arith.index_cast %[[NAMEPTR]] : index to i64
// CHECK:         %[[FOUR:.*]] = arith.constant 4 : index
// CHECK:         %[[WRITE:.*]] = arith.constant 1 : i64
// CHECK:         scf.for %[[BZ:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:      scf.for %[[BY:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:        scf.for %[[BX:.*]] = %{{.*}} to %[[GX:.*]] step
// CHECK-NEXT:          scf.for %[[TZ:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:            scf.for %[[TY:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:              scf.for %[[TX:.*]] = %{{.*}} to %[[SX:.*]] step
// The thread's linear id (unused here), then the kernel.
// CHECK-COUNT-4:             arith.
// CHECK-NEXT:                %[[BASE:.*]] = arith.muli %[[BX]], %[[SX]]
// CHECK-NEXT:                %[[ID:.*]] = arith.addi %[[BASE]], %[[TX]]
// CHECK-NEXT:                %{{.*}}, %[[OFFSET:.*]], %{{.*}}, %[[STRIDE:.*]] = memref.extract_strided_metadata %[[BUF]]
// CHECK-NEXT:                %[[SCALED:.*]] = arith.muli %[[ID]], %[[STRIDE]]
// CHECK-NEXT:                %[[ELEMENT:.*]] = arith.addi %[[OFFSET]], %[[SCALED]]
// CHECK-NEXT:                %[[START:.*]] = memref.extract_aligned_pointer_as_index %[[BUF]]
// CHECK-NEXT:                %[[BYTES:.*]] = arith.muli %[[ELEMENT]], %[[FOUR]]
// CHECK-NEXT:                %[[ADDRESS:.*]] = arith.addi %[[START]], %[[BYTES]]
// CHECK-NEXT:                %[[START64:.*]] = arith.index_cast %[[START]]
// CHECK-NEXT:                %[[ADDRESS64:.*]] = arith.index_cast %[[ADDRESS]]
// CHECK-NEXT:                %[[SIZE64:.*]] = arith.index_cast %[[FOUR]]
// CHECK-NEXT:                func.call @weft_emulation_check_access(%[[START64]], %[[ADDRESS64]], %[[SIZE64]], %[[WRITE]], %[[NAME]])
// CHECK-NEXT:                memref.store %{{.*}}, %[[BUF]][%[[ID]]]
// CHECK:         memref.copy %[[BUF]], %arg0
// CHECK:         memref.dealloc %[[BUF]]
// CHECK-NOT:     gpu.
// CHECK:       memref.global "private" constant @__weft_kernel_name_0 : memref<{{[0-9]+}}xi8> = dense<[108, 97, 117, 110, 99, 104, 32, 35, 48, 32, 40
func.func @launch(%out: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  %buf = gpu.alloc () : memref<8xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %sx : index
    %i = arith.addi %base, %tx : index
    memref.store %one, %buf[%i] : memref<8xf32>
    gpu.terminator
  }
  gpu.memcpy %out, %buf : memref<8xf32>, memref<8xf32>
  gpu.dealloc %buf : memref<8xf32>
  return
}
