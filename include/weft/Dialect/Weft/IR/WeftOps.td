//===- WeftOps.td - Weft op definitions --------------------*- tablegen -*-===//
//
// Shape rules live in each op's result type inference (WeftOps.cpp), so the
// parser, the builders and the verifier all apply the same rule.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_WEFTOPS_TD
#define WEFT_DIALECT_WEFT_IR_WEFTOPS_TD

include "weft/Dialect/Weft/IR/WeftBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Constants and generators
//===----------------------------------------------------------------------===//

def Weft_ConstantOp : Weft_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "A tensor constant";
  let description = [{
    Materializes a dense (or dense resource) tensor constant. Large model
    weights are not constants: they are `weft.param` arguments.

    ```mlir
    %eps = weft.constant dense<1.0e-05> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Weft_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  let hasVerifier = 1;
}

def Weft_RangeOp : Weft_Op<"range", [Pure]> {
  let summary = "A 1-D arithmetic sequence";
  let description = [{
    `result[i] = start + i * step` for every `i` of the 1-D result, whose
    length is given by the result type. `start` and `step` have the result's
    element type.

    ```mlir
    %pos = weft.range {start = 0 : i64, step = 1 : i64} : tensor<128xi64>
    ```
  }];
  let arguments = (ins TypedAttrInterface:$start, TypedAttrInterface:$step);
  let results = (outs RankedTensorOf<[I32, I64, F16, BF16, F32, F64]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

class Weft_UnaryOp<string mnemonic, Type tensorType, list<Trait> traits = []>
    : Weft_Op<mnemonic, !listconcat(
          [Pure, Elementwise, SameOperandsAndResultType], traits)> {
  let arguments = (ins tensorType:$input);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

class Weft_FloatUnaryOp<string mnemonic, string formula>
    : Weft_UnaryOp<mnemonic, Weft_FloatTensor> {
  let hasFolder = 1;
  let summary = "Elementwise " # formula;
  let description = [{
    Computes `}] # formula # [{` for each element.

    ```mlir
    %y = weft.}] # mnemonic # [{ %x : tensor<4x8xf32>
    ```
  }];
}

def Weft_SqrtOp : Weft_FloatUnaryOp<"sqrt", "sqrt(x)">;
def Weft_RsqrtOp : Weft_FloatUnaryOp<"rsqrt", "1 / sqrt(x)">;
def Weft_ExpOp : Weft_FloatUnaryOp<"exp", "exp(x)">;
def Weft_LogOp : Weft_FloatUnaryOp<"log", "log(x)">;
def Weft_TanhOp : Weft_FloatUnaryOp<"tanh", "tanh(x)">;
def Weft_ErfOp : Weft_FloatUnaryOp<"erf", "erf(x)">;
def Weft_SigmoidOp : Weft_FloatUnaryOp<"sigmoid", "1 / (1 + exp(-x))">;
def Weft_SiluOp : Weft_FloatUnaryOp<"silu", "x / (1 + exp(-x))">;
def Weft_ReciprocalOp : Weft_FloatUnaryOp<"reciprocal", "1 / x">;
def Weft_SinOp : Weft_FloatUnaryOp<"sin", "sin(x)">;
def Weft_CosOp : Weft_FloatUnaryOp<"cos", "cos(x)">;

class Weft_NumericUnaryOp<string mnemonic, string formula>
    : Weft_UnaryOp<mnemonic, Weft_NumericTensor> {
  let summary = "Elementwise " # formula;
  let description = [{
    Computes `}] # formula # [{` for each element of a float or integer
    tensor.

    ```mlir
    %y = weft.}] # mnemonic # [{ %x : tensor<4x8xf32>
    ```
  }];
}

def Weft_NegOp : Weft_NumericUnaryOp<"neg", "-x"> { let hasFolder = 1; }
def Weft_AbsOp : Weft_NumericUnaryOp<"abs", "|x|">;
def Weft_ReluOp : Weft_NumericUnaryOp<"relu", "max(x, 0)">;

