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

#endif // WEFT_LOWERING_PASSES
