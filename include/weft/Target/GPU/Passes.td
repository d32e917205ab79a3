//===- Passes.td - Passes on the gpu dialect ---------------*- tablegen -*-===//
//
// The GPU targets' passes: loop nests to gpu.launch kernels, reductions and
// transposes a GPU runs well, launches merged, device memory, the kernel
// report, library calls, and the emulation of the kernels on the CPU. They
// work on the generic gpu dialect; what is NVIDIA's (NVVM, PTX, cubins) is
// lib/Target/CUDA's.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_GPU_PASSES_TD
#define WEFT_TARGET_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def WeftGpuLaunchLoops : Pass<"weft-gpu-launch-loops", "::mlir::ModuleOp"> {
  let summary = "Run each loop nest of host code as a GPU kernel";
  let description = [{
    After bufferization every computation of a host function is a loop
    nest over memrefs. Each becomes a `gpu.launch`:

    - an `scf.parallel` (no reductions) runs one iteration per thread: its
      iteration space is linearized, blocks of `threads-per-block` threads
      cover it, and each thread recovers its indices by division (any rank,
      dynamic bounds, no grid-dimension limits); threads past the end do
      nothing, and an empty space launches nothing. Where the body is
      straight-line code that loads before it stores and the innermost
      index only picks elements of unit-stride last dims, each thread takes
      up to 16 bytes' worth of neighbouring elements of that dim (of its
      narrowest element; at most 8, while `min-blocks` blocks remain): all
      their loads first, then the arithmetic, then all their stores, which
      NVPTX merges into 64- and 128-bit accesses where the buffers'
      alignment is stated (`weft-gpu-assume-alignment`);
    - any other nest that touches memory (a sequential `scf.for`, a store)
      runs on one thread.

    A loop that calls functions (the micro-batch loop, a pipeline's schedule
    loop) is control flow: it stays on the host and its body is searched in
    turn. A value that host code reads from memory cannot move to the
    device; the pass fails at such a read.

    ```mlir
    scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c128) step (%c1, %c1) {
      ...
    }
    // becomes
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c32, ...) threads(%tx, %ty, %tz) in (%sx = %c256, ...) {
      // %id = %bx * 256 + %tx; %i = %id / 128, %j = %id mod 128 when %id < 8192
      gpu.terminator
    }
    ```
  }];
  let options = [
    Option<"threadsPerBlock", "threads-per-block", "int64_t",
           /*default=*/"256", "Threads of each block of a parallel loop">,
    Option<"minBlocks", "min-blocks", "int64_t", /*default=*/"132",
           "Blocks a loop whose threads take several elements each keeps "
           "(the GPU's SMs: 132 on an H100 or H200)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def WeftGpuRowReductions : Pass<"weft-gpu-row-reductions", "::mlir::func::FuncOp"> {
  let summary = "Run each f32 row reduction as one block per row";
  let description = [{
    Two forms of per-row work become a `gpu.launch` with one block per row:

    - a row kernel of `convert-weft-to-linalg` (softmax, log-softmax, layer
      and RMS norm): an `scf.forall` over rows whose body makes passes
      (`scf.for` over the row's columns) that carry only reductions. Each
      pass strides its threads over the columns (as many threads as the
      longest pass has columns, in whole warps, at most
      threads-per-block), each reduction is combined over the block as
      below, every thread goes on with the total, and a `gpu.barrier`
      separates the passes. A running value written per column (a scan) is
      not a reduction: such a kernel is left alone.
    - a row generic of `convert-weft-to-linalg` (the cross-entropy): a
      `linalg.generic` with parallel loops only whose body makes such
      passes (writing nothing) between pure computations and yields the
      row's values; one block per iteration, the passes as in a row
      kernel, thread 0 storing the yielded values.
    - a `linalg.generic` on memrefs with reduction loops whose body ends
      in `out = combiner(out, partial)` (`arith.addf`, `mulf`, `maximumf`,
      `minimumf`, `maxnumf`, `minnumf`: the backward pass's sums, for one),
      one block per row of its parallel loops (linearized; the last
      fastest), its columns the reduction loops (linearized too), thread 0
      folding the total into the output. Fewer rows than `min-blocks`, each
      of at least 64 K columns (the gradient norm's sum over a whole
      weight), are cut into chunks: rows × chunks blocks (chunks =
      min(ceil(min-blocks / rows), ceil(columns / (4 × threads)))) write
      their totals to a temporary, and a second launch of one block per row
      combines them.

    A block reduction:

    - each thread combines the partials of the columns `thread`,
      `thread + threads-per-block`, ... in registers;
    - each warp combines its threads' values with five butterfly shuffles
      (`gpu.shuffle xor`, offsets 16 to 1);
    - lane 0 of each warp writes its warp's value to shared memory (a
      workgroup attribution of a float per warp), a `gpu.barrier` waits for
      all, and every warp combines those values with shuffles again.

    The combiner is assumed associative: the order of the additions differs
    from the loop's. An empty iteration space launches nothing.

    ```mlir
    linalg.generic {iterator_types = ["parallel", "reduction"]}
        ins(%x : memref<64x768xf32>) outs(%sum : memref<64xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %s = arith.addf %acc, %in : f32
      linalg.yield %s : f32
    }
    // becomes
    gpu.launch blocks(%row, ...) in (%c64, ...) threads(%t, ...) in (%c256, ...)
        workgroup(%warps : memref<8xf32, #gpu.address_space<workgroup>>) {
      %partial = scf.for %j = %t to %c768 step %c256 iter_args(%a = %zero) -> f32 { ... }
      %s16, %v16 = gpu.shuffle xor %partial, %c16_i32, %c32_i32 : f32
      ...
      gpu.barrier
      ...
    }
    ```
  }];
  let options = [
    Option<"threadsPerBlock", "threads-per-block", "int64_t",
           /*default=*/"256", "Threads of each row's block (a multiple of 32)">,
    Option<"minBlocks", "min-blocks", "int64_t", /*default=*/"132",
           "Blocks a reduction of few long rows is spread over (the "
           "GPU's SMs: 132 on an H100 or H200)">
  ];
  let dependentDialects = [
    "::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def WeftGpuTiledTransposes : Pass<"weft-gpu-tiled-transposes", "::mlir::func::FuncOp"> {
  let summary = "Run each transpose of the innermost dim through shared memory";
  let description = [{
    A `linalg.transpose` on memrefs that moves the innermost dim reads one
    buffer along its rows and writes the other across them: one thread per
    element would make one of the two strided. This pass makes it a
    launch of one block per 32 x 32 tile (the tiles of the two dims that are
    innermost in the input and in the output, and every index of the other
    dims, linearized into the grid). A block of 32 x 8 threads reads its
    tile along the input's rows into shared memory (32 x 33 elements: the
    padding column puts a column's 32 elements in 32 different banks),
    waits at a `gpu.barrier`, and writes the transposed tile along the
    output's rows; each thread moves 4 elements each way, and the edges of
    the tensor are guarded. A transpose that keeps the innermost dim in place
    copies whole rows and is left to `weft-gpu-launch-loops`.

    ```mlir
    linalg.transpose ins(%x : memref<64x96xf32>) outs(%y : memref<96x64xf32>) permutation = [1, 0]
    // becomes
    gpu.launch blocks(%b, ...) in (%c6, ...) threads(%tx, %ty, ...) in (%c32, %c8, ...)
        workgroup(%tile : memref<32x33xf32, #gpu.address_space<workgroup>>) {
      ... memref.load %x[%row, %col] ... memref.store %v, %tile[%ty, %tx] ...
      gpu.barrier
      ... memref.load %tile[%tx, %ty] ... memref.store %v, %y[%row2, %col2] ...
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect"
  ];
}

def WeftGpuMergeLaunches : Pass<"weft-gpu-merge-launches", "::mlir::ModuleOp"> {
  let summary = "Run independent kernels of host code in one launch";
  let description = [{
    A launch costs a few microseconds whatever it does, and an optimizer
    step or a gradient norm is a hundred small kernels that do not depend on
    one another. Between two ops of host code with other effects on memory
    (copies, deallocations, control flow, calls other than the GEMM and
    fused attention library calls), a `gpu.launch` depends on an earlier
    launch or library call that writes bytes it reads or writes, or reads
    bytes it writes (a library call reads its memref operands and writes
    those weft/runtime/Contract.h says it writes: a GEMM its c, an
    attention its outputs), and on what that one depends on. In their
    order, the launches with one-dimensional grids join the first launch
    of their block size that neither depends on them nor they on it, while
    the parameters fit in `max-parameter-bytes` (CUDA's classic limit, the
    default, is 4 KB; the CUDA target passes PTX 8.1's 32764; a memref is
    passed as its descriptor, constants are sunk into the kernels). The ops
    are then reordered, each moving only down past ops it does not depend
    on: the merged grid holds the
    parts' blocks one after another, and each block finds its part by a
    binary search of its id over the parts' first blocks (kept in
    `weft.block_segments` for the kernel report), so one block runs one
    part's code and barriers stay uniform. Parts share the workgroup
    buffers of one type.

    Buffers may alias where their views reach the same allocation, global
    or function argument at overlapping bytes (static views are compared by
    their byte ranges and, where those overlap, by the columns of each row
    they hold, a concatenation's slices being disjoint; others
    conservatively). A public function's
    arguments are distinct buffers, as the runtime allocates them; a
    private function's two arguments may alias where a call passes buffers
    that may.

    ```mlir
    gpu.launch blocks(%b, ...) in (%g = %c4, ...) threads(%t, ...) in (%s = %c256, ...) {
      ... // writes %x
    }
    gpu.launch blocks(%b, ...) in (%g = %c2, ...) threads(%t, ...) in (%s = %c256, ...) {
      ... // writes %y
    }
    // becomes
    gpu.launch blocks(%b, ...) in (%g = %c6, ...) threads(%t, ...) in (%s = %c256, ...) {
      scf.if %b < 4 { ... first kernel, block %b } else { ... second, block %b - 4 }
    } {weft.block_segments = array<i64: 0, 4>}
    ```
  }];
  let options = [
    Option<"maxParameterBytes", "max-parameter-bytes", "int64_t",
           /*default=*/"4096", "Bytes of parameters one merged launch may take">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def WeftGpuDeviceMemory : Pass<"weft-gpu-device-memory", "::mlir::ModuleOp"> {
  let summary = "Put the buffers of host code in device memory";
  let description = [{
    Once the loops run as kernels (`weft-gpu-launch-loops`), what host code
    still does with memory is allocate, free and copy it. This pass makes
    each of those a device operation: `memref.alloc` becomes `gpu.alloc`,
    `memref.dealloc` becomes `gpu.dealloc`, and a `memref.copy` between
    contiguous buffers becomes `gpu.memcpy` (strided copies are kernels
    already, `weft-strided-copies-to-loops`). A constant (`memref.get_global`)
    that kernels read goes into the kernels: each use inside a launch gets
    its own `memref.get_global`, which kernel outlining copies into the
    kernel's module with the global, so the constant reaches the device
    with the code, once. A constant the host code passes on (a copy, a
    library call) is copied into a device buffer at the start of the
    function and freed at its returns.

    ```mlir
    %a = memref.alloc() : memref<64xf32>
    memref.copy %a, %b : memref<64xf32> to memref<64xf32>
    // becomes
    %a = gpu.alloc () : memref<64xf32>
    gpu.memcpy %b, %a : memref<64xf32>, memref<64xf32>
    ```
  }];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect", "::mlir::memref::MemRefDialect"
  ];
}

def WeftGpuAssumeAlignment : Pass<"weft-gpu-assume-alignment", "::mlir::ModuleOp"> {
  let summary = "State what is known of the alignment of each buffer a kernel reads";
  let description = [{
    NVPTX merges neighbouring accesses of a thread into one 64- or 128-bit
    access (its load-store vectorizer) only where it knows their address is
    aligned to the access's size; a kernel's buffers are parameters, whose
    alignment it does not know. This pass states it: at the start of each
    `gpu.launch`, a `memref.assume_alignment` for each buffer the kernel
    takes from host code whose first byte is known to be at a multiple of
    more than its element's size. What is known: the runtime gives an entry
    (a public function) and each allocation buffers at multiples of
    `kDeviceBufferAlignment` bytes (weft/runtime/Contract.h; the CUDA
    runtime's come from `cuMemAlloc`, at 256), a function's argument is as
    aligned as every call's operand in the module (an entry's also as the
    runtime's buffers), and a static view or a kernel's view moves the
    first byte by its offset. The emulation checks each stated alignment
    (`weft-gpu-emulate-launches`).

    ```mlir
    %arena = gpu.alloc () : memref<4096xi8>
    %x = memref.view %arena[%c1024][] : memref<4096xi8> to memref<256xf32>
    gpu.launch ... {
      %v = memref.load %x[%i] : memref<256xf32>
    }
    // becomes
    gpu.launch ... {
      %x64 = memref.assume_alignment %x, 64 : memref<256xf32>
      %v = memref.load %x64[%i] : memref<256xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def WeftGpuKernelReport : Pass<"weft-gpu-kernel-report", "::mlir::ModuleOp"> {
  let summary = "Count what each kernel and library call of the host code does";
  let description = [{
    Once the step's work is kernels and library calls in host code (after
    `weft-gpu-device-memory`), this pass records, for each `gpu.launch` and
    each GEMM the target hands cuBLAS, what a roofline needs: the grid and
    block, the floating-point operations, the distinct bytes read and
    written (a GPU's caches keep repeated reads of one element off HBM), and
    how often it runs per call of the entry function (the calls of the
    function holding it and the host loops around it). The launches are
    listed in the order they first run, each stamped with its place
    (`weft.launch_id`), under the module's `weft.kernel_report`, which also
    lists every buffer host code allocates or views. The compiler prices the
    list on a named GPU (`weftc --report=kernels`); the emulation counts the
    bytes each launch really touches, by the same ids.

    Executions are counted exactly for the launch's first and last blocks,
    thread by thread (guards and thread-strided loops evaluated), and the
    middle blocks are taken to do what the first does. The bytes of one
    buffer are its accesses' executions times the element's size, at most
    the buffer's size. A launch whose indices come from memory (a gather,
    a scatter) or whose loop bounds cannot be evaluated is marked inexact:
    its bytes are an upper bound.

    ```mlir
    gpu.launch blocks(...) in (%gx = %c4, ...) threads(...) in (%sx = %c256, ...) {
      ... memref.load %x[%i] : memref<1024xf32> ...
    }
    // is listed as
    {block = [256, 1, 1], bytes_read = 4096, grid = [4, 1, 1], kind = "kernel", ...}
    ```
  }];
}

def WeftGpuMarkLaunches : Pass<"weft-gpu-mark-launches", "::mlir::ModuleOp"> {
  let summary = "Tell the runtime where each numbered launch starts";
  let description = [{
    Before each launch and library call the kernel report numbered
    (`weft.launch_id`), calls the runtime's `callee(id)`: with
    `$WEFT_PROFILE_LAUNCHES` set, the CUDA runtime times the kernel or
    library call that follows on the GPU and writes each run's seconds under
    its id, which `utils/compare_profile.py` puts beside the report's
    prediction. Without it the call only stores the id. The calls are host
    calls with effects, so `gpu-async-region` waits for the GPU before each:
    the CUDA pipeline adds this pass only for `weftc --profile-launches`.

    ```mlir
    gpu.launch blocks(...) ... {...} {weft.launch_id = 3 : i64}
    // becomes
    call @weft_cuda_launch(%c3_i64) : (i64) -> ()
    gpu.launch blocks(...) ... {...} {weft.launch_id = 3 : i64}
    ```
  }];
  let options = [
    Option<"callee", "callee", "std::string",
           /*default=*/"::weft::runtime::kCudaLaunchMark",
           "The runtime's function that takes a launch's id">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::arith::ArithDialect"];
}

def WeftGpuKernelNames : Pass<"weft-gpu-kernel-names", "::mlir::ModuleOp"> {
  let summary = "Give kernels names PTX accepts";
  let description = [{
    `gpu-kernel-outlining` names a kernel after its function, and Weft's
    functions are named after the model's layers (`main__h.0`). PTX
    identifiers take letters, digits, `_` and `$` only: every other
    character of a `gpu.module` or kernel name becomes `_` (a number is
    added where that makes two names equal), and the launches follow.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def WeftGpuEmulateLaunches : Pass<"weft-gpu-emulate-launches", "::mlir::ModuleOp"> {
  let summary = "Test tool: run the CUDA target's kernels on the CPU, accesses checked";
  let description = [{
    The CPU emulation of the CUDA target (`weftc --target=cuda-emulation`),
    a test tool: what it runs is the kernels `weft-gpu-launch-loops` and
    `weft-gpu-device-memory` made, before outlining, so that their launch
    mapping (grid, guards, index recovery) and their memory traffic are
    checked against the CPU backend without a GPU. Each `gpu.launch`
    becomes loops over its blocks and, inside, its threads, one at a time;
    `gpu.alloc`, `gpu.dealloc` and `gpu.memcpy` become host memory
    operations (the runtime records the allocations as the device's).

    With `check-accesses` (the default), each load and store of device
    memory in a kernel first calls the runtime's
    `weft_emulation_check_access(base, address, bytes, is_write, kernel)`,
    which ends the run with one line naming the kernel when the address
    lies outside the allocation the buffer starts in, or when the buffer is
    in no device allocation (a host pointer, which a GPU cannot read). A
    kernel's own stack buffers are not checked; an op that touches device
    memory other than by a load, a store or an atomic is refused.

    A launch or GEMM the kernel report numbered (`weft.launch_id`,
    `weft-gpu-kernel-report`) first calls `weft_emulation_launch(id)`: with
    `$WEFT_EMULATION_COUNTS` set, the runtime counts the distinct bytes
    each run of it reads and writes, which the report's counts are tested
    against.

    A kernel that synchronizes its threads (`gpu.barrier`, shuffles,
    reductions across threads) cannot run one thread at a time and is
    refused at the op. Results that pass here are never GPU results.

    ```mlir
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, ...) threads(%tx, %ty, %tz) in (%sx = %c256, ...) {
      memref.store %v, %buf[%i] : memref<8xf32>
    }
    // becomes
    scf.for %bz = %c0 to %c1 step %c1 { ... scf.for %tx = %c0 to %c256 step %c1 {
      func.call @weft_emulation_check_access(%base, %address, %c4, %c1, %name)
      memref.store %v, %buf[%i] : memref<8xf32>
    } }
    ```
  }];
  let options = [
    Option<"checkAccesses", "check-accesses", "bool", /*default=*/"true",
           "Check every device memory access of a kernel at run time">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect"
  ];
}

def WeftAttentionToLibrary
    : Pass<"weft-attention-to-library", "::mlir::ModuleOp"> {
  let summary = "Run each bf16 attention and its backward as a fused kernel";
  let description = [{
    Marks every bf16 `weft.attention` and `weft.attention_grad` with
    `weft.library_call`, the runtime function it then bufferizes into:
    `<callee>_forward_bf16` and `<callee>_backward_bf16`, declared here with
    the signatures of weft/runtime/Contract.h (cuDNN's fused SDPA on a GPU,
    a CPU reference under the emulation). No `[B, H, S, T]` tensor is made.
    The backward reads the forward's log-sum-exp: the forward of the
    attention it differentiates gets `save_log_sum_exp`, or, where that
    forward is not in the same function, one is computed beside it. An i1
    mask becomes an additive one (0 or -inf), the form the kernels read.
    Other element types keep the decomposition: cuDNN's fused attention
    takes no f32.

    ```mlir
    %o = weft.attention %q, %k, %v <{causal}> : ... (bf16)
    %dq, %dk, %dv = weft.attention_grad %q, %k, %v, %o, %do <{causal}> : ...
    // becomes
    %o, %lse = weft.attention %q, %k, %v <{causal, save_log_sum_exp}>
        {weft.library_call = @weft_cuda_attention_forward_bf16} : ...
    %dq, %dk, %dv = weft.attention_grad %q, %k, %v, %o, %do
        log_sum_exp(%lse : tensor<...xf32>) <{causal}>
        {weft.library_call = @weft_cuda_attention_backward_bf16} : ...
    ```
  }];
  let options = [
    Option<"callee", "callee", "std::string",
           /*default=*/"::weft::runtime::kCudaAttention",
           "The runtime functions' prefix (weft_cuda_attention, "
           "weft_emulated_attention)">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // WEFT_TARGET_GPU_PASSES_TD
