//===- Passes.td - Weft transformation passes --------------*- tablegen -*-===//

#ifndef WEFT_DIALECT_WEFT_TRANSFORMS_PASSES_TD
#define WEFT_DIALECT_WEFT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def WeftFuseLayerNorm : Pass<"weft-fuse-layer-norm"> {
  let summary = "Replace decomposed layer normalization by weft.layer_norm";
  let description = [{
    Recognizes the forms exporters emit for layer normalization over the last
    dimension and replaces each by one `weft.layer_norm`:
    - PyTorch: `d = x - mean(x)`, `d / sqrt(mean(d^2) + eps)`, then optional
      `* gamma` and `+ beta` (the square as `pow(d, 2)` or `d * d`; the
      division also as `d * rsqrt(...)` or `d * reciprocal(sqrt(...))`);
    - TensorFlow/Keras: `m = gamma * reciprocal(sqrt(var + eps))`,
      `x * m + (beta - mean * m)`.
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftFuseRmsNorm : Pass<"weft-fuse-rms-norm"> {
  let summary = "Replace decomposed RMS normalization by weft.rms_norm";
  let description = [{
    Recognizes `x * rsqrt(mean(x^2) + eps) * w` (and its forms with
    `sqrt`+`div` or `reciprocal`) over the last dimension, as Llama-style
    exports write RMSNorm.
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftFuseGelu : Pass<"weft-fuse-gelu"> {
  let summary = "Replace decomposed GELU by weft.gelu";
  let description = [{
    Recognizes `0.5 * x * (1 + erf(x / sqrt(2)))` and
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))` with the
    factors in any order and association, and constants within a relative
    1e-4 of their exact values.
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftFuseAttention : Pass<"weft-fuse-attention"> {
  let summary = "Replace matmul-scale-mask-softmax-matmul by weft.attention";
  let description = [{
    Recognizes `softmax(q * k^T * scale (+ mask)) * v` over 3-D or 4-D
    operands, in the forms exporters emit: the scale as a multiply or divide
    of the scores, of `q`, or of both `q` and `k`; one boolean keep-mask
    applied with `where(mask, scores, fill)` with `fill <= -1e4` (negated
    when the operands are swapped); any number of additive masks (a padding
    or causal mask, ALiBi's per-head bias), summed into one mask operand,
    each multiplied by the scale applied after it; a clamp
    `max(scores, c)` with `c <= -1e30` (OPT), which changes no softmax;
    views between 3-D `[B*H, S, T]` and 4-D `[B, H, S, T]` scores anywhere
    on the way, the softmax included (BART, GPT-NeoX's `baddbmm`, Bloom),
    with 3-D operands viewed per head. Keys and values may hold one head
    that every query head reads (multi-query attention). A constant boolean
    mask equal to the causal pattern becomes the `causal` flag. The
    multiplicative form `s * m - c * (1 - m)` is left alone: it equals a
    masked softmax only when `m` is 0/1, which is not known for a graph
    input; so are two keep-masks, or a non-causal keep-mask beside an
    additive one (one mask operand holds either kind, not both).
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftSinkReshapes : Pass<"weft-sink-reshapes"> {
  let summary = "Keep dims a reshape merges apart until they must merge";
  let description = [{
    A sharding rule gives each dim one factor, so a reshape that merges a
    split dim with its neighbour (PyTorch's `nn.MultiheadAttention` views
    `[tgt, batch, heads * hd]` as `[tgt, batch * heads, hd]`) loses the
    split. This pass cuts a reshape that both splits and merges dims into
    an expand and a merge, and moves merges down through `weft.transpose`,
    unit-dim changes, `weft.attention` (whose batch and head dims are both
    independent) and `weft.linear` (which maps the last dim alone) until
    they fold into the next reshape:

    ```mlir
    %r = weft.reshape %x : tensor<5x2x32xf32> -> tensor<5x8x8xf32>
    %t = weft.transpose %r <{permutation = array<i64: 1, 0, 2>}>
        : tensor<5x8x8xf32>
    // becomes
    %e = weft.reshape %x : tensor<5x2x32xf32> -> tensor<5x2x4x8xf32>
    %u = weft.transpose %e <{permutation = array<i64: 1, 2, 0, 3>}>
        : tensor<5x2x4x8xf32>
    %t = weft.reshape %u : tensor<2x4x5x8xf32> -> tensor<8x5x8xf32>
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

def WeftAutodiff : Pass<"weft-autodiff", "::mlir::ModuleOp"> {
  let summary = "Derive the gradient function of a scalar loss (reverse mode)";
  let description = [{
    For `function` (whose first result is a scalar float loss) adds
    `<function>_grad`, with the same arguments, returning the original
    results followed by the gradient of the loss with respect to every
    `weft.param` argument (named `grad:<param>` in `weft.outputs`). The
    forward ops are replayed, then each op's vector-Jacobian product is
    applied in reverse order and the adjoints reaching a value are summed.
    Every rule is made of weft ops. An op without a rule is an error at
    that op.

    ```
    weft-opt --weft-autodiff="function=loss" model.mlir
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"main\"",
           "The function to differentiate">
  ];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftDeriveTrainStep : Pass<"weft-derive-train-step", "::mlir::ModuleOp"> {
  let summary = "Derive a training step (loss, gradients, update) from main";
  let description = [{
    From `main` (token ids and parameters to logits [..., vocab]) adds

    ```
    train_step(main's arguments, labels, lr, [bias1, bias2], state...)
        -> (loss, grad_norm, new parameters..., new state...)
    ```

    - The loss is the mean cross-entropy of the logits against `labels`
      (int64, the shape of the logits without the vocab dim). Positions
      labelled `ignore-index` do not count.
    - Its gradient comes from `weft-autodiff`.
    - Every gradient is scaled by min(1, clip-norm / (norm + 1e-6)) when
      `clip-norm` > 0, with the norm taken over all gradients.
    - The optimizer updates the parameters:
      - `adamw`: decoupled weight decay, with `bias1 = 1 - beta1^t` and
        `bias2 = 1 - beta2^t` as inputs. The state is the moments
        `m:<param>` and `v:<param>`.
      - `sgd`: momentum, with weight decay added to the gradient. The state
        is `momentum:<param>`.

    The token ids are the input named `token-input`, or by default the only
    integer input of `main` (exporters call it `input_ids`, `idx`,
    `tokens`...); the runtime's trainer feeds its batches there.

    Which parameters train: every float `weft.param` of `main` except those
    marked `weft.frozen` (the importer freezes constants too large to
    inline) and those `freeze` names; with `train-only`, only those it
    names. Both take glob patterns on the parameters' names (`*` any
    string, `?` one character, `[..]` a class); a pattern that names no
    parameter is an error. A frozen parameter gets `weft.frozen`, no
    gradient, no optimizer state and no weight decay, and keeps its value.

    Weight decay applies to parameters of rank 2 and more. The learning rate
    `lr` is an input: the schedule belongs to the runtime. State arguments
    carry `weft.state`; results are named `param:<name>` and
    `state:<kind>:<name>` in `weft.outputs`, so that a runner feeds them
    back. `train_loss_grad` (the loss and the parameter gradients, from
    `weft-autodiff`) stays in the module beside `train_step`.

    With `micro-batches` K > 1 the step accumulates gradients: each input
    of `main` and `labels` gains a leading dim of K (batch dim 1, marked
    `weft.batch_dim`), the loss and gradient are computed for each
    micro-batch in turn, and their means feed one update. The step is then
    a template, marked as with `mark-phases` and `weft.microbatches = K`:
    it computes micro-batches 0 and 1 only, the second's loss and
    gradients added to the first's, and `weft-outline-microbatches` must
    follow, which calls one function per phase K times. A partitioned
    template keeps the gradients partial sums until the update, so data
    parallelism reduces them once per step.

    A scalar result of `main` named `aux_loss` (in `weft.outputs`; a
    mixture of experts' load-balancing loss, weighted by the model) is
    added to the cross-entropy.

    With `compute-type=bf16`, every f32 linear and matmul of `main` runs on
    bf16 operands (cast on the way in, the result cast back to f32; the
    lowering accumulates in f32), as PyTorch's autocast does; norms,
    softmax, attention and the loss stay f32. The parameters, their
    gradients (the adjoint of the cast) and the optimizer state stay f32:
    the parameters are the master weights. bf16 has f32's exponent range,
    so the loss needs no scaling.

    With `mark-phases` every op the step is built from carries
    `weft.microbatch` (the micro-batch whose loss and gradient it computes)
    and `weft.phase`: "forward", "backward" (the adjoint ops of
    `weft-autodiff`) or "update" (the gradient norm and the optimizer).
    `weft-outline-microbatches` makes functions of them.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "adamw or sgd">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.95", "Adam beta2">,
    Option<"epsilon", "epsilon", "double", /*default=*/"1e-8", "Adam epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.1",
           "Weight decay (decoupled for AdamW)">,
    Option<"momentum", "momentum", "double", /*default=*/"0.9",
           "SGD momentum">,
    Option<"clipNorm", "clip-norm", "double", /*default=*/"1.0",
           "Clip the global gradient norm to this (0: no clipping)">,
    Option<"tokenInput", "token-input", "std::string", /*default=*/"\"\"",
           "The input of 'main' holding the token ids (default: its only "
           "integer input)">,
    Option<"ignoreIndex", "ignore-index", "int64_t", /*default=*/"-100",
           "Label of positions that do not count">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "Accumulate gradients over this many micro-batches per step">,
    Option<"computeType", "compute-type", "std::string", /*default=*/"\"f32\"",
           "Element type of the contractions: f32, or bf16 (mixed precision)">,
    Option<"attentionInComputeType", "attention-in-compute-type", "bool",
           /*default=*/"false",
           "Attention computes in compute-type too, each fused backward "
           "reading its forward's log-sum-exp (for a target whose fused "
           "kernels keep the scores in f32 on chip)">,
    Option<"markPhases", "mark-phases", "bool", /*default=*/"false",
           "Mark each op with its micro-batch and phase (for pipelining)">,
    ListOption<"freeze", "freeze", "std::string",
               "Glob patterns of parameter names that do not train">,
    ListOption<"trainOnly", "train-only", "std::string",
               "Glob patterns of the only parameter names that train">,
    Option<"fusedAttentionBackward", "fused-attention-backward", "bool",
           /*default=*/"false",
           "Differentiate each attention whose mask needs no gradient into "
           "one weft.attention_grad (context parallelism partitions it; the "
           "CUDA target runs it as a fused kernel)">
  ];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftSinkWideningCasts : Pass<"weft-sink-widening-casts"> {
  let summary = "Move data movement to the narrow side of a precision cast";
  let description = [{
    At `--precision bf16` each contraction's result is widened back to f32
    and the next contraction's operand narrowed again, with the attention's
    head views (split, reshape, transpose) and their adjoints (concat) in
    between: the data moves in f32, twice the bytes, through copies that
    each round to bf16 at the end anyway. A widening cast (bf16 or f16 to
    f32, any float to f64: exact) read only by data movement moves below
    it, and a narrowing cast of a widened value back to its own type
    disappears, so the head views move bf16 from contraction to
    contraction and no f32 copy of them exists. A widened value several
    ops read gets a cast of its own in each reader that can widen as it
    reads (elementwise work, reductions, data movement), so that the f32
    copy is not stored (the MLP's pre-activation, read by GELU and by its
    gradient), a norm's gradient reads the narrow value itself (its row
    kernel widens as it reads), and a reader that cannot widen keeps the
    original.

    ```mlir
    %w = weft.cast %y : tensor<2x16x192xbf16> to tensor<2x16x192xf32>
    %s:3 = weft.split %w <{axis = 2 : i64, sizes = array<i64: 64, 64, 64>}> : tensor<2x16x192xf32>
    %q = weft.cast %s#0 : tensor<2x16x64xf32> to tensor<2x16x64xbf16>
    // becomes
    %s:3 = weft.split %y <{axis = 2 : i64, sizes = array<i64: 64, 64, 64>}> : tensor<2x16x192xbf16>
    // and %q is %s#0
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

//===----------------------------------------------------------------------===//
// SPMD partitioning
//===----------------------------------------------------------------------===//

def WeftShardPresets : Pass<"weft-shard-presets", "::mlir::ModuleOp"> {
  let summary = "Create the device mesh and annotate a parallelism strategy";
  let description = [{
    Creates the `shard.grid` (named axes in `weft.axis_names`) and inserts
    `shard.shard` annotations, marked `weft.priority`, for the chosen
    strategies; annotations the user wrote (no `weft.priority`) are kept and
    win over presets in `weft-propagate-sharding`.
    - `dp`: the first model input is split on its batch dim (dim 0) over
      `dp`; propagation splits the other inputs where they meet it.
    - `megatron`: Megatron-LM tensor parallelism over `tp`. A linear whose
      result reaches another linear only through head-local ops
      (elementwise, reshape, transpose, split, attention, slice, concat) is
      split by columns and that other linear by rows. A fused projection
      whose result is split into equal parts (Q, K, V) is split part by
      part. The embedding table (gathered on axis 0) is split by rows
      (vocab-parallel), and a linear that feeds a model output (the LM
      head) by columns.
    - `cp`: context parallelism over `cp`: the first model input is split
      on its sequence dim (the dim after the batch); propagation carries
      the split through every token-local op and through attention's
      sequence. The grid records the axis (`weft.context_axis`) and
      `context-attention`, which `weft-partition` reads: `ring` keeps the
      sequence split inside attention and passes key/value chunks around
      the axis (online softmax), each rank holding a head and a tail chunk
      of the sequence (chunks r and 2n-1-r of 2n) so that a causal mask
      leaves every rank the same work; `ring-contiguous` gives each rank
      one chunk and computes every block; `all-to-all` (DeepSpeed-Ulysses)
      moves the split from the sequence to the heads around each attention.
    - `ep`: expert parallelism over `ep`: the experts' stacked weights
      (3-D parameters [experts, ...] read by a batched matmul) are split
      on their first dim, and the first model input on its batch dim, as
      `dp` does; the partitioner moves the dispatched tokens between the
      two splits by all-to-alls (GShard).
    - `sequence-parallel`: the inputs and results of layer and RMS norms
      are split on the sequence dim (the second-to-last) over `tp`, at a
      lower priority than the weight annotations.
    - `zero=1|2|3` (a training step, over `dp`): the optimizer state
      (`weft.state` arguments) is split over `dp` on a dim the other
      strategies leave whole; with 3 the parameters are too. A step's new
      parameters and state are split like their arguments, so the
      partitioner reduce-scatters the gradients into the split update and
      all-gathers the updated parameters (stage 1/2) or the parameters
      before their use (stage 3). Stages 1 and 2 give the same program:
      the step never holds a whole gradient.

    ```
    weft-opt --weft-shard-presets="mesh=dp=2,tp=2 parallel=dp,megatron"
    ```
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "Mesh axes, e.g. 'dp=2,tp=2' (needed unless the module has one)">,
    ListOption<"parallel", "parallel", "std::string",
               "Strategies: dp, megatron, cp, ep">,
    Option<"sequenceParallel", "sequence-parallel", "bool",
           /*default=*/"false",
           "Split norm regions on the sequence dim over tp">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "ZeRO stage over dp: 1 and 2 split the optimizer state (the "
           "gradients then arrive reduce-scattered), 3 also the parameters">,
    Option<"contextAttention", "context-attention", "std::string",
           /*default=*/"\"ring\"",
           "How attention runs over cp: ring, ring-contiguous or all-to-all">
  ];
  let dependentDialects = ["::weft::WeftDialect", "::mlir::shard::ShardDialect"];
}

def WeftPropagateSharding : Pass<"weft-propagate-sharding", "::mlir::ModuleOp"> {
  let summary = "Propagate shardings through weft ops to a fixpoint";
  let description = [{
    Starts from the `shard.shard` annotations (a user's, priority 0, over
    presets, `weft.priority` 1 and 2) and spreads them through the sharding
    rule of every op (`getShardingRule`: Shardy-style factors) until nothing
    changes, in rounds of increasing priority: a dim set from a stronger
    annotation is never overridden by a weaker one. A dim that would be
    split but does not divide by the mesh axes is an error naming the op,
    the tensor, the dim and the axis. Every split value is then annotated
    with a `shard.shard` right after its definition (arguments: at the top
    of the function), and the input annotations are removed.

    With `pad-uneven`, a dim split over one mesh axis need not divide: each
    rank holds ceil(size / parts) elements and the last shards end in
    padding (zeros in weights and inputs), which `weft-partition` drops
    wherever the dim becomes whole again. A padded split may not pass
    through an op that maps it to dims of another size (a reshape that
    merges or splits it).
  }];
  let options = [
    Option<"padUneven", "pad-uneven", "bool", /*default=*/"false",
           "Pad a dim that does not divide by its mesh axis">
  ];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def WeftPartition : Pass<"weft-partition", "::mlir::ModuleOp"> {
  let summary = "Rewrite annotated weft IR into per-rank code with collectives";
  let description = [{
    Rewrites each function to what one rank computes: every op on its local
    shapes, following the annotations of `weft-propagate-sharding`. Where a
    value's sharding must change for its user, it inserts the one
    collective that does it: `shard.all_reduce` (a partial sum to
    replicated), `shard.reduce_scatter` (a partial sum to split),
    `shard.all_gather` (split to replicated), `shard.all_to_all` (split on
    another dim) or `shard.all_slice` (replicated to split, no
    communication). A contraction over a split dim leaves a partial sum that
    is reduced only where a user needs it whole, so a Megatron block has one
    all-reduce. Arguments and results carry `weft.sharding` so that the
    runtime can split inputs and weights and assemble outputs.

    An attention whose sequence is split over the grid's context axis runs
    as a ring of `shard.shift`s (or, under `all-to-all`, with its heads
    split instead). Under `ring` a dim split over that axis holds a head
    and a tail chunk per rank (chunks r and 2n-1-r of 2n): the collectives
    over the axis reorder the chunks around them (slices and a concat), so
    that a gathered sequence is in order.
  }];
  let dependentDialects = [
    "::weft::WeftDialect", "::mlir::shard::ShardDialect",
    "::mlir::arith::ArithDialect", "::mlir::tensor::TensorDialect"
  ];
}

def WeftSplitStages : Pass<"weft-split-stages", "::mlir::ModuleOp"> {
  let summary = "Assign the ops of each function to pipeline stages by layer";
  let description = [{
    Cuts the model at transformer-layer boundaries into `stages` pipeline
    stages and marks every op with `weft.stage`. A layer is what an op's
    location names up to its first number ("/h.3/attn/MatMul" is in
    "/h.3"); layers are numbered in the order the forward pass meets them.
    `boundaries` gives the first layer of stages 1.. by hand; without it
    the cut balances the stages' contraction FLOPs (forward and backward).
    An op outside layers takes the latest stage among its operands'
    producers (the head and loss follow the last layer); one that reads
    only arguments and such ops (the embedding lookup, the labels' mask)
    takes the earliest stage among its users. An optimizer update (what a
    state feeds) joins the stage of its parameter's first use, and so does
    what feeds only updates (weight decay, the clipped gradient). A parameter read in two stages
    (GPT's tied embedding and LM head) is listed as tied: its gradient is
    the sum of both stages' parts. The function gets
    `weft.pipeline = {stages, boundaries, tied}`.

    Example: with stages=2 and boundaries=[1], the ops of "/h.0" are in
    stage 0 and those of "/h.1" in stage 1.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"1",
           "Pipeline stages">,
    ListOption<"boundaries", "boundaries", "int64_t",
               "First layer of each stage after the first">
  ];
}

def WeftOutlineMicrobatches
    : Pass<"weft-outline-microbatches", "::mlir::ModuleOp"> {
  let summary = "Make one function of each stage and phase of a training "
                "step and call it once per micro-batch";
  let description = [{
    Input: `function` (default `main`), a training step template from
    `weft-derive-train-step` (`weft.microbatches = K`, every op marked with
    its micro-batch and phase), possibly partitioned and split into stages
    by `weft-split-stages` (without `weft.stage` everything is stage 0).

    The ops of the template's last micro-batch become one private function
    per stage and phase, `<function>_stage<s>_forward` and
    `<function>_stage<s>_backward`: a forward takes what its ops read (the
    micro-batch's inputs, parameters, the previous stage's activation) and
    returns what other functions and the update read (the next stage's
    activation, the stash its backward reads); a backward also takes each
    running sum of the loss and the gradients and returns it with this
    micro-batch's part added. The step becomes an `scf.for` over the K
    micro-batches whose iteration slices the inputs at its index and calls
    the functions, each call marked with its stage and phase
    (`weft-pipeline-cut` reorders them by a schedule). The loop carries the
    sums, each from zeros in a buffer of its own, and a backward's result
    is written over the sum it read (`bufferization.materialize_in_destination`),
    so the loop keeps its buffers; the update reads the loop's results. So
    the step's size, and the compile time, do not depend on K.

    `recompute` trades compute for the stash: `full` recomputes a stage's
    forward in its backward, which then keeps only the forward's inputs;
    `selective` recomputes the elementwise ops and views (not contractions,
    reductions, normalizations, attention, lookups or collectives).

    Example: with K = 4 and two stages, `train_step` loops four times over
    calls of `train_step_stage0_forward`, `train_step_stage1_forward`,
    `train_step_stage1_backward` and `train_step_stage0_backward`, then
    updates the parameters.
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"main\"",
           "The training step to outline">,
    Option<"recompute", "recompute", "std::string", /*default=*/"\"none\"",
           "none, selective or full">,
    Option<"splitBackward", "split-backward", "bool", /*default=*/"false",
           "Split each backward into its input-gradient part and its "
           "weight-gradient part (zero-bubble schedules)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def WeftOutlineLayers : Pass<"weft-outline-layers", "::mlir::ModuleOp"> {
  let summary = "Make each run of one layer's ops a call, one function per "
                "distinct layer";
  let description = [{
    In every function, each run of at least `min-ops` consecutive ops of
    one layer (what their locations name up to the first number: "/h.3")
    becomes a call of a private function that takes what the run reads
    from before it and returns what the rest of the function reads from
    it; constants are copied in. Runs that compute the same thing (the
    same ops, types and constants; locations and discardable attributes
    aside) call the same function, named after the first: the twelve
    forward layers of GPT-2 become twelve calls of `main_/h.0`'s function,
    so the backends compile one layer, not twelve. Calls and ops with
    regions end a run.

    A fused attention's head-major tensors stay inside a run: where its
    query, key or value (views of a projection: split, reshape, transpose)
    or its result (viewed as merged heads by a transpose and a reshape) is
    used by later ops of the same layer (its backward), those ops use the
    same views rebuilt from the projection, or the inverse views of the
    merged heads, and the run returns the projection and the merged heads
    instead, provided it returns no more elements than before. Both sides'
    attention then reads and writes views (weft-fold-transposes), not
    copies in head-major order.

    Example: a two-layer model's `main` calls `main__h.0` twice, with each
    layer's weights.
  }];
  let options = [
    Option<"minOps", "min-ops", "int64_t", /*default=*/"8",
           "The fewest ops a run needs to be outlined">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def WeftPipelineCut : Pass<"weft-pipeline-cut", "::mlir::ModuleOp"> {
  let summary = "Keep one pipeline rank's part of a training step, with "
                "send/recv between ranks";
  let description = [{
    Input: `function` (default `main`), a training step outlined by
    `weft-outline-microbatches` (a loop over the micro-batches calling each
    stage's forward and backward, then the update), split by
    `weft-split-stages` into p·v stages, in a module whose mesh has a `pp`
    axis of size p (it may be partitioned over the other axes already).
    Stage s runs on pp rank s mod p as its chunk s / p.

    For pp rank `rank` the step's loop becomes a loop over the rank's
    instruction list (`schedule`, `microbatches`, `virtual-stages`; see
    PipelineSchedule.h), kept as two constant tables (the case and the
    micro-batch of each instruction): an `scf.index_switch` runs the call
    of the instruction's chunk and phase (`weft.case_runs` counts each
    case's instructions). A call's result read by a call of another rank is
    sent right after it (`shard.send` on the `pp` axis) and received by the
    reader that runs first there (`shard.recv`); one read by a later
    instruction of the same rank waits in a stash with one slot per
    micro-batch in flight (micro-batch k in slot k mod slots; the slots are
    counted from the schedule). Each message has one tag (`weft.tag`), the
    same for every micro-batch: every chunk runs its micro-batches in
    order, so a tag's messages meet in order; scalars travel as [1]. The
    update follows the loop, each op on its stage's rank, with a send after
    each value another rank reads and a receive before its first use there.
    Sources (constants, the parameters' views, ZeRO-3 gathers) run on every
    rank that needs them, the input slices inside the cases that read them.
    Before rewriting, the pass runs every rank's messages (sends buffered,
    receives blocking) and fails, naming the value and micro-batch, if one
    would wait forever. The program's size does not depend on the
    micro-batch count.

    The rank returns its parameters' new values (a parameter read on two
    ranks, a tied embedding, is returned by both), the optimizer state it
    updates, the loss and the gradient norm; it keeps the parameters and
    state it reads and every training input. While the runtime traces
    (`weft_tracing()`), a call to `weft_pipeline_mark(kind, chunk,
    microbatch)` starts each instruction (kind 0 forward, 1 backward, 2
    optimizer).

    Example: with p = 2 and m = 2 under 1f1b, rank 0 walks the table
    F0 F1 B0 B1, sends its last layer's output of each micro-batch to rank
    1 and receives the gradient back, holding two micro-batches' stash.
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"main\"",
           "The training step to cut">,
    Option<"rank", "rank", "int64_t", /*default=*/"0",
           "The pp coordinate to keep">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b, interleaved or zb-h1">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Micro-batches per step">,
    Option<"virtualStages", "virtual-stages", "int64_t", /*default=*/"1",
           "Model chunks per rank (interleaved)">
  ];
  let dependentDialects = [
    "::mlir::shard::ShardDialect", "::mlir::arith::ArithDialect",
    "::mlir::tensor::TensorDialect", "::mlir::func::FuncDialect",
    "::mlir::scf::SCFDialect", "::mlir::bufferization::BufferizationDialect"
  ];
}

def WeftMergeReductions : Pass<"weft-merge-reductions", "::mlir::ModuleOp"> {
  let summary = "Reduce a sum of all-reduced partial sums once";
  let description = [{
    A parallel residual (GPT-J, GPT-NeoX, Phi, Falcon: `x + attn(ln(x)) +
    mlp(ln(x))`) adds two row-split outputs, each all-reduced by
    `weft-partition`. The sum of two sums over the same grid axes is one
    sum: in a tree of adds, the pass adds the partial sums first and
    all-reduces once, adding the terms that are not reduced (the residual,
    a row-split linear's bias) after the single reduction. Each all-reduce
    must have no other reader.

    ```mlir
    %a = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %b = shard.all_reduce %y on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %c = weft.add %b, %bias : tensor<4xf32>, tensor<4xf32>
    %s = weft.add %a, %c : tensor<4xf32>, tensor<4xf32>
    ```

    becomes `weft.add(shard.all_reduce(weft.add(%x, %y)), %bias)`.
  }];
  let dependentDialects = ["::weft::WeftDialect", "::mlir::shard::ShardDialect"];
}

def WeftLocalReplicas : Pass<"weft-local-replicas", "::mlir::ModuleOp"> {
  let summary = "Let data-parallel replicas step on their own batches";
  let description = [{
    Local SGD (`weftc --dp-sync every=K`): between the runtime's parameter
    averages every K steps, each replica of the `axis` mesh axis trains on
    its own shard of the batch alone. Every `shard.all_reduce` over the axis
    is rewritten as if all replicas held this one's data: the axis leaves
    the collective's grid axes (the collective goes when none is left), and
    a sum is multiplied by the axis size. A loss that divides an
    all-reduced sum by an all-reduced count becomes the replica's own mean,
    and the gradients its own. Any other collective over the axis (ZeRO's
    reduce-scatters and gathers) is an error: those replicas share state.

    Example: on a `dp=4` grid,

    ```mlir
    %g = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
    ```

    becomes `%g = weft.mul %x, %four` with `%four` a `weft.constant` of
    4.0.
  }];
  let options = [
    Option<"axis", "axis", "std::string", /*default=*/"\"dp\"",
           "The mesh axis whose replicas step alone">
  ];
  let dependentDialects = ["::weft::WeftDialect", "::mlir::shard::ShardDialect"];
}

def WeftBucketCollectives
    : Pass<"weft-bucket-collectives", "::mlir::ModuleOp"> {
  let summary = "Combine independent collectives into a few large ones";
  let description = [{
    Gathers `shard.all_reduce`, `shard.reduce_scatter` and `shard.all_gather`
    ops of one kind (same grid axes, reduction and element type) into
    buckets of at most `bucket-mb` MiB, as Megatron-LM and DeepSpeed bucket
    gradients: each bucket is one collective on the members flattened and
    concatenated, sliced back apart afterwards. A collective joins a bucket
    while nothing has read a member's result yet; the bucket's collective is
    issued just before the first such read, or as soon as the bucket is
    full. The gradient reductions of a data-parallel training step, which
    all feed the optimizer update at its end, become a few large messages
    instead of one per parameter.

    Example: two all-reduces whose results are only read afterwards

    ```mlir
    %a = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
    %b = shard.all_reduce %y on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
    ```

    become one all-reduce of a `tensor<40xf32>` concatenation of the two.
    A collective over a split dim other than 0 moves that dim to the front
    first, so that each rank's chunk of every member stays contiguous.
  }];
  let options = [
    Option<"bucketMb", "bucket-mb", "double", /*default=*/"25.0",
           "Largest bucket in MiB (0 turns bucketing off)">
  ];
  let dependentDialects = ["::weft::WeftDialect", "::mlir::shard::ShardDialect"];
}

#endif // WEFT_DIALECT_WEFT_TRANSFORMS_PASSES_TD
