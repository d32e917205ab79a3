//===- OutlineLayers.cpp - One function per distinct layer ----------------===//
//
// A transformer's layers are the same computation on different weights.
// Each run of consecutive ops of one layer becomes a call of a private
// function, and runs that compute the same thing share it, so LLVM compiles
// a layer once however deep the model is.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/Layers.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"

namespace weft {
#define GEN_PASS_DEF_WEFTOUTLINELAYERS
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

struct WeftOutlineLayersPass
    : public weft::impl::WeftOutlineLayersBase<WeftOutlineLayersPass> {
  using WeftOutlineLayersBase::WeftOutlineLayersBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    outlined.clear();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> functions;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        functions.push_back(func);
    for (func::FuncOp func : functions)
      outline(func, symbols);
  }

  /// The runs of consecutive ops of one layer in `func`.
  SmallVector<SmallVector<Operation *>> layerRuns(func::FuncOp func) {
    SmallVector<SmallVector<Operation *>> runs;
    std::string current;
    for (Operation &op : func.getBody().front().without_terminator()) {
      std::string layer = numberedLayerOf(op.getLoc()).value_or("");
      if (layer.empty() || op.getNumRegions() != 0 || isa<func::CallOp>(op)) {
        current.clear();
        continue;
      }
      if (layer != current)
        runs.emplace_back();
      current = layer;
      runs.back().push_back(&op);
    }
    return runs;
  }

  void outline(func::FuncOp func, SymbolTable &symbols) {
    OpBuilder moduleBuilder(func.getContext());
    moduleBuilder.setInsertionPointAfter(func);
    for (SmallVector<Operation *> &run : layerRuns(func)) {
      if (int64_t(run.size()) < minOps)
        continue;
      llvm::DenseSet<Operation *> members(run.begin(), run.end());
      // What the run reads from before it (constants are copied in, so
      // that layers with the same constants share a function) and what
      // the rest of the function reads from it.
      llvm::SetVector<Value> inputs, outputs;
      SmallVector<Operation *> constants;
      for (Operation *op : run) {
        SmallVector<Value> read(op->getOperands());
        for (Value v : read) {
          Operation *producer = v.getDefiningOp();
          if (producer && members.count(producer))
            continue;
          if (producer && producer->hasTrait<OpTrait::ConstantLike>()) {
            if (!llvm::is_contained(constants, producer))
              constants.push_back(producer);
            continue;
          }
          inputs.insert(v);
        }
        for (Value result : op->getResults())
          if (llvm::any_of(result.getUsers(), [&](Operation *user) {
                return !members.count(user);
              }))
            outputs.insert(result);
      }
      SmallVector<Type> inputTypes, outputTypes;
      for (Value v : inputs)
        inputTypes.push_back(v.getType());
      for (Value v : outputs)
        outputTypes.push_back(v.getType());
      auto type = FunctionType::get(func.getContext(), inputTypes, outputTypes);

      std::string name =
          (func.getSymName() + "_" +
           numberedLayerOf(run.front()->getLoc()).value_or("layer"))
              .str();
      auto callee = func::FuncOp::create(moduleBuilder, func.getLoc(),
                                         "weft_layer_candidate", type);
      callee.setPrivate();
      Block *entry = callee.addEntryBlock();
      OpBuilder b = OpBuilder::atBlockEnd(entry);
      IRMapping mapping;
      mapping.map(inputs.getArrayRef(), entry->getArguments());
      for (Operation *constant : constants)
        b.clone(*constant, mapping);
      for (Operation *op : run)
        b.clone(*op, mapping);
      SmallVector<Value> results;
      for (Value v : outputs)
        results.push_back(mapping.lookup(v));
      func::ReturnOp::create(b, func.getLoc(), results);

      func::FuncOp shared = findEquivalent(callee);
      if (shared) {
        callee.erase();
      } else {
        shared = callee;
        for (char &c : name)
          if (!llvm::isAlnum(c) && c != '_' && c != '.')
            c = '_';
        std::string unique = name;
        for (int i = 1; symbols.lookup(unique); ++i)
          unique = name + "_" + std::to_string(i);
        shared.setSymName(unique);
        symbols.insert(shared);
        outlined.push_back(shared);
        moduleBuilder.setInsertionPointAfter(shared);
      }

      OpBuilder callBuilder(run.front());
      auto call = func::CallOp::create(callBuilder, run.front()->getLoc(),
                                       shared, inputs.getArrayRef());
      for (auto [value, result] : llvm::zip(outputs, call.getResults()))
        Value(value).replaceAllUsesWith(result);
      for (Operation *op : llvm::reverse(run))
        op->erase();
    }
  }

  /// An outlined function computing what `candidate` does, if any.
  func::FuncOp findEquivalent(func::FuncOp candidate) {
    auto flags = OperationEquivalence::IgnoreLocations |
                 OperationEquivalence::IgnoreDiscardableAttrs;
    for (func::FuncOp existing : outlined)
      if (existing.getFunctionType() == candidate.getFunctionType() &&
          existing.getBody().front().getOperations().size() ==
              candidate.getBody().front().getOperations().size() &&
          OperationEquivalence::isRegionEquivalentTo(
              &existing.getBody(), &candidate.getBody(), flags))
        return existing;
    return {};
  }

  /// The functions made so far in this module.
  SmallVector<func::FuncOp> outlined;
};

} // namespace
