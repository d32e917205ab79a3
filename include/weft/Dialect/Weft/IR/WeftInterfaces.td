//===- WeftInterfaces.td - What every weft op declares -----*- tablegen -*-===//
//
// Each weft op states its own sharding rule, gradient and reference
// semantics through these interfaces. `Weft_Op` declares all three on every
// op (WeftBase.td), so an op added without one of them does not link: the
// rule cannot be forgotten until a model happens to use the op.
//
// Upstream's `shard` ShardingInterface describes an op as loops with affine
// indexing maps; weft's rules also group reshaped dims, interleave the
// blocks of a fused projection and make a vocab-sliced gather a partial sum,
// which indexing maps do not express, so the sharding rule is weft's own
// (docs/spmd.md).
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_WEFTINTERFACES_TD
#define WEFT_DIALECT_WEFT_IR_WEFTINTERFACES_TD

include "mlir/IR/OpBase.td"

def Weft_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::weft";
  let description = [{
    The op's Shardy-style sharding rule: every dim of every operand and
    result maps to a factor (a loop of the op) that is parallel, a reduction
    (splitting it leaves partial sums) or whole, or to none for a broadcast
    dim of size 1. Propagation and partitioning read only this rule.
  }];
  let methods = [
    InterfaceMethod<"Returns the op's sharding rule.",
      "::weft::OpShardingRule", "getShardingRule">,
  ];
}

def Weft_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::weft";
  let description = [{
    The op's vector-Jacobian product, written in weft ops so that the
    backward pass is partitioned and lowered like the forward one. An op
    whose results are never floats (comparisons, logic) passes no adjoint
    to its operands; an op that has no rule fails with an error at the op
    saying why.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, with `builder` at its insertion point, the adjoint of each
        operand from the adjoint of each result (null where a result has
        none). Sets `operandAdjoints` to one value per operand, null where
        an operand gets none. Fails, with an error at the op, where the op
        has no gradient for these operands.
      }],
      "::llvm::LogicalResult", "buildAdjoints",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultAdjoints,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandAdjoints)>,
  ];
}

def Weft_EvaluableOpInterface : OpInterface<"EvaluableOpInterface"> {
  let cppNamespace = "::weft";
  let description = [{
    The op's reference semantics: straight loops over HostTensors in double
    precision, written for clarity, not speed. This is the definition the
    compiled code, the fusions and the gradients are checked against.
  }];
  let methods = [
    InterfaceMethod<[{
        Computes the op's results from its operands' values (one per
        operand, of its type's shape). Fails, with an error at the op, on
        values the op is undefined for (an index out of range, an integer
        division by zero).
      }],
      "::llvm::LogicalResult", "evaluate",
      (ins "::llvm::ArrayRef<const ::weft::HostTensor *>":$operands,
           "::llvm::SmallVectorImpl<::weft::HostTensor> &":$results)>,
  ];
}

#endif // WEFT_DIALECT_WEFT_IR_WEFTINTERFACES_TD
