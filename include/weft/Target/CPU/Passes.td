//===- Passes.td - CPU backend passes ----------------------*- tablegen -*-===//

#ifndef WEFT_TARGET_CPU_PASSES_TD
#define WEFT_TARGET_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def WeftExpandBf16Conversions : Pass<"weft-expand-bf16-conversions"> {
  let summary = "Expand f32 <-> bf16 conversions into integer arithmetic";
  let description = [{
    `arith.truncf` from f32 to bf16 becomes integer arithmetic that rounds
    to nearest, ties to even (a NaN is truncated, its quiet bit set, so it
    stays a NaN); `arith.extf` from
    bf16 becomes a shift. Without it LLVM calls `__truncsfbf2` on CPUs
    without AVX512-BF16, and GCC 12's compiler runtime (Debian 12) has no
    such function, so a bf16 program would not link.

    ```mlir
    %h = arith.truncf %x : f32 to bf16
    // becomes bitcasts, shifts, adds and a select on the i32 bits of %x
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def WeftContractionsToBlas : Pass<"weft-contractions-to-blas"> {
  let summary = "Replace GEMM-shaped linalg.generic on memrefs by BLAS calls";
  let description = [{
    A `linalg.generic` on memrefs whose body is `out + a * b` over one
    reduction dim, with `a` indexed by (batch..., m, k) and `b` by
    (batch..., k, n) in any order and layout, becomes a call of the runtime's
    `weft_gemm_f32(a, b, c, bias, aux, flags)` (weft/runtime/Contract.h):
    `c += a * b`
    (`kGemmAccumulate`), or `c = a * b` (beta = 0) where a zero
    `linalg.fill` of all of `c`
    comes right before, with nothing touching `c` in between: the fill is
    left out and the library never reads `c`. Each operand is passed as a
    strided view of shape [batch..., rows, cols] built with
    `memref.reinterpret_cast`; a broadcast batch dim gets stride 0. A bf16
    (or fp16) product accumulated in f32 (`a` and `b` bf16, widened in the
    body, `c` f32) calls `weft_gemm_bf16` (`weft_gemm_f16`) instead: the
    callee is `callee` followed by the inputs' element type.

    A bf16 product whose f32 `c` only a rounding reads writes the rounded
    bf16 buffer itself (`weft_gemm_bf16_bf16`: f32 accumulation, one
    rounding, as cuBLAS writes a bf16 `c`): the op that initialized `c`
    before the GEMM (a zero fill: beta = 0; or an elementwise op such as a
    bias's broadcast, which then writes the bf16 buffer, rounded) and the
    op after it that yields `truncf(c)` into a bf16 buffer of `c`'s shape
    are the only users of `c` (`c` a temporary, or an argument that a fill
    writes all over again afterwards: the plan lends an output's bytes
    before its value is written); that op reads the bf16 buffer (widened)
    for whatever else it computes from `c`, or goes. The f32 buffer and
    its passes over memory go. Where an op between the producer and the
    rounding touches bytes the plan gave the bf16 buffer too, or where the
    op after the GEMM only rounds `c` but moves its elements (a
    transpose), the GEMM writes bf16 into the first half of `c`'s own
    bytes (`c` a view of the arena) and that op reads them as they are.
    Where `c` starts from zeros either is exact: the rounding happens once,
    where it did. Where an f32 bias initializes `c` (in the bias epilogue
    below too, whose bias has `c`'s type), the bias is rounded to bf16
    before the product adds to it: two roundings, exact where the bias was
    rounded to bf16 already (a bf16 step's bias, cast as autocast casts
    it). The next op
    on `c`'s bytes after the rounding must only write them (a fill, a
    linalg op that never reads them, a GEMM with beta = 0, a fused
    attention's outputs, a loop nest that only stores there): `c`'s life
    ended.

    A bias broadcast that initializes all of `c` (the last op on `c`
    before the GEMM, one input read along `c`'s last dim, the GEMM's n,
    and `c` row-major) becomes the GEMM's bias epilogue (`kGemmBias`,
    beta = 0; cuBLASLt's `CUBLASLT_EPILOGUE_BIAS` on a GPU): the
    broadcast's passes over `c` go. The bias is a vector of `c`'s element
    type: the broadcast's input where it yields it as it is, else what the
    broadcast computes (the bf16 rounding of an f32 bias, rounded again to
    a bf16 `c`) written into a vector in bytes added to the end of the
    function's arena (weft-plan-buffers); without an arena the broadcast
    stays.

    A sum over the rows of a GEMM's `b` into a zero-filled f32 vector
    after the GEMM (a bias's gradient where `b` is the layer's output
    gradient and `c` its weight's) is written by the GEMM's epilogue
    instead (`kGemmBiasGradient`; cuBLASLt's `CUBLASLT_EPILOGUE_BGRADA`):
    the sum reads `b` as the GEMM does, its body is `acc + x` (or of `x`
    widened), the GEMM has no batch dims and an f32 `c`, and nothing writes
    `b` or touches the vector in between. The fill and the sum go.

    GELU's tanh form on a bf16 GEMM's rounded result is its GELU epilogue
    (`kGemmGelu`; cuBLASLt's `CUBLASLT_EPILOGUE_GELU_AUX(_BIAS)`): where the
    op after the GEMM reads only `c` and writes `c` rounded (the
    pre-activation, the `aux` matrix) and `round(gelu(c rounded))` (the
    scalar body the lowering builds for `weft.gelu`, recognized by
    weft::computesExpression), the GEMM writes both and that op goes. Its
    gradient is the epilogue of the GEMM whose rounded result only a
    `weft.gelu_grad` body reads with the pre-activation
    (`kGemmGeluGradient`; `CUBLASLT_EPILOGUE_DGELU`): the GEMM writes that
    op's output, at the earliest point after the last op that touches the
    output's bytes or writes the pre-activation, where nothing has
    written `a` or `b` since the GEMM; that op goes. Both need `c` of one
    row-major matrix with a multiple of 8 columns and no accumulation
    (weft::runtime::geluEpilogueRefusal); the epilogue computes from the
    f32 sum where the op read it rounded.

    With `tf32`, an f32 GEMM's flags also carry `kGemmTf32`: the library
    may round its inputs to TF32 (the user allowed it: weftc
    `--allow-tf32`).

    The CUDA target names its own `callee` (cuBLAS, or the emulation's
    checked CPU BLAS) and sets `require-unit-strides`: a GEMM becomes a call
    only when each operand's matrix has a contiguous dim
    (weft::runtime::columnMajorLayout); the others stay loops, which become
    kernels.

    ```mlir
    linalg.generic {...} ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>) {
    ^bb0(%x: bf16, %y: bf16, %acc: f32):
      %wx = arith.extf %x : bf16 to f32
      %wy = arith.extf %y : bf16 to f32
      %p = arith.mulf %wx, %wy : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    }
    // becomes
    call @weft_gemm_bf16(%ua, %ub, %uc, %uc, %uc, %c1_i64) : (memref<*xbf16>, memref<*xbf16>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) -> ()
    ```
  }];
  let options = [
    Option<"callee", "callee", "std::string", /*default=*/"\"weft_gemm\"",
           "The runtime's GEMM functions, without the suffix naming the "
           "inputs' element type (_f32, _bf16, _f16, _bf16_bf16)">,
    Option<"requireUnitStrides", "require-unit-strides", "bool",
           /*default=*/"false",
           "Call only for operands a column-major GEMM library reads">,
    Option<"tf32", "tf32", "bool", /*default=*/"false",
           "f32 GEMMs may multiply as TF32 on tensor cores (kGemmTf32)">
  ];
  let dependentDialects = [
    "::mlir::func::FuncDialect", "::mlir::memref::MemRefDialect"
  ];
}

def WeftApproximateMath : Pass<"weft-approximate-math"> {
  let summary = "Polynomial approximations of erf, tanh, exp and log";
  let description = [{
    Replaces libm calls, one per element and never vectorized, by upstream's
    polynomial approximations (f32 accuracy within a few ulp), which LLVM
    vectorizes with the surrounding loop.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def WeftTileColumnReductions : Pass<"weft-tile-column-reductions"> {
  let summary = "Sum over rows along the rows, in tiles of columns";
  let description = [{
    A `linalg.generic` on memrefs whose innermost loop is a reduction while
    every operand is contiguous along one parallel loop (a sum over the
    rows of a row-major matrix: a bias's gradient, a norm's scale
    gradient) would loop down each column, its inner loop striding by a
    row, which LLVM vectorizes with gathers. The contiguous loop is tiled
    by `columns` (the tiles a parallel loop) and made innermost in each
    tile, whose loops are sequential: the tile adds row after row over its
    columns with contiguous loads. Each column still adds its rows in
    order.

    ```mlir
    linalg.generic {indexing_maps = [affine_map<(j, i) -> (i, j)>, affine_map<(j, i) -> (j)>],
                    iterator_types = ["parallel", "reduction"]}
        ins(%x : memref<512x256xf32>) outs(%sum : memref<256xf32>) {...}
    // becomes
    scf.parallel (%j) = (%c0) to (%c256) step (%c64) {
      scf.for %i = %c0 to %c512 step %c1 {
        scf.for %jj = %c0 to %c64 step %c1 {
          // %tile[%jj] += %rows[%i, %jj]
        }
      }
    }
    ```
  }];
  let options = [
    Option<"columns", "columns", "int64_t", /*default=*/"64",
           "Columns of each tile">
  ];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect",
    "::mlir::affine::AffineDialect"
  ];
}

def WeftSerializeInnerLoop : Pass<"weft-serialize-inner-loop"> {
  let summary = "Keep the innermost dim of a parallel loop nest sequential";
  let description = [{
    Splits each multi-dimensional `scf.parallel` into a parallel loop over
    all dims but the last and an `scf.for` over the last. OpenMP then
    collapses only the outer dims (recovering their indices with
    division), while the innermost loop keeps unit-stride accesses that
    LLVM vectorizes.

    A nest with fewer than `min-parallel-work` innermost iterations in all
    (static bounds) becomes sequential entirely: forking and joining a
    parallel region would cost more than the loop. So does a nest that adds
    into memory atomically (`memref.atomic_rmw addf`, as `weft.scatter_add`
    bufferizes), its atomic adds becoming a load, an add and a store: the
    sums then run in program order, and a training run repeats bit for bit.
  }];
  let options = [
    Option<"minParallelWork", "min-parallel-work", "int64_t",
           /*default=*/"32768",
           "Iterations below which a loop nest stays sequential">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

#endif // WEFT_TARGET_CPU_PASSES_TD
