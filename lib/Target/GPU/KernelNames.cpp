//===- KernelNames.cpp - Kernel names PTX accepts -------------------------===//

#include "weft/Target/GPU/Passes.h"

#include "mlir/IR/SymbolTable.h"

namespace weft {
#define GEN_PASS_DEF_WEFTGPUKERNELNAMES
#include "weft/Target/GPU/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

std::string ptxIdentifier(StringRef name) {
  std::string id = name.str();
  for (char &c : id)
    if (!llvm::isAlnum(c) && c != '_' && c != '$')
      c = '_';
  if (id.empty() || llvm::isDigit(id.front()))
    id.insert(id.begin(), '_');
  return id;
}

/// Renames the symbols of `table` that PTX would reject, and their uses
/// under `root`.
LogicalResult renameIn(Operation *table, Operation *root) {
  SymbolTable symbols(table);
  SmallVector<Operation *> renamed;
  for (Region &region : table->getRegions())
    for (Operation &op : region.getOps())
      if (auto name =
              op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName());
          name && isa<gpu::GPUModuleOp, gpu::GPUFuncOp>(op) &&
          ptxIdentifier(name.getValue()) != name.getValue())
        renamed.push_back(&op);
  for (Operation *op : renamed) {
    std::string base = ptxIdentifier(SymbolTable::getSymbolName(op));
    std::string name = base;
    for (int n = 1; symbols.lookup(name); ++n)
      name = base + "_" + std::to_string(n);
    auto attr = StringAttr::get(op->getContext(), name);
    // A kernel is named from the host module as @module::@kernel.
    if (failed(SymbolTable::replaceAllSymbolUses(op, attr, root)))
      return op->emitError("weft-gpu-kernel-names: cannot rename its uses");
    symbols.remove(op);
    SymbolTable::setSymbolName(op, attr);
    symbols.insert(op);
  }
  return success();
}

struct WeftGpuKernelNamesPass
    : public weft::impl::WeftGpuKernelNamesBase<WeftGpuKernelNamesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(renameIn(module, module)))
      return signalPassFailure();
    for (auto gpuModule : module.getOps<gpu::GPUModuleOp>())
      if (failed(renameIn(gpuModule, module)))
        return signalPassFailure();
  }
};

} // namespace
