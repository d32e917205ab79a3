//===- OutlineLayers.cpp - One function per distinct layer ----------------===//
//
// A transformer's layers are the same computation on different weights.
// Each run of consecutive ops of one layer becomes a call of a private
// function, and runs that compute the same thing share it, so LLVM compiles
// a layer once however deep the model is. A fused attention's head-major
// tensors do not cross a run's boundary: the run returns the tensor they
// are views of, and the views are rebuilt where they are used, so that the
// attention reads and writes views, not copies (weft-fold-transposes).
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/Layers.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
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
    for (func::FuncOp func : functions) {
      for (SmallVector<Operation *> &run : layerRuns(func))
        if (int64_t(run.size()) >= minOps)
          keepHeadViewsInside(run);
      outline(func, symbols);
    }
  }

  /// The uses of `value` outside `run` (its members), if all of them are
  /// ops of the block's top level in runs of the same layer, else nothing.
  static std::optional<SmallVector<OpOperand *>>
  usesInSameLayer(Value value, const llvm::DenseSet<Operation *> &members,
                  StringRef layer) {
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (members.count(user))
        continue;
      if (user->getBlock() != value.getParentBlock() ||
          numberedLayerOf(user->getLoc()).value_or("") != layer)
        return std::nullopt;
      uses.push_back(&use);
    }
    return uses;
  }

  /// The first of `uses`' owners in their block.
  static Operation *firstUser(ArrayRef<OpOperand *> uses) {
    Operation *first = uses.front()->getOwner();
    for (OpOperand *use : uses)
      if (use->getOwner()->isBeforeInBlock(first))
        first = use->getOwner();
    return first;
  }

  /// Rewrites the uses outside `run` of a fused attention's inputs and
  /// result (head-major views of the layer's projections) into uses of
  /// views rebuilt there: of the projection an input is a view of (the
  /// q, k, v of GPT-2's one [b, s, 3·h·d] projection), of the head-merged
  /// tensor the result is viewed as. The run then returns the projections,
  /// whose bytes the views share, instead of copies in head-major order.
  void keepHeadViewsInside(ArrayRef<Operation *> run) {
    llvm::DenseSet<Operation *> members(run.begin(), run.end());
    std::string layer = numberedLayerOf(run.front()->getLoc()).value_or("");
    auto isView = [&](Operation *op) {
      return op && members.count(op) &&
             isa<TransposeOp, ReshapeOp, SplitOp>(op);
    };
    // Inputs: the views from a root (the projection) to each input that
    // leaves the run, rebuilt from the root when the inputs leaving cover
    // the root's elements (the run returns no more than it did).
    llvm::MapVector<Value,
                    SmallVector<std::pair<Value, SmallVector<OpOperand *>>>>
        leavingByRoot;
    SmallVector<std::pair<Value, Value>> leavingResults; // result, merged
    for (Operation *op : run) {
      if (!isa<AttentionOp>(op))
        continue;
      auto attention = cast<AttentionOp>(op);
      for (Value input :
           {attention.getQuery(), attention.getKey(), attention.getValue()}) {
        if (!isView(input.getDefiningOp()))
          continue;
        auto uses = usesInSameLayer(input, members, layer);
        if (!uses || uses->empty())
          continue;
        // A view between the root and the input that leaves the run too
        // would be returned besides the root.
        Value root = input;
        bool viewLeaves = false;
        while (isView(root.getDefiningOp())) {
          root = root.getDefiningOp()->getOperand(0);
          viewLeaves |= isView(root.getDefiningOp()) &&
                        llvm::any_of(root.getUsers(), [&](Operation *user) {
                          return !members.count(user);
                        });
        }
        if (viewLeaves || !cast<ShapedType>(root.getType()).hasStaticShape() ||
            !cast<ShapedType>(input.getType()).hasStaticShape())
          continue;
        auto &leaving = leavingByRoot[root];
        if (llvm::none_of(leaving, [&](auto &l) { return l.first == input; }))
          leaving.push_back({input, std::move(*uses)});
      }
      // The result: its only use in the run the first of a chain of
      // transposes and reshapes (each the only use of the one before).
      Value result = attention.getResult();
      Value merged = result;
      while (true) {
        SmallVector<Operation *> inside;
        for (Operation *user : merged.getUsers())
          if (members.count(user))
            inside.push_back(user);
        if (inside.size() != 1 || !isa<TransposeOp, ReshapeOp>(inside[0]) ||
            (merged != result && !merged.hasOneUse()))
          break;
        merged = inside[0]->getResult(0);
      }
      if (merged != result)
        leavingResults.push_back({result, merged});
    }
    for (auto &[root, leaving] : leavingByRoot) {
      int64_t elements = 0;
      for (auto &entry : leaving)
        elements += cast<ShapedType>(entry.first.getType()).getNumElements();
      // A root from before the run, or one it returns anyway, costs nothing.
      bool rootLeavesAnyway =
          !members.count(root.getDefiningOp()) ||
          llvm::any_of(root.getUsers(),
                       [&](Operation *user) { return !members.count(user); });
      if (!rootLeavesAnyway &&
          elements < cast<ShapedType>(root.getType()).getNumElements())
        continue;
      SmallVector<OpOperand *> all;
      for (auto &entry : leaving)
        all.append(entry.second);
      OpBuilder b(firstUser(all));
      IRMapping mapping;
      for (auto &[input, uses] : leaving) {
        // The views from the root to this input, rebuilt once each.
        SmallVector<Operation *> chain;
        for (Value v = input; v != root; v = v.getDefiningOp()->getOperand(0))
          chain.push_back(v.getDefiningOp());
        for (Operation *view : llvm::reverse(chain))
          if (!mapping.contains(view->getResult(0)))
            b.clone(*view, mapping);
        Value rebuilt = mapping.lookup(input);
        for (OpOperand *use : uses)
          use->set(rebuilt);
      }
    }
    for (auto [result, merged] : leavingResults) {
      auto uses = usesInSameLayer(result, members, layer);
      if (!uses || uses->empty())
        continue;
      // The inverse views, from the merged tensor back to the result.
      SmallVector<Operation *> chain;
      for (Value v = merged; v != result; v = v.getDefiningOp()->getOperand(0))
        chain.push_back(v.getDefiningOp());
      OpBuilder b(firstUser(*uses));
      Value rebuilt = merged;
      for (Operation *view : chain) {
        Location loc = view->getLoc();
        if (auto transpose = dyn_cast<TransposeOp>(view)) {
          SmallVector<int64_t> inverse(transpose.getPermutation().size());
          for (auto [i, p] : llvm::enumerate(transpose.getPermutation()))
            inverse[p] = i;
          rebuilt = TransposeOp::create(b, loc, rebuilt, inverse);
        } else {
          rebuilt =
              ReshapeOp::create(b, loc, view->getOperand(0).getType(), rebuilt);
        }
      }
      for (OpOperand *use : *uses)
        use->set(rebuilt);
    }
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
