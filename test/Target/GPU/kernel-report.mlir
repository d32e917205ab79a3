// RUN: weft-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(weft-gpu-row-reductions),weft-gpu-kernel-report)" | FileCheck %s

// An elementwise kernel of 1000 elements on 4 blocks of 256 threads: the
// guard is evaluated thread by thread, so the last block's 24 idle threads
// count nothing; 1000 multiplications, 4000 bytes each way.
// CHECK-LABEL: module attributes {weft.kernel_report = {buffers = [{count = 2 : i64, element_bits = 32 : i64, elements = 1000 : i64, kind = "argument", shape = [1000], type = "memref<1000xf32>"}]
// CHECK-SAME:    launches = [{block = [256, 1, 1], bytes_read = 4000 : i64, bytes_written = 4000 : i64, elements = 2000 : i64, exact = true, flops = 1000 : i64, function = "scale", grid = [4, 1, 1], id = 0 : i64, index = 0 : i64, kind = "kernel", node = "Mul_0", runs = 1 : i64, tensor_cores = false}]}
// CHECK:         gpu.launch {{.*}} {
// CHECK:         } {weft.launch_id = 0 : i64}
func.func @scale(%x: memref<1000xf32>, %y: memref<1000xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c256 = arith.constant 256 : index
  %c1000 = arith.constant 1000 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %c256 : index
    %i = arith.addi %base, %tx : index
    %inside = arith.cmpi ult, %i, %c1000 : index
    scf.if %inside {
      %v = memref.load %x[%i] : memref<1000xf32>
      %w = arith.mulf %v, %v : f32
      memref.store %w, %y[%i] : memref<1000xf32>
    }
    gpu.terminator
  } loc("Mul_0")
  return
}

// -----

// A row sum made by weft-gpu-row-reductions: a block per row, each thread
// striding over the row, thread 0 adding the output's value: the whole
// input and the output read once, the output written once (64 x 768 + 64
// floats). Its FLOPs: the row's 768 additions, the shuffles' and the final
// addition per block.
// CHECK-LABEL: module attributes {weft.kernel_report
// CHECK-SAME:    launches = [{block = [256, 1, 1], bytes_read = 196864 : i64, bytes_written = 256 : i64, elements = 49280 : i64, exact = true, flops = {{[0-9]+}} : i64, function = "row_sum", grid = [64, 1, 1], id = 0 : i64, index = 0 : i64, kind = "kernel", node = "{{.*}}", runs = 1 : i64, tensor_cores = false}]
func.func @row_sum(%x: memref<64x768xf32>, %sum: memref<64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x768xf32>) outs(%sum : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A gather: the table's rows are read where the loaded ids say, so the
// kernel's bytes are an upper bound (inexact): 8 lookups of 16 floats at
// most, not the whole table.
// CHECK-LABEL: module attributes {weft.kernel_report
// CHECK-SAME:    bytes_read = 544 : i64, bytes_written = 512 : i64, elements = 264 : i64, exact = false
func.func @gather(%ids: memref<8xi32>, %table: memref<1000x16xf32>, %out: memref<8x16xf32>) {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c128 = arith.constant 128 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %row = arith.divui %tx, %c16 : index
    %col = arith.remui %tx, %c16 : index
    %id = memref.load %ids[%row] : memref<8xi32>
    %index = arith.index_cast %id : i32 to index
    %v = memref.load %table[%index, %col] : memref<1000x16xf32>
    memref.store %v, %out[%row, %col] : memref<8x16xf32>
    gpu.terminator
  }
  return
}

// -----

// A layer function called twice, a GEMM of the runtime's (c += a * b reads
// c too: accumulate 1) and a launch in a loop of 3: runs per call of the entry; the
// launches are listed in the order they first run.
// CHECK-LABEL: module attributes {weft.kernel_report
// CHECK-SAME:    bytes_read = 8 : i64, bytes_written = 8 : i64, {{.*}} function = "layer", {{.*}} id = 0 : i64, {{.*}} runs = 6 : i64
// CHECK-SAME:    bytes_read = 4096 : i64, bytes_written = 1024 : i64, {{.*}} flops = 8192 : i64, function = "main", id = 1 : i64, index = 0 : i64, kind = "gemm", library = "cublasLtMatmul", node = "MatMul_3", runs = 1 : i64, shape = [2, 8, 16, 16], tensor_cores = false, tf32 = false
// CHECK:         call @weft_cuda_gemm_f32({{.*}}) {weft.launch_id = 1 : i64}
func.func private @weft_cuda_gemm_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) attributes {weft.gemm}
func.func @layer(%x: memref<2xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %step = %c0 to %c3 step %c1 {
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      %c0k = arith.constant 0 : index
      %c1k = arith.constant 1 : index
      %a = memref.load %x[%c0k] : memref<2xf32>
      %b = memref.load %x[%c1k] : memref<2xf32>
      %s = arith.addf %a, %b : f32
      memref.store %s, %x[%c0k] : memref<2xf32>
      memref.store %s, %x[%c1k] : memref<2xf32>
      gpu.terminator
    }
  }
  return
}
func.func @main(%x: memref<2xf32>, %a: memref<2x8x16xf32>, %b: memref<2x16x16xf32>, %c: memref<2x8x16xf32>) {
  %ua = memref.cast %a : memref<2x8x16xf32> to memref<*xf32>
  %ub = memref.cast %b : memref<2x16x16xf32> to memref<*xf32>
  %uc = memref.cast %c : memref<2x8x16xf32> to memref<*xf32>
  %accumulate = arith.constant 1 : i64
  call @layer(%x) : (memref<2xf32>) -> ()
  call @weft_cuda_gemm_f32(%ua, %ub, %uc, %uc, %uc, %accumulate) : (memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) -> () loc("MatMul_3")
  call @layer(%x) : (memref<2xf32>) -> ()
  return
}

