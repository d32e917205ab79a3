//===- OpInterfacesTest.cpp - Every weft op states its rules --------------===//
//
// Weft_Op declares the three rule interfaces on every op, so an op defined
// through it without a rule does not link. These tests hold the registered
// dialect to that (an op defined some other way would slip past the
// linker), and run every op of the round-trip test (test/Dialect/Weft/
// ops.mlir, which has one of each) through its three rules: the sharding
// rule is well formed, the reference semantics runs, and the gradient rule
// builds adjoints of the operands' types (verified IR) or fails with an
// error naming the op.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Reference/Evaluator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringSet.h"
#include "gtest/gtest.h"

#include <random>

using namespace mlir;
using namespace weft;

namespace {

TEST(OpInterfaces, EveryRegisteredWeftOpStatesItsThreeRules) {
  MLIRContext ctx;
  ctx.loadDialect<WeftDialect>();
  int64_t ops = 0;
  for (RegisteredOperationName name : ctx.getRegisteredOperations()) {
    if (name.getDialectNamespace() != WeftDialect::getDialectNamespace())
      continue;
    ++ops;
    EXPECT_TRUE(name.hasInterface<ShardingRuleOpInterface>())
        << name.getStringRef().str() << " states no sharding rule";
    EXPECT_TRUE(name.hasInterface<GradientOpInterface>())
        << name.getStringRef().str() << " states no gradient rule";
    EXPECT_TRUE(name.hasInterface<EvaluableOpInterface>())
        << name.getStringRef().str() << " states no reference semantics";
  }
  EXPECT_GT(ops, 50);
}

int64_t rankOf(Value v) {
  return llvm::cast<ShapedType>(v.getType()).getRank();
}

/// Factor ids in range, one per dim (or -1), positive block counts.
void expectWellFormed(Operation *op, const OpShardingRule &rule) {
  SCOPED_TRACE(op->getName().getStringRef().str());
  ASSERT_EQ(rule.operandFactors.size(), op->getNumOperands());
  ASSERT_EQ(rule.operandBlocks.size(), op->getNumOperands());
  ASSERT_EQ(rule.resultFactors.size(), op->getNumResults());
  ASSERT_EQ(rule.resultBlocks.size(), op->getNumResults());
  auto expectDims = [&](ValueRange values,
                        ArrayRef<SmallVector<int64_t>> factors,
                        ArrayRef<SmallVector<int64_t>> blocks) {
    for (auto [value, dims, dimBlocks] : llvm::zip(values, factors, blocks)) {
      ASSERT_EQ(static_cast<int64_t>(dims.size()), rankOf(value));
      ASSERT_EQ(static_cast<int64_t>(dimBlocks.size()), rankOf(value));
      for (auto [factor, count] : llvm::zip(dims, dimBlocks)) {
        EXPECT_GE(factor, -1);
        EXPECT_LT(factor, static_cast<int64_t>(rule.kinds.size()));
        EXPECT_GE(count, 1);
      }
    }
  };
  expectDims(op->getOperands(), rule.operandFactors, rule.operandBlocks);
  expectDims(op->getResults(), rule.resultFactors, rule.resultBlocks);
  // Every result dim is some factor's: a result dim without one would have
  // no sharding to take.
  for (auto [index, dims] : llvm::enumerate(rule.resultFactors))
    for (auto [dim, factor] : llvm::enumerate(dims))
      EXPECT_GE(factor, 0) << "result " << index << " dim " << dim;
}

TEST(OpInterfaces, EveryOpOfTheRoundTripTestFollowsItsRules) {
  MLIRContext ctx;
  ctx.loadDialect<WeftDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(WEFT_TEST_DIR "/Dialect/Weft/ops.mlir", &ctx);
  ASSERT_TRUE(module);
  llvm::StringSet<> seen, refused;
  std::mt19937 rng(3);
  for (auto func : module->getOps<func::FuncOp>()) {
    SCOPED_TRACE(func.getSymName().str());
    // Positive floats and ones keep every op defined (log, division,
    // gather indices).
    SmallVector<HostTensor> args;
    for (Type t : func.getArgumentTypes()) {
      auto type = llvm::cast<RankedTensorType>(t);
      HostTensor arg =
          HostTensor::zeros(type.getShape(), type.getElementType());
      for (double &v : arg.floats)
        v = std::uniform_real_distribution<double>(0.5, 1.5)(rng);
      for (int64_t &v : arg.ints)
        v = 1;
      args.push_back(arg);
    }
    EXPECT_TRUE(succeeded(evaluateFunction(func, args)));

    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) {
      if (op->getDialect() && op->getDialect()->getNamespace() == "weft")
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      seen.insert(op->getName().getStringRef());
      expectWellFormed(op, cast<ShardingRuleOpInterface>(op).getShardingRule());
      if (llvm::none_of(op->getResultTypes(), [](Type t) {
            return llvm::isa<FloatType>(getElementTypeOrSelf(t));
          }))
        continue;
      OpBuilder builder(op->getContext());
      builder.setInsertionPointAfter(op);
      SmallVector<Value> resultAdjoints(op->getResults());
      SmallVector<Value> operandAdjoints;
      std::string error;
      ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
        error = diag.str();
        return success();
      });
      if (failed(cast<GradientOpInterface>(op).buildAdjoints(
              builder, resultAdjoints, operandAdjoints))) {
        EXPECT_TRUE(StringRef(error).starts_with(
            ("autodiff: " + op->getName().getStringRef() + " ").str()))
            << error;
        refused.insert(op->getName().getStringRef());
        continue;
      }
      ASSERT_EQ(operandAdjoints.size(), op->getNumOperands());
      for (auto [operand, adjoint] :
           llvm::zip(op->getOperands(), operandAdjoints))
        if (adjoint) {
          EXPECT_EQ(adjoint.getType(), operand.getType())
              << op->getName().getStringRef().str();
        }
    }
  }
  EXPECT_TRUE(succeeded(verify(*module)));
  // The ops whose instances in ops.mlir may refuse a gradient, each for a
  // reason its error names; any other refusal is a bug (a rule that
  // refuses everything would pass the check above).
  const llvm::StringSet<> allowedToRefuse = {
      "weft.conv",           // the input's adjoint: a transposed convolution
      "weft.matmul",         // ops.mlir's matrix-vector product (1-D operand)
      "weft.attention_grad", // second derivatives
      "weft.softmax_cross_entropy_grad", // second derivatives
      "weft.norm_grad",                  // second derivatives
      "weft.gelu_grad",                  // second derivatives
  };
  for (const auto &name : refused)
    EXPECT_TRUE(allowedToRefuse.contains(name.getKey()))
        << name.getKey().str() << " refuses a gradient";
  for (const auto &name : allowedToRefuse)
    EXPECT_TRUE(refused.contains(name.getKey()))
        << name.getKey().str() << " no longer refuses: drop it from the list";
  MLIRContext registry;
  registry.loadDialect<WeftDialect>();
  for (RegisteredOperationName name : registry.getRegisteredOperations())
    if (name.getDialectNamespace() == "weft") {
      EXPECT_TRUE(seen.contains(name.getStringRef()))
          << name.getStringRef().str() << " is missing from ops.mlir";
    }
}

} // namespace