def Weft_GeluOp : Weft_Op<"gelu",
    [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    With `approximate = "none"` (the default): `0.5 * x * (1 + erf(x / sqrt(2)))`.
    With `approximate = "tanh"`:
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.
    The names follow PyTorch's `gelu(approximate=...)` and ONNX `Gelu`.

    ```mlir
    %y = weft.gelu %x {approximate = "tanh"} : tensor<2x16x256xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Weft_GeluGradOp : Weft_Op<"gelu_grad",
    [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "The input gradient of weft.gelu";
  let description = [{
    `result_grad * gelu'(input)` for each element, with `gelu'` the
    derivative of the `weft.gelu` of the same `approximate` form: with
    `"none"`, `Phi(x) + x * phi(x)` (the normal distribution's CDF and
    density); with `"tanh"`, `0.5 * (1 + tanh(u)) + 0.5 * x * (1 -
    tanh(u)^2) * du/dx` for `u = sqrt(2 / pi) * (x + 0.044715 * x^3)`.

    The autodiff emits it for GELU's adjoint: one op the backward can hand
    to a GEMM whose epilogue computes it (cuBLASLt's DGELU), where a chain
    of elementary ops would hide what it computes.

    ```mlir
    %dx = weft.gelu_grad %dy, %x {approximate = "tanh"} : tensor<2x16x256xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$result_grad, Weft_FloatTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat =
      "$result_grad `,` $input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Weft_NotOp : Weft_UnaryOp<"not", Weft_BoolTensor> {
  let hasFolder = 1;
  let summary = "Elementwise logical negation";
  let description = [{
    ```mlir
    %y = weft.not %mask : tensor<16x16xi1>
    ```
  }];
}

def Weft_CastOp : Weft_Op<"cast",
    [Pure, Elementwise, SameOperandsAndResultShape]> {
  let summary = "Elementwise element type conversion";
  let description = [{
    Converts each element to the result's element type. Float to integer
    truncates toward zero; to i1 means `x != 0`; from i1 gives 0 or 1.

    ```mlir
    %f = weft.cast %ids : tensor<1x16xi64> to tensor<1x16xf32>
    ```
  }];
  let arguments = (ins Weft_Tensor:$input);
  let results = (outs Weft_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
}

// Binary ops broadcast their operands like numpy: shapes are aligned at the
// trailing dimension and a dimension of size 1 stretches.
class Weft_BroadcastOp<string mnemonic, list<Trait> traits = []>
    : Weft_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor], traits)> {
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::weft::inferBroadcastResult(loc, getOperationName(),
          adaptor.getOperands(), resultElementType(adaptor.getOperands()),
          types);
    }
  }];
}