// -----

// A bf16 GEMM accumulating in f32 runs on tensor cores: its inputs are 2
// bytes an element, c 4; a broadcast batch (stride 0) reads b once, and
// with beta = 0 (accumulate 0) c is written, not read.
// CHECK-LABEL: module attributes {weft.kernel_report
// CHECK-SAME:    bytes_read = 1024 : i64, bytes_written = 1024 : i64, elements = 768 : i64, epilogue = "", exact = true, flops = 8192 : i64, {{.*}} kind = "gemm", library = "cublasLtMatmul", {{.*}} shape = [2, 8, 16, 16], tensor_cores = true, tf32 = false
func.func private @weft_cuda_gemm_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) attributes {weft.gemm}
func.func @main(%a: memref<2x8x16xbf16>, %b: memref<16x16xbf16>, %c: memref<2x8x16xf32>) {
  %va = memref.reinterpret_cast %a to offset: [0], sizes: [2, 8, 16], strides: [128, 16, 1] : memref<2x8x16xbf16> to memref<2x8x16xbf16, strided<[128, 16, 1]>>
  %vb = memref.reinterpret_cast %b to offset: [0], sizes: [2, 16, 16], strides: [0, 16, 1] : memref<16x16xbf16> to memref<2x16x16xbf16, strided<[0, 16, 1]>>
  %ua = memref.cast %va : memref<2x8x16xbf16, strided<[128, 16, 1]>> to memref<*xbf16>
  %ub = memref.cast %vb : memref<2x16x16xbf16, strided<[0, 16, 1]>> to memref<*xbf16>
  %uc = memref.cast %c : memref<2x8x16xf32> to memref<*xf32>
  %overwrite = arith.constant 0 : i64
  call @weft_cuda_gemm_bf16(%ua, %ub, %uc, %uc, %uc, %overwrite) : (memref<*xbf16>, memref<*xbf16>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) -> ()
  return
}

// -----

// An f32 GEMM the user let multiply as TF32 (flags kGemmAccumulate |
// kGemmTf32) runs on tensor cores and is priced at the TF32 peak; it reads
// c too.
// CHECK-LABEL: module attributes {weft.kernel_report
// CHECK-SAME:    bytes_read = 2048 : i64, bytes_written = 1024 : i64, {{.*}} kind = "gemm", library = "cublasLtMatmul", {{.*}} tensor_cores = true, tf32 = true
func.func private @weft_cuda_gemm_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) attributes {weft.gemm}
func.func @main(%a: memref<16x8xf32>, %b: memref<8x16xf32>, %c: memref<16x16xf32>) {
  %ua = memref.cast %a : memref<16x8xf32> to memref<*xf32>
  %ub = memref.cast %b : memref<8x16xf32> to memref<*xf32>
  %uc = memref.cast %c : memref<16x16xf32> to memref<*xf32>
  %flags = arith.constant 3 : i64
  call @weft_cuda_gemm_f32(%ua, %ub, %uc, %uc, %uc, %flags) : (memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) -> ()
  return
}

// -----

