//===- Passes.td - Target-independent lowering passes ------*- tablegen -*-===//
//
// Passes of the lowering that every target runs: they work on linalg on
// tensors (recomputation, elementwise fusion) or on bufferized memrefs
// (buffer planning, strided copies) and know nothing of the machine.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LOWERING_PASSES
#define WEFT_LOWERING_PASSES

include "mlir/Pass/PassBase.td"

def WeftRecompute : Pass<"weft-recompute", "::mlir::ModuleOp"> {
  let summary = "Recompute forward activations in the backward pass";
  let description = [{
    In a function that returns its loss first (a training step, a gradient
    program), the forward pass is what the loss depends on; every other op
    reading a forward value belongs to the backward pass (or the update).
    This pass gives such readers a recomputed copy instead, cloned right
    before the first of them, so that the forward value dies as soon as
    the forward pass is done with it and the copy lives only while the
    backward pass needs it. It runs on tensors after the last common
    subexpression elimination, which would merge the copies back.

    - `selective`: elementwise ops (all-parallel linalg ops) and reshapes
      and slices are recomputed from the values they read; contractions,
      reductions and normalization rows are kept.
    - `full`: everything a layer computes is recomputed from the layer's
      inputs (the values it reads from other layers), as in Megatron-LM's
      full recomputation. A layer is what an op's location names up to its
      first number: "/h.3/attn/MatMul" belongs to "/h.3". Ops outside
      layers (embeddings, the head, the loss) are kept.
    - `none`: nothing changes.

    The copies run the same ops on the same inputs. The compiled code
    around them changes (buffer placement, in-place decisions), which moves
    results by float rounding only (about 1e-7 relative in the bundled
    model's losses).
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"none\"",
           "none, selective or full">,
    Option<"lossFunction", "loss-function", "std::string", /*default=*/"\"\"",
           "A function whose first result is the loss, besides those whose "
           "weft.outputs start with \"loss\"">
  ];
}

def WeftFoldTransposes : Pass<"weft-fold-transposes"> {
  let summary = "Fused attention reads and writes permuted views, not copies";
  let description = [{
    A model splits its projections into heads as [B, S, H, D] and hands
    attention [B, H, S, D]: transposing copies before the forward (q, k,
    v), after it (the output) and around the backward (the output's
    gradient in, the three gradients out, then copied into their
    concatenation). The fused attention calls take any non-negative
    strides with a unit last one (weft/runtime/Contract.h), as cuDNN and
    FlashAttention do, so on bufferized memrefs, before weft-plan-buffers:

    - a copy whose target only fused attention calls read goes: they read
      a permuted view of its source (a `memref.reinterpret_cast` with the
      strides permuted), which nothing writes until the last of them;
    - a copy out of a buffer that only fused attention calls and
      all-parallel `linalg.generic`s (elementwise ops, other copies) use
      goes: that buffer becomes a view of the copy's target (permuted
      back, or reshaped where the copy read a `memref.collapse_shape` of
      it), which nothing else touches from the buffer's first use to the
      copy, nor writes until its last use. This one applies on every
      target: an elementwise result copied into a concatenation's slice is
      written there directly, on the CPU too.

    Copies are permutation-only `linalg.generic`s and `memref.copy`. No
    element changes: the calls read and write the same numbers at other
    addresses.

    ```mlir
    // %t = alloc [2, 4, 16, 16]; %t[b, h, s, d] = %head[b, s, h, d], where
    // %head is memref<2x16x4x16xbf16, strided<[3072, 192, 16, 1]>>
    // call @weft_cuda_attention_forward_bf16(%t, ...)
    // becomes
    %q = memref.reinterpret_cast %head to offset: [0], sizes: [2, 4, 16, 16],
        strides: [3072, 16, 192, 1] : ... to memref<2x4x16x16xbf16, strided<[3072, 16, 192, 1]>>
    // call @weft_cuda_attention_forward_bf16(%q, ...)
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def WeftPlanBuffers : Pass<"weft-plan-buffers", "::mlir::ModuleOp"> {
  let summary = "Place temporary buffers in one arena by liveness";
  let description = [{
    Every statically shaped `memref.alloc` of a function gets an offset in
    a single arena, allocated once per call: buffers whose live ranges do
    not overlap share memory. A range runs, in the ops of the entry block,
    from the allocation to the last use of the buffer, of a view of it, or
    of the results of a loop or branch it flows into (a loop may return
    the buffer it carries). A buffer allocated inside a loop or a case
    lives as long as the entry-block op that holds it (each iteration
    reuses its place); one yielded out of the region it is allocated in
    (an iteration's buffer read by the next) is left to the allocator, as
    is one a function returns. Offsets are chosen greedily, largest
    buffer first, at the lowest 64-byte aligned offset free for its whole
    live range. The deallocations of planned buffers are dropped; the arena
    is freed before each return. The module attribute `weft.memory_plan`
    records the peak of temporary memory, the sum of the planned buffers,
    and their number. A function's peak is its arena plus the largest peak
    of the functions it calls (they run one at a time inside it, as an
    outlined step's stages do); the module's is the sum over the functions
    nothing calls. With `free-arena=false` the arena gets no deallocation:
    run before `buffer-deallocation-pipeline`, that pipeline then frees it
    and has one allocation to track instead of every temporary (its
    simplification grows faster than linearly with them).
  }];
  let options = [
    Option<"freeArena", "free-arena", "bool", /*default=*/"true",
           "Free the arena before each return">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect"
  ];
}

def WeftFuseElementwise : Pass<"weft-fuse-elementwise"> {
  let summary = "Fuse elementwise linalg ops, keeping GEMMs intact";
  let description = [{
    Upstream elementwise fusion of a producer into its only user, except
    that nothing is fused into a multiply-accumulate contraction: those
    stay plain so that a target can hand them to its GEMM library
    (`weft-contractions-to-blas` on the CPU).
    A producer with several users is never copied into them: fused into
    each it would be recomputed per user, and a training step's backward
    reads most forward values several times, so copying repeats work at
    run time and grows the kernels LLVM compiles. Instead it fuses into
    its first user when that user is elementwise, reads each of its
    elements once and comes before every other user: the producer's
    values become an extra result of the fused op, which the other users
    read. An AdamW update, whose moments are both stored and read by the
    parameter update, becomes one loop per parameter. The exception is an
    exact widening cast (bf16 to f32: one conversion per element), which
    CSE makes one value for several readers (a bf16 pre-activation read by
    GELU and by its gradient): where every reader is elementwise work that
    can take it in, each gets a copy, so that the wide values are never
    stored.

    What stands between two elementwise ops moves out of the way: a
    reshape (a GEMM's `[b * s, n]` result cast, then read as `[b, s, n]`)
    is folded by expanding the elementwise op's loops, and a transpose
    that keeps the innermost dim in place (the attention's head views)
    becomes a generic that fuses with the casts around it.

    A `linalg.transpose` read only by a contraction is folded into the
    contraction's indexing map instead of being copied: the GEMM library
    reads its input as a transposed (or batch-strided) view, where the
    input's innermost dim stays one of the operand's two matrix dims.

    ```mlir
    %t = linalg.transpose ins(%g : tensor<256x320xf32>) outs(%e : tensor<320x256xf32>) permutation = [1, 0]
    %dw = linalg.generic {indexing_maps = [(m, n, k) -> (m, k), ...]} ins(%t, %x : ...)
    // becomes
    %dw = linalg.generic {indexing_maps = [(m, n, k) -> (k, m), ...]} ins(%g, %x : ...)
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def WeftStridedCopiesToLoops : Pass<"weft-strided-copies-to-loops"> {
  let summary = "Turn copies of strided buffers into linalg copies";
  let description = [{
    A `memref.copy` between buffers that are not both contiguous would
    become a call to MLIR's generic `memrefCopy`, which walks the elements
    one at a time through their descriptors (slices of parameters and
    optimizer state under ZeRO spend a tenth of a step there). This pass
    rewrites it into `linalg.copy`, which each target lowers like any other
    elementwise op (parallel, vectorizable loops on the CPU, a kernel on a
    GPU). Copies between contiguous buffers stay `memref.copy` (one
    `memcpy`).

    ```mlir
    // memref.copy %a, %b : memref<4x8xf32, strided<[16, 1]>> to memref<4x8xf32>
    // becomes
    linalg.copy ins(%a : memref<4x8xf32, strided<[16, 1]>>) outs(%b : memref<4x8xf32>)
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def WeftDistinctResults : Pass<"weft-distinct-results"> {
  let summary = "Return each buffer once: a repeated result gets a copy";
  let description = [{
    After bufferization a function may return one buffer twice: the same
    tensor twice at the tensor level, as the gradients of the two biases
    that a parallel residual adds to one sum (GPT-NeoX, Phi), which CSE
    merges. `buffer-results-to-out-params` with `hoist-static-allocs`
    replaces each returned allocation by its out-param and erases it, and
    crashed erasing that one twice. This pass, which runs right before it,
    returns a fresh copy for every repeat, so that each result has a
    buffer of its own (the runtime gives each output its own memory).

    ```mlir
    // return %a, %a : memref<4xf32>, memref<4xf32>
    // becomes
    %copy = memref.alloc() : memref<4xf32>
    memref.copy %a, %copy : memref<4xf32> to memref<4xf32>
    return %a, %copy : memref<4xf32>, memref<4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

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
    Option<"callee", "callee", "std::string",
           /*default=*/"::weft::runtime::kCpuGemm",
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

#endif // WEFT_LOWERING_PASSES