class Weft_ArithOp<string mnemonic, string formula, Type tensorType,
                   list<Trait> traits = []>
    : Weft_BroadcastOp<mnemonic, !listconcat([SameOperandsElementType],
                                             traits)> {
  let summary = "Elementwise " # formula # " with broadcasting";
  let description = [{
    Computes `}] # formula # [{` elementwise after broadcasting `lhs` and
    `rhs` to a common shape (numpy rules).

    ```mlir
    %y = weft.}] # mnemonic # [{ %a, %b : tensor<2x16x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins tensorType:$lhs, tensorType:$rhs);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let extraClassDeclaration = [{
    static ::mlir::Type resultElementType(::mlir::ValueRange operands) {
      return ::mlir::getElementTypeOrSelf(operands.front().getType());
    }
  }];
}

def Weft_AddOp : Weft_ArithOp<"add", "lhs + rhs", Weft_NumericTensor,
                              [Commutative]> {
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}
def Weft_SubOp : Weft_ArithOp<"sub", "lhs - rhs", Weft_NumericTensor> {
  let hasFolder = 1;
}
def Weft_MulOp : Weft_ArithOp<"mul", "lhs * rhs", Weft_NumericTensor,
                              [Commutative]> { let hasFolder = 1; }
def Weft_DivOp : Weft_ArithOp<"div", "lhs / rhs (integers: toward zero)",
                              Weft_NumericTensor> { let hasFolder = 1; }
def Weft_PowOp : Weft_ArithOp<"pow", "lhs ^ rhs", Weft_FloatTensor> {
  let hasFolder = 1;
}
def Weft_MaxOp : Weft_ArithOp<"max", "max(lhs, rhs)", Weft_NumericTensor,
                              [Commutative]> { let hasFolder = 1; }
def Weft_MinOp : Weft_ArithOp<"min", "min(lhs, rhs)", Weft_NumericTensor,
                              [Commutative]> { let hasFolder = 1; }
def Weft_AndOp : Weft_ArithOp<"and", "lhs and rhs", Weft_BoolTensor,
                              [Commutative]> { let hasFolder = 1; }
def Weft_OrOp : Weft_ArithOp<"or", "lhs or rhs", Weft_BoolTensor,
                             [Commutative]> { let hasFolder = 1; }
def Weft_XorOp : Weft_ArithOp<"xor", "lhs xor rhs", Weft_BoolTensor,
                              [Commutative]> { let hasFolder = 1; }

class Weft_CompareOp<string mnemonic, string formula, list<Trait> traits = []>
    : Weft_BroadcastOp<mnemonic, !listconcat([SameOperandsElementType],
                                             traits)> {
  let summary = "Elementwise comparison `" # formula # "` with broadcasting";
  let description = [{
    Compares broadcast operands elementwise; the result is an i1 tensor.

    ```mlir
    %m = weft.}] # mnemonic # [{ %a, %b : tensor<16x16xi64>, tensor<16x1xi64>
    ```
  }];
  let arguments = (ins Weft_Tensor:$lhs, Weft_Tensor:$rhs);
  let results = (outs Weft_BoolTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let extraClassDeclaration = [{
    static ::mlir::Type resultElementType(::mlir::ValueRange operands) {
      return ::mlir::IntegerType::get(operands.front().getContext(), 1);
    }
  }];
  let hasFolder = 1;
}

def Weft_EqualOp : Weft_CompareOp<"equal", "lhs == rhs", [Commutative]>;
def Weft_LessOp : Weft_CompareOp<"less", "lhs < rhs">;
def Weft_LessEqualOp : Weft_CompareOp<"less_equal", "lhs <= rhs">;
def Weft_GreaterOp : Weft_CompareOp<"greater", "lhs > rhs">;
def Weft_GreaterEqualOp : Weft_CompareOp<"greater_equal", "lhs >= rhs">;

def Weft_WhereOp : Weft_BroadcastOp<"where",
    [AllElementTypesMatch<["on_true", "on_false", "result"]>]> {
  let summary = "Elementwise select with broadcasting";
  let description = [{
    `result = condition ? on_true : on_false`, with all three operands
    broadcast to a common shape. This is how exporters write causal masks.

    ```mlir
    %s = weft.where %causal, %scores, %neg_inf
        : tensor<16x16xi1>, tensor<1x4x16x16xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins Weft_BoolTensor:$condition, Weft_Tensor:$on_true,
                       Weft_Tensor:$on_false);
  let results = (outs Weft_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:`
    type($condition) `,` type($on_true) `,` type($on_false)
  }];
  let extraClassDeclaration = [{
    static ::mlir::Type resultElementType(::mlir::ValueRange operands) {
      return ::mlir::getElementTypeOrSelf(operands[1].getType());
    }
  }];
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Weft_MatmulOp : Weft_Op<"matmul",
    [Pure, InferTypeOpAdaptor, SameOperandsElementType]> {
  let summary = "Batched matrix product with broadcasting (numpy matmul)";
  let description = [{
    Multiplies the last two dimensions; leading (batch) dimensions broadcast.
    A 1-D `lhs` is a row vector and a 1-D `rhs` a column vector, and the
    added dimension is dropped from the result, as in numpy.

    ```mlir
    %s = weft.matmul %q, %kt : tensor<1x4x16x8xf32>, tensor<1x4x8x16xf32>
    ```
  }];
  let arguments = (ins Weft_NumericTensor:$lhs, Weft_NumericTensor:$rhs);
  let results = (outs Weft_NumericTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let hasCanonicalizer = 1;
}

def Weft_LinearOp : Weft_Op<"linear",
    [Pure, InferTypeOpAdaptor, SameOperandsElementType]> {
  let summary = "Affine map of the last dimension: input * weight + bias";
  let description = [{
    `input` is `[..., K]` and `weight` is `[K, N]`, or `[N, K]` when
    `transpose_weight` is set (the layout of `torch.nn.Linear`). The optional
    1-D `bias` has `N` elements. The result is `[..., N]`. This is the unit
    that tensor parallelism splits by columns or rows.

    ```mlir
    %h = weft.linear %x, %w, %b : tensor<2x16x64xf32>, tensor<64x256xf32>, tensor<256xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$input, Weft_FloatTensor:$weight,
                       Optional<Weft_FloatTensor>:$bias,
                       UnitAttr:$transpose_weight);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? prop-dict attr-dict `:` type($input) `,`
    type($weight) (`,` type($bias)^)?
  }];
}