// The GELU epilogue (kGemmBias | kGemmGelu) writes the pre-activation
// (aux, c's type and shape) besides c; the GELU-gradient epilogue reads
// it. bf16 throughout: a and b 256 bytes, c and aux 512, the bias 32.
// CHECK-LABEL: module attributes {weft.kernel_report
// CHECK-SAME:    bytes_read = 544 : i64, bytes_written = 1024 : i64, elements = 784 : i64, epilogue = "bias + GELU", {{[^}]*}} kind = "gemm"
// CHECK-SAME:    bytes_read = 1024 : i64, bytes_written = 512 : i64, elements = 768 : i64, epilogue = "GELU gradient", {{.*}} kind = "gemm"
func.func private @weft_cuda_gemm_bf16_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, i64) attributes {weft.gemm}
func.func @main(%a: memref<16x8xbf16>, %b: memref<8x16xbf16>, %c: memref<16x16xbf16>, %bias: memref<16xbf16>, %aux: memref<16x16xbf16>, %d: memref<16x16xbf16>) {
  %ua = memref.cast %a : memref<16x8xbf16> to memref<*xbf16>
  %ub = memref.cast %b : memref<8x16xbf16> to memref<*xbf16>
  %uc = memref.cast %c : memref<16x16xbf16> to memref<*xbf16>
  %ubias = memref.cast %bias : memref<16xbf16> to memref<*xbf16>
  %uaux = memref.cast %aux : memref<16x16xbf16> to memref<*xbf16>
  %ud = memref.cast %d : memref<16x16xbf16> to memref<*xbf16>
  %forward = arith.constant 20 : i64
  call @weft_cuda_gemm_bf16_bf16(%ua, %ub, %uc, %ubias, %uaux, %forward) : (memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, i64) -> ()
  %backward = arith.constant 32 : i64
  call @weft_cuda_gemm_bf16_bf16(%ua, %ub, %ud, %ud, %uaux, %backward) : (memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, i64) -> ()
  return
}

// -----

// The bias epilogue (kGemmBias, beta = 0) reads the bias vector once and
// does not read c.
// CHECK-LABEL: module attributes {weft.kernel_report
// CHECK-SAME:    bytes_read = 1088 : i64, bytes_written = 1024 : i64, elements = 528 : i64, epilogue = "bias", {{.*}} kind = "gemm"
func.func private @weft_cuda_gemm_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) attributes {weft.gemm}
func.func @main(%a: memref<16x8xf32>, %b: memref<8x16xf32>, %c: memref<16x16xf32>, %bias: memref<16xf32>) {
  %ua = memref.cast %a : memref<16x8xf32> to memref<*xf32>
  %ub = memref.cast %b : memref<8x16xf32> to memref<*xf32>
  %uc = memref.cast %c : memref<16x16xf32> to memref<*xf32>
  %ubias = memref.cast %bias : memref<16xf32> to memref<*xf32>
  %flags = arith.constant 4 : i64
  call @weft_cuda_gemm_f32(%ua, %ub, %uc, %ubias, %uc, %flags) : (memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) -> ()
  return
}

// -----

// A merged launch (weft-gpu-merge-launches) is counted part by part: the
// first part's block copies 16 floats, the next 4 blocks scale 1000. Taking
// the middle blocks for the first block would count 64 copies and only the
// last block's 232 products.
// CHECK-LABEL: module attributes {weft.kernel_report
// CHECK-SAME:    launches = [{block = [256, 1, 1], bytes_read = 4064 : i64, bytes_written = 4064 : i64, elements = 2032 : i64, exact = true, flops = 1000 : i64, function = "merged", grid = [5, 1, 1]
func.func @merged(%x: memref<1000xf32>, %y: memref<1000xf32>, %a: memref<16xf32>, %b: memref<16xf32>) {
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c16 = arith.constant 16 : index
  %c256 = arith.constant 256 : index
  %c1000 = arith.constant 1000 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c5, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %first = arith.cmpi ult, %bx, %c1 : index
    scf.if %first {
      %inside = arith.cmpi ult, %tx, %c16 : index
      scf.if %inside {
        %v = memref.load %a[%tx] : memref<16xf32>
        memref.store %v, %b[%tx] : memref<16xf32>
      }
    } else {
      %block = arith.subi %bx, %c1 : index
      %base = arith.muli %block, %c256 : index
      %i = arith.addi %base, %tx : index
      %inside = arith.cmpi ult, %i, %c1000 : index
      scf.if %inside {
        %v = memref.load %x[%i] : memref<1000xf32>
        %w = arith.mulf %v, %v : f32
        memref.store %w, %y[%i] : memref<1000xf32>
      }
    }
    gpu.terminator
  } {weft.block_segments = array<i64: 0, 1>}
  return
}

// -----

// The bias-gradient epilogue (kGemmBiasGradient) writes the vector too.
// CHECK-LABEL: module attributes {weft.kernel_report
// CHECK-SAME:    bytes_read = 1024 : i64, bytes_written = 288 : i64, elements = 328 : i64, epilogue = "bias gradient", {{.*}} kind = "gemm"
func.func private @weft_cuda_gemm_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) attributes {weft.gemm}
func.func @main(%a: memref<8x16xf32>, %b: memref<16x8xf32>, %c: memref<8x8xf32>, %db: memref<8xf32>) {
  %ua = memref.cast %a : memref<8x16xf32> to memref<*xf32>
  %ub = memref.cast %b : memref<16x8xf32> to memref<*xf32>
  %uc = memref.cast %c : memref<8x8xf32> to memref<*xf32>
  %udb = memref.cast %db : memref<8xf32> to memref<*xf32>
  %flags = arith.constant 8 : i64
  call @weft_cuda_gemm_f32(%ua, %ub, %uc, %udb, %uc, %flags) : (memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) -> ()
  return
}
