//===- WeftBase.td - Weft dialect definition ---------------*- tablegen -*-===//
//
// The `weft` dialect: tensor-level ops of transformer models, normalized from
// what exporters emit, as the common input of autodiff, sharding and lowering.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_WEFTBASE_TD
#define WEFT_DIALECT_WEFT_IR_WEFTBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "weft/Dialect/Weft/IR/WeftInterfaces.td"

def Weft_Dialect : Dialect {
  let name = "weft";
  let cppNamespace = "::weft";
  let summary = "Tensor ops of transformer models for distributed training";
  let description = [{
    Ops operate on builtin ranked tensors of f16, bf16, f32, f64, i1, i32 and
    i64. Elementwise ops broadcast like numpy. Model weights are arguments of
    the entry function marked with the `weft.param` argument attribute, which
    holds the weight's name in the source model; graph inputs carry
    `weft.input` and the function carries `weft.outputs` naming its results.
    The weights themselves are never inlined: the module attribute
    `weft.weights` names the file they are read from.
  }];
  let hasConstantMaterializer = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Argument attribute naming a model weight (a StringAttr).
    static constexpr ::llvm::StringLiteral kParamAttrName = "weft.param";
    /// Unit argument attribute of a `weft.param` the training step does not
    /// update (no gradient, no optimizer state, no weight decay): a
    /// constant too large to inline, or a weight the user froze.
    static constexpr ::llvm::StringLiteral kFrozenAttrName = "weft.frozen";
    /// Argument attribute naming a graph input (a StringAttr).
    static constexpr ::llvm::StringLiteral kInputAttrName = "weft.input";
    /// Argument attribute of an input whose batch dim is not dim 0 (an
    /// IntegerAttr): the micro-batched inputs of a training step.
    static constexpr ::llvm::StringLiteral kBatchDimAttrName =
        "weft.batch_dim";
    /// Argument attribute of an integer input whose values index a table (a
    /// gather's indices): the size of the gathered dim (an IntegerAttr).
    /// The runner refuses values outside [-size, size).
    static constexpr ::llvm::StringLiteral kIndexBoundAttrName =
        "weft.index_bound";
    /// Argument attribute naming optimizer state ("m:<param>", a StringAttr).
    static constexpr ::llvm::StringLiteral kStateAttrName = "weft.state";
    /// Function attribute of a training step: its optimizer and what the
    /// trainer needs to feed it (a dictionary: name, beta1, beta2, vocab,
    /// flops, tokens: the name of the token input).
    static constexpr ::llvm::StringLiteral kOptimizerAttrName =
        "weft.optimizer";
    /// Function attribute naming the results (an ArrayAttr of StringAttr).
    static constexpr ::llvm::StringLiteral kOutputsAttrName = "weft.outputs";
    /// Module attribute: path of the file holding the weights.
    static constexpr ::llvm::StringLiteral kWeightsAttrName = "weft.weights";
    /// Module attribute: the CPU backend's memory plan (a dictionary).
    static constexpr ::llvm::StringLiteral kMemoryPlanAttrName =
        "weft.memory_plan";
    /// On a `shard.grid`: the names of its axes (an ArrayAttr of StringAttr).
    static constexpr ::llvm::StringLiteral kAxisNamesAttrName =
        "weft.axis_names";
    /// On a `shard.shard`: the priority of a preset annotation (0 is a
    /// user's, and the strongest).
    static constexpr ::llvm::StringLiteral kPriorityAttrName = "weft.priority";
    /// On a preset's `shard.shard`: the dims it keeps whole at its priority
    /// (DenseI64Array); a user's annotation pins every whole dim.
    static constexpr ::llvm::StringLiteral kPinnedDimsAttrName =
        "weft.pinned_dims";
    /// On an op: the pipeline stage it runs in (an IntegerAttr).
    static constexpr ::llvm::StringLiteral kStageAttrName = "weft.stage";
    /// On an op of a training step derived for pipelining: the micro-batch
    /// it belongs to (an IntegerAttr).
    static constexpr ::llvm::StringLiteral kMicrobatchAttrName =
        "weft.microbatch";
    /// On a training step whose ops are marked with their micro-batch and
    /// phase: the micro-batches of a step (an IntegerAttr). Until
    /// weft-outline-microbatches runs, the step holds at most two of them.
    static constexpr ::llvm::StringLiteral kMicrobatchesAttrName =
        "weft.microbatches";
    /// On an op of a training step derived for pipelining: "forward",
    /// "backward" or "update" (a StringAttr).
    static constexpr ::llvm::StringLiteral kPhaseAttrName = "weft.phase";
    /// On a `shard.send` or `shard.recv` of a pipeline: the message's tag,
    /// unique per value and pair of ranks (an IntegerAttr). A value of the
    /// micro-batch loop is sent once per micro-batch under one tag, and
    /// the messages of a tag meet in micro-batch order.
    static constexpr ::llvm::StringLiteral kTagAttrName = "weft.tag";
    /// On the `scf.index_switch` of a pipeline rank's schedule loop: how
    /// many times each case runs per step (a DenseI64ArrayAttr).
    static constexpr ::llvm::StringLiteral kCaseRunsAttrName =
        "weft.case_runs";
    /// On a function split into pipeline stages: {stages, boundaries,
    /// tied} (a dictionary).
    static constexpr ::llvm::StringLiteral kPipelineAttrName = "weft.pipeline";
    /// On a `shard.grid`: the context-parallel axis (a StringAttr naming
    /// it) and how attention runs over it: "ring" (the sequence in
    /// head/tail chunk pairs, balancing a causal mask's work),
    /// "ring-contiguous" (one chunk per rank) or "all-to-all".
    static constexpr ::llvm::StringLiteral kContextAxisAttrName =
        "weft.context_axis";
    static constexpr ::llvm::StringLiteral kContextAttentionAttrName =
        "weft.context_attention";
    /// On a `weft.attention` (a UnitAttr): differentiate it into one
    /// `weft.attention_grad` instead of its decomposed adjoint.
    static constexpr ::llvm::StringLiteral kFusedBackwardAttrName =
        "weft.fused_backward";
    /// On a `shard.sharding`: interleaved blocks per dim (DenseI64Array).
    static constexpr ::llvm::StringLiteral kBlocksAttrName = "weft.blocks";
    /// Argument and result attribute after partitioning: how the global
    /// tensor is split, e.g. "[dp], [], [tp]" (a StringAttr).
    static constexpr ::llvm::StringLiteral kShardingAttrName = "weft.sharding";
    /// With `weft.sharding` where an uneven split pads the tensor: its
    /// global shape (a DenseI64ArrayAttr).
    static constexpr ::llvm::StringLiteral kGlobalShapeAttrName =
        "weft.global_shape";
  }];
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Weft_FloatElement : AnyTypeOf<[F16, BF16, F32, F64]>;
def Weft_IndexElement : AnyTypeOf<[I32, I64]>;
def Weft_NumericElement : AnyTypeOf<[F16, BF16, F32, F64, I32, I64]>;
def Weft_AnyElement : AnyTypeOf<[F16, BF16, F32, F64, I1, I32, I64]>;

def Weft_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
def Weft_IndexTensor : RankedTensorOf<[I32, I64]>;
def Weft_BoolTensor : RankedTensorOf<[I1]>;
def Weft_NumericTensor : RankedTensorOf<[F16, BF16, F32, F64, I32, I64]>;
def Weft_Tensor : RankedTensorOf<[F16, BF16, F32, F64, I1, I32, I64]>;

// Every op states its sharding rule, gradient and reference semantics: an
// op without one of them does not link.
class Weft_Op<string mnemonic, list<Trait> traits = []>
    : Op<Weft_Dialect, mnemonic, !listconcat(traits, [
          DeclareOpInterfaceMethods<Weft_ShardingRuleOpInterface>,
          DeclareOpInterfaceMethods<Weft_GradientOpInterface>,
          DeclareOpInterfaceMethods<Weft_EvaluableOpInterface>])>;

#endif // WEFT_DIALECT_WEFT_IR_WEFTBASE_TD