def Weft_ConvOp : Weft_Op<"conv",
    [Pure, InferTypeOpAdaptor, SameOperandsElementType]> {
  let summary = "N-d convolution in NCHW layout (as ONNX Conv)";
  let description = [{
    `input` is `[N, C, D1..Dn]`, `weight` is `[M, C / group, K1..Kn]`, the
    optional `bias` has `M` elements. `pads` holds the `n` leading pads then
    the `n` trailing pads. Vision transformers use it for patch embedding.

    ```mlir
    %p = weft.conv %img, %w, %b <{strides = array<i64: 8, 8>,
        pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1}>
        : tensor<1x3x32x32xf32>, tensor<64x3x8x8xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$input, Weft_FloatTensor:$weight,
                       Optional<Weft_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? prop-dict attr-dict `:` type($input) `,`
    type($weight) (`,` type($bias)^)?
  }];
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

class Weft_ReduceOp<string mnemonic, string what, Type tensorType>
    : Weft_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let summary = "Reduction by " # what # " over the given axes";
  let description = [{
    Reduces `input` over `axes` (non-negative, strictly increasing, at least
    one). With `keepdims` the reduced dimensions stay with size 1.

    ```mlir
    %m = weft.}] # mnemonic # [{ %x <{axes = array<i64: 2>, keepdims}> : tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins tensorType:$input, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keepdims);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$input prop-dict attr-dict `:` type($input)";
  let hasFolder = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::weft::inferReductionResult(loc, getOperationName(),
          adaptor.getInput().getType(), adaptor.getAxes(),
          adaptor.getKeepdims(), types);
    }
  }];
}

def Weft_ReduceSumOp : Weft_ReduceOp<"reduce_sum", "sum", Weft_NumericTensor>;
def Weft_ReduceMeanOp : Weft_ReduceOp<"reduce_mean", "arithmetic mean",
                                      Weft_FloatTensor>;
def Weft_ReduceMaxOp : Weft_ReduceOp<"reduce_max", "maximum",
                                     Weft_NumericTensor>;
def Weft_ReduceMinOp : Weft_ReduceOp<"reduce_min", "minimum",
                                     Weft_NumericTensor>;
def Weft_ReduceProdOp : Weft_ReduceOp<"reduce_prod", "product",
                                      Weft_NumericTensor>;

class Weft_SoftmaxBase<string mnemonic, string formula>
    : Weft_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = formula # " along one axis";
  let description = [{
    Computes `}] # formula # [{` along `axis` (non-negative), numerically
    stable (the maximum is subtracted first).

    ```mlir
    %p = weft.}] # mnemonic # [{ %scores {axis = 3} : tensor<1x4x16x16xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Weft_SoftmaxOp : Weft_SoftmaxBase<"softmax",
                                      "exp(x) / sum(exp(x))">;
def Weft_LogSoftmaxOp : Weft_SoftmaxBase<"log_softmax",
                                         "x - log(sum(exp(x)))">;

def Weft_SoftmaxCrossEntropyOp : Weft_Op<"softmax_cross_entropy",
    [Pure, AllTypesMatch<["loss", "log_sum_exp"]>]> {
  let summary = "Per-position cross-entropy of logits against class labels";
  let description = [{
    For logits `[..., V]` and integer labels `[...]`: `loss[i...] =
    log_sum_exp[i...] - logits[i..., labels[i...]]`, where `log_sum_exp` is
    `log(sum_v exp(logits[i..., v]))` (the second result, which the gradient
    reuses). A position whose label is `ignore_index` has loss 0. One pass
    over each row: no log-probabilities or one-hot labels of the logits'
    size exist. The per-position results are in the logits' element type
    or in f32: bf16 logits (a bf16 lm_head's) are read as they were written
    and the log-sum-exp the gradient subtracts keeps f32's precision.
    `weft-train-step` builds the mean loss from it; its gradient is
    `weft.softmax_cross_entropy_grad`.

    ```mlir
    %loss, %lse = weft.softmax_cross_entropy %logits, %labels
        <{ignore_index = -100 : i64}> : tensor<2x16x256xf32>, tensor<2x16xi64>
        -> tensor<2x16xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$logits, Weft_IndexTensor:$labels,
                       I64Attr:$ignore_index);
  let results = (outs Weft_FloatTensor:$loss, Weft_FloatTensor:$log_sum_exp);
  let assemblyFormat = [{
    $logits `,` $labels prop-dict attr-dict `:` type($logits) `,`
    type($labels) `->` type($loss)
  }];
  let hasVerifier = 1;
}

def Weft_SoftmaxCrossEntropyGradOp : Weft_Op<"softmax_cross_entropy_grad",
    [Pure, AllTypesMatch<["logits", "logits_grad"]>,
     AllTypesMatch<["log_sum_exp", "loss_grad"]>]> {
  let summary = "The gradient of weft.softmax_cross_entropy's loss";
  let description = [{
    `logits_grad[i..., v] = (exp(logits[i..., v] - log_sum_exp[i...]) -
    (v == labels[i...])) * loss_grad[i...]`: softmax minus one at the label,
    scaled by the loss's gradient; 0 on the rows whose label is
    `ignore_index`. It reads each logit once and may write over the logits
    (in place when nothing else reads them); the gradient has the logits'
    element type, the per-position operands that of the forward's results.

    ```mlir
    %dlogits = weft.softmax_cross_entropy_grad %logits, %labels, %lse, %dloss
        <{ignore_index = -100 : i64}> : tensor<2x16x256xf32>, tensor<2x16xi64>,
        tensor<2x16xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$logits, Weft_IndexTensor:$labels,
                       Weft_FloatTensor:$log_sum_exp,
                       Weft_FloatTensor:$loss_grad, I64Attr:$ignore_index);
  let results = (outs Weft_FloatTensor:$logits_grad);
  let assemblyFormat = [{
    $logits `,` $labels `,` $log_sum_exp `,` $loss_grad prop-dict attr-dict
    `:` type($logits) `,` type($labels) `,` type($log_sum_exp)
  }];
  let hasVerifier = 1;
}

def Weft_LayerNormOp : Weft_Op<"layer_norm",
    [Pure, SameOperandsElementType]> {
  let summary = "Layer normalization over the trailing dimensions";
  let description = [{
    Normalizes over the dimensions `axis..rank-1`:
    `(x - mean) / sqrt(var + epsilon) * scale + bias` with the biased
    variance. `scale` and the optional `bias` have the normalized shape.
    The result has the input's shape and its element type or a narrower
    float one (bf16 for a bf16 GEMM that reads it): the row is computed in
    the input's type and rounded once as it is written.

    ```mlir
    %y = weft.layer_norm %x, %gamma, %beta {axis = 2, epsilon = 1.0e-05 : f64}
        : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$input, Weft_FloatTensor:$scale,
                       Optional<Weft_FloatTensor>:$bias, I64Attr:$axis,
                       F64Attr:$epsilon);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? attr-dict `:` type($input) `,`
    type($scale) (`,` type($bias)^)?
    `` custom<NarrowResult>(ref(type($input)), type($result))
  }];
  let hasVerifier = 1;
}

def Weft_RmsNormOp : Weft_Op<"rms_norm",
    [Pure, SameOperandsElementType]> {
  let summary = "Root-mean-square normalization over the trailing dimensions";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * scale` over the dimensions
    `axis..rank-1`; `scale` has the normalized shape (Llama's RMSNorm).
    As `weft.layer_norm`'s, the result may be of a narrower float type.

    ```mlir
    %y = weft.rms_norm %x, %w {axis = 2, epsilon = 1.0e-06 : f64}
        : tensor<2x16x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$input, Weft_FloatTensor:$scale,
                       I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale attr-dict `:` type($input) `,` type($scale)
    `` custom<NarrowResult>(ref(type($input)), type($result))
  }];
  let hasVerifier = 1;
}

def Weft_NormGradOp : Weft_Op<"norm_grad",
    [Pure, AllTypesMatch<["input", "input_grad"]>,
     AllTypesMatch<["mean", "inv_std"]>,
     OptionalTypesMatchWith<"addend has the input's type", "input", "addend",
                    "$_self">]> {
  let summary = "The input gradient of weft.layer_norm or weft.rms_norm";
  let description = [{
    For a norm over the dims `axis..rank-1` (`centered`: `weft.layer_norm`,
    otherwise `weft.rms_norm`, whose mean is 0), with `inv_std =
    1 / sqrt(var + epsilon)`, `x^ = (x - mean) * inv_std` and `g^ =
    result_grad * scale`: `input_grad = inv_std * (g^ - mean(g^) - x^ *
    mean(g^ * x^))`, without the `mean(g^)` term when not centered. It also
    returns each row's `mean` and `inv_std` (the normalized dims kept, as
    1), from which the scale's gradient `sum(result_grad * x^)` and the
    bias's `sum(result_grad)` over the rows follow.

    `result_grad` may be of a narrower float type than the input (the bf16
    gradient of a bf16 GEMM): it is widened as it is read. With `add`,
    `addend` (the gradient that reaches the norm's input by another path:
    the residual stream's) is added to `input_grad` as it is written.

    The statistics, both means and the gradient are one row kernel: a
    pass set over each row while it is in cache, then the row written,
    where the decomposition took a reduction or an elementwise kernel for
    each and stored the sum with the residual's gradient apart.

    ```mlir
    %dx, %mean, %inv_std = weft.norm_grad %x, %gamma, %dy
        <{axis = 2 : i64, centered, epsilon = 1.000000e-05 : f64}>
        : tensor<2x16x64xf32>, tensor<64xf32> -> tensor<2x16x1xf32>
    %dx2, %mean2, %inv_std2 = weft.norm_grad %x, %gamma, %dy_bf16 add %dr
        <{axis = 2 : i64, centered, epsilon = 1.000000e-05 : f64}>
        : tensor<2x16x64xf32>, tensor<64xf32>, tensor<2x16x64xbf16>
        -> tensor<2x16x1xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$input, Weft_FloatTensor:$scale,
                       Weft_FloatTensor:$result_grad,
                       Optional<Weft_FloatTensor>:$addend, I64Attr:$axis,
                       F64Attr:$epsilon, UnitAttr:$centered);
  let results = (outs Weft_FloatTensor:$input_grad, Weft_FloatTensor:$mean,
                      Weft_FloatTensor:$inv_std);
  let assemblyFormat = [{
    $input `,` $scale `,` $result_grad (`add` $addend^)? prop-dict attr-dict
    `:` type($input) `,` type($scale)
    `` custom<NarrowOperand>(ref(type($input)), type($result_grad))
    `->` type($mean)
  }];
  let hasVerifier = 1;
}

def Weft_AttentionOp : Weft_Op<"attention",
    [Pure, InferTypeOpAdaptor,
     AllElementTypesMatch<["query", "key", "value", "result"]>]> {
  let summary = "Scaled dot-product attention";
  let description = [{
    `softmax(query * key^T * scale + mask) * value` per batch and head.
    `query` is `[B, Hq, S, D]`, `key` is `[B, Hkv, T, D]` and `value` is
    `[B, Hkv, T, Dv]`; `Hq` must be a multiple of `Hkv` (grouped-query
    attention: query head `h` reads key/value head `h / (Hq / Hkv)`). The
    result is `[B, Hq, S, Dv]`. `scale` defaults to `1 / sqrt(D)`. `causal`
    masks key position `j` for query position `i` when `j > i + T - S`. The
    optional `mask` broadcasts to `[B, Hq, S, T]`: a float mask is added to
    the scores, an i1 mask keeps the positions where it is true.

    With `save_log_sum_exp` a second result, f32 `[B, Hq, S]`, holds each
    query's log of the sum of the exponentials of its (scaled, masked)
    scores: what a fused backward (`weft.attention_grad`) reads instead of
    recomputing the softmax's statistics. The CUDA target sets it on the
    forward of an attention it differentiates with a fused kernel.

    ```mlir
    %o = weft.attention %q, %k, %v <{causal}>
        : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>
    %o2, %lse = weft.attention %q, %k, %v <{causal, save_log_sum_exp}>
        : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$query, Weft_FloatTensor:$key,
                       Weft_FloatTensor:$value, Optional<Weft_Tensor>:$mask,
                       UnitAttr:$causal, OptionalAttr<F64Attr>:$scale,
                       UnitAttr:$save_log_sum_exp);
  let results = (outs Weft_FloatTensor:$result,
                      Optional<TensorOf<[F32]>>:$log_sum_exp);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`,` $mask^)? prop-dict attr-dict `:` type($query) `,`
    type($key) `,` type($value) (`,` type($mask)^)?
  }];
  let extraClassDeclaration = [{
    /// The scale applied to the scores: the attribute or 1/sqrt(head dim).
    double getEffectiveScale();
    /// Whether `mask` is a constant i1 tensor whose last two dims are the
    /// causal pattern for `s` queries and `t` keys (key j visible to query
    /// i iff j <= i + t - s), the same across its leading dims.
    static bool isCausalMask(::mlir::Value mask, int64_t s, int64_t t);
  }];
  // A constant causal mask (built from position comparisons, folded only
  // after the fusion ran) becomes the `causal` attribute.
  let hasCanonicalizer = 1;
}

def Weft_AttentionGradOp : Weft_Op<"attention_grad",
    [Pure, AllElementTypesMatch<["query", "key", "value", "out", "out_grad",
                                 "query_grad", "key_grad", "value_grad"]>,
     AllTypesMatch<["query", "query_grad"]>, AllTypesMatch<["key", "key_grad"]>,
     AllTypesMatch<["value", "value_grad"]>, AllTypesMatch<["out", "out_grad"]>,
     AttrSizedOperandSegments]> {
  let summary = "The gradients of a scaled dot-product attention";
  let description = [{
    Given `out = weft.attention(query, key, value, mask)` with the same
    `mask`, `causal` and `scale`, and `out_grad` the gradient of the loss
    with respect to `out`, returns the gradients with respect to `query`,
    `key` and `value` (grouped key/value heads summed over their query
    heads). A float mask gets no gradient here: the training step fuses
    only attentions whose mask needs none. `log_sum_exp`, when given, is
    the forward's (`save_log_sum_exp`); the result does not depend on it.

    The training step emits it, rather than the attention's decomposed
    adjoint, for attentions marked `weft.fused_backward`: with a
    context-parallel mesh axis, where the sequence splits inside one op so
    that `weft-partition` can run a mask-free one as a ring (key/value
    blocks and their gradients passed around the axis) or as an all-to-all
    over heads, and on the CUDA target, which runs it as one fused kernel.

    ```mlir
    %dq, %dk, %dv = weft.attention_grad %q, %k, %v, %o, %do <{causal}>
        : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>,
          tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>
    %gq, %gk, %gv = weft.attention_grad %q, %k, %v, %o, %do
        mask(%m : tensor<1x1x16x16xi1>) log_sum_exp(%lse : tensor<1x4x16xf32>)
        : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>,
          tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$query, Weft_FloatTensor:$key,
                       Weft_FloatTensor:$value, Weft_FloatTensor:$out,
                       Weft_FloatTensor:$out_grad, Optional<Weft_Tensor>:$mask,
                       Optional<TensorOf<[F32]>>:$log_sum_exp,
                       UnitAttr:$causal, OptionalAttr<F64Attr>:$scale);
  let results = (outs Weft_FloatTensor:$query_grad, Weft_FloatTensor:$key_grad,
                      Weft_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $out `,` $out_grad
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`log_sum_exp` `(` $log_sum_exp^ `:` type($log_sum_exp) `)`)?
    prop-dict attr-dict `:`
    type($query) `,` type($key) `,` type($value) `,` type($out) `,`
    type($out_grad)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The scale applied to the scores: the attribute or 1/sqrt(head dim).
    double getEffectiveScale();
  }];
}

//===----------------------------------------------------------------------===//
// Indexing and data movement
//===----------------------------------------------------------------------===//

def Weft_GatherOp : Weft_Op<"gather",
    [Pure, InferTypeOpAdaptor,
     AllElementTypesMatch<["data", "result"]>]> {
  let summary = "Gather slices along an axis (embedding lookup)";
  let description = [{
    `result[i..., j..., k...] = data[i..., indices[j...], k...]` where `i`
    spans the dimensions before `axis`. A negative index counts from the end
    of `axis`. An embedding lookup is a gather on axis 0 of the table.

    ```mlir
    %e = weft.gather %wte, %ids <{axis = 0}> : tensor<256x64xf32>, tensor<1x16xi64>
    ```
  }];
  let arguments = (ins Weft_Tensor:$data, Weft_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Weft_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices prop-dict attr-dict `:` type($data) `,` type($indices)
  }];
  let hasFolder = 1;
}

def Weft_ScatterAddOp : Weft_Op<"scatter_add",
    [Pure, AllElementTypesMatch<["updates", "result"]>]> {
  let summary = "Sum slices into the rows of a table (the lookup's gradient)";
  let description = [{
    `result[r, k...] = sum of updates[j..., k...] over the j... with
    indices[j...] == r`, for a result `[rows, k...]` and updates
    `[indices..., k...]`: the adjoint of an embedding lookup, without a
    one-hot of the indices. An index outside `[0, rows)` adds nothing, so a
    rank holding a slice of the rows passes the indices shifted by its first
    row. Rows are summed in no fixed order (atomic adds on a GPU).

    ```mlir
    %dwte = weft.scatter_add %dx, %ids
        : tensor<1x16x64xf32>, tensor<1x16xi64> -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$updates, Weft_IndexTensor:$indices);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = [{
    $updates `,` $indices attr-dict `:` type($updates) `,` type($indices)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def Weft_ReshapeOp : Weft_Op<"reshape",
    [Pure, AllElementTypesMatch<["input", "result"]>]> {
  let summary = "Reinterpret the shape, keeping the row-major element order";
  let description = [{
    The result type gives the new shape; element counts must agree.

    ```mlir
    %h = weft.reshape %x : tensor<1x16x64xf32> -> tensor<1x16x4x16xf32>
    ```
  }];
  let arguments = (ins Weft_Tensor:$input);
  let results = (outs Weft_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Weft_TransposeOp : Weft_Op<"transpose",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "Permute dimensions";
  let description = [{
    `result.shape[i] = input.shape[permutation[i]]`.

    ```mlir
    %t = weft.transpose %x <{permutation = array<i64: 0, 2, 1, 3>}>
        : tensor<1x16x4x16xf32>
    ```
  }];
  let arguments = (ins Weft_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Weft_Tensor:$result);
  let assemblyFormat = "$input prop-dict attr-dict `:` type($input)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Weft_ConcatOp : Weft_Op<"concat",
    [Pure, InferTypeOpAdaptor, SameOperandsElementType]> {
  let summary = "Join tensors along an axis";
  let description = [{
    All inputs agree in every dimension but `axis`.

    ```mlir
    %kv = weft.concat %past, %k <{axis = 2}>
        : tensor<1x4x3x16xf32>, tensor<1x4x16x16xf32>
    ```
  }];
  let arguments = (ins Variadic<Weft_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Weft_Tensor:$result);
  let assemblyFormat = "$inputs prop-dict attr-dict `:` type($inputs)";
  let hasFolder = 1;
}

def Weft_SplitOp : Weft_Op<"split", [Pure, InferTypeOpAdaptor]> {
  let summary = "Cut a tensor into consecutive pieces along an axis";
  let description = [{
    `sizes` gives the extent of each piece along `axis`; they sum to the
    dimension.

    ```mlir
    %q, %k, %v = weft.split %qkv <{axis = 2, sizes = array<i64: 64, 64, 64>}>
        : tensor<1x16x192xf32>
    ```
  }];
  let arguments = (ins Weft_Tensor:$input, I64Attr:$axis,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Weft_Tensor>:$results);
  let assemblyFormat = "$input prop-dict attr-dict `:` type($input)";
  // Constant pieces fold: exporters compute shapes by splitting constants.
  let hasFolder = 1;
}

def Weft_SliceOp : Weft_Op<"slice", [Pure, InferTypeOpAdaptor]> {
  let summary = "Strided slice with one entry per dimension";
  let description = [{
    Along dimension `d` takes `sizes[d]` elements starting at `offsets[d]`,
    `strides[d]` apart (a negative stride walks backwards). Every element
    read must be in bounds. Slices that are a tensor's only users and cut
    one axis into consecutive pieces canonicalize to a `weft.split` (a packed
    QKV projection cut by three slices is one split).

    ```mlir
    %s = weft.slice %x <{offsets = array<i64: 0, 8>, sizes = array<i64: 2, 8>,
                         strides = array<i64: 1, 1>}> : tensor<2x16xf32>
    ```
  }];
  let arguments = (ins Weft_Tensor:$input, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes, DenseI64ArrayAttr:$strides);
  let results = (outs Weft_Tensor:$result);
  let assemblyFormat = "$input prop-dict attr-dict `:` type($input)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Weft_ExpandOp : Weft_Op<"expand",
    [Pure, AllElementTypesMatch<["input", "result"]>]> {
  let summary = "Broadcast to a larger shape";
  let description = [{
    Broadcasts `input` to the result shape by numpy rules (dimensions of size
    1 stretch, missing leading dimensions are added).

    ```mlir
    %b = weft.expand %x : tensor<1x64xf32> -> tensor<16x64xf32>
    ```
  }];
  let arguments = (ins Weft_Tensor:$input);
  let results = (outs Weft_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Weft_SqueezeOp : Weft_Op<"squeeze",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "Drop dimensions of size 1";
  let description = [{
    Removes the listed `axes` (non-negative, increasing), each of size 1.

    ```mlir
    %s = weft.squeeze %x <{axes = array<i64: 0>}> : tensor<1x16xf32>
    ```
  }];
  let arguments = (ins Weft_Tensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs Weft_Tensor:$result);
  let assemblyFormat = "$input prop-dict attr-dict `:` type($input)";
  let hasFolder = 1;
}

def Weft_UnsqueezeOp : Weft_Op<"unsqueeze",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "Insert dimensions of size 1";
  let description = [{
    `axes` (non-negative, increasing) are positions in the result.

    ```mlir
    %u = weft.unsqueeze %x <{axes = array<i64: 0, 2>}> : tensor<16x16xf32>
    ```
  }];
  let arguments = (ins Weft_Tensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs Weft_Tensor:$result);
  let assemblyFormat = "$input prop-dict attr-dict `:` type($input)";
  let hasFolder = 1;
}

def Weft_TriluOp : Weft_Op<"trilu", [Pure, SameOperandsAndResultType]> {
  let summary = "Keep the lower or upper triangle of the last two dimensions";
  let description = [{
    Zeroes (or sets false) the elements above diagonal `diagonal` (lower,
    the default) or below it (`upper`). A causal mask is the lower triangle
    of an all-true square.

    ```mlir
    %causal = weft.trilu %ones {diagonal = 0} : tensor<16x16xi1>
    ```
  }];
  let arguments = (ins Weft_Tensor:$input,
                       DefaultValuedAttr<I64Attr, "0">:$diagonal,
                       UnitAttr:$upper);
  let results = (outs Weft_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

#endif // WEFT_DIALECT_WEFT_IR_WEFTOPS_TD
