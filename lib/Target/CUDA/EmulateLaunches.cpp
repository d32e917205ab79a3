//===- EmulateLaunches.cpp - Test tool: kernels run on the CPU ------------===//

#include "weft/Target/CUDA/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/STLExtras.h"

namespace weft {
#define GEN_PASS_DEF_WEFTGPUEMULATELAUNCHES
#include "weft/Target/CUDA/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// The runtime's check (runtime/lib/EmulatedDevice.cpp): base, address,
/// bytes, whether it writes, the kernel's name; all i64.
constexpr llvm::StringLiteral kCheckAccess = "weft_emulation_check_access";

/// Ops whose meaning depends on threads running together.
bool synchronizesThreads(Operation *op) {
  return isa<gpu::BarrierOp, gpu::ShuffleOp, gpu::AllReduceOp,
             gpu::SubgroupReduceOp>(op);
}

/// Whether `memref` is memory of one thread (a stack buffer the kernel
/// made) rather than device memory.
bool isThreadPrivate(Value memref, gpu::LaunchOp launch) {
  while (auto view = memref.getDefiningOp<ViewLikeOpInterface>())
    memref = view.getViewSource();
  Operation *def = memref.getDefiningOp();
  return def && isa<memref::AllocaOp>(def) && launch->isProperAncestor(def);
}

/// How a launch is named in the emulation's messages: its function, its
/// place among the function's launches, and the model's node it computes.
std::string describeLaunch(gpu::LaunchOp launch, int64_t index) {
  std::string name;
  llvm::raw_string_ostream os(name);
  os << launch->getParentOfType<func::FuncOp>().getSymName() << " #" << index;
  Location loc = launch.getLoc();
  if (auto fused = dyn_cast<FusedLoc>(loc);
      fused && !fused.getLocations().empty())
    loc = fused.getLocations().front();
  if (auto named = dyn_cast<NameLoc>(loc))
    os << " (" << named.getName().getValue() << ")";
  else if (auto file = dyn_cast<FileLineColLoc>(loc))
    os << " (" << file.getFilename().getValue() << ":" << file.getLine() << ")";
  return name;
}

class AccessChecker {
public:
  explicit AccessChecker(ModuleOp module) : module(module) {}

  /// Inserts a call of the runtime's check before each load and store of
  /// device memory in `launch`; fails at an access it cannot check.
  LogicalResult instrument(gpu::LaunchOp launch, int64_t index);

private:
  ModuleOp module;
  int64_t names = 0;

  /// The address of a NUL-terminated copy of `text`, as i64, computed
  /// before `launch`.
  Value stringAddress(OpBuilder &b, gpu::LaunchOp launch, StringRef text);
  void checkAccess(OpBuilder &b, Location loc, Value memref, ValueRange indices,
                   bool isWrite, Value name);
  void declareCheck();
};

void AccessChecker::declareCheck() {
  if (module.lookupSymbol(kCheckAccess))
    return;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  Type i64 = b.getI64Type();
  auto type = b.getFunctionType({i64, i64, i64, i64, i64}, {});
  auto check = func::FuncOp::create(b, module.getLoc(), kCheckAccess, type);
  check.setPrivate();
}

Value AccessChecker::stringAddress(OpBuilder &b, gpu::LaunchOp launch,
                                   StringRef text) {
  Location loc = launch.getLoc();
  SmallVector<int8_t> bytes(text.begin(), text.end());
  bytes.push_back(0);
  auto type = MemRefType::get({int64_t(bytes.size())}, b.getI8Type());
  auto tensorType = RankedTensorType::get(type.getShape(), b.getI8Type());
  std::string symbol = "__weft_kernel_name_" + std::to_string(names++);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    memref::GlobalOp::create(
        b, loc, symbol, b.getStringAttr("private"), type,
        DenseElementsAttr::get(tensorType, ArrayRef<int8_t>(bytes)),
        /*constant=*/true, /*alignment=*/nullptr);
  }
  Value global = memref::GetGlobalOp::create(b, loc, type, symbol);
  Value address =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, global);
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), address);
}

void AccessChecker::checkAccess(OpBuilder &b, Location loc, Value memref,
                                ValueRange indices, bool isWrite, Value name) {
  auto type = cast<MemRefType>(memref.getType());
  Type element = type.getElementType();
  int64_t elementBytes =
      element.isIntOrFloat() ? (element.getIntOrFloatBitWidth() + 7) / 8 : 8;
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  // The element's place: offset + sum(index * stride), in elements.
  Value linear = metadata.getOffset();
  for (auto [index, stride] : llvm::zip(indices, metadata.getStrides()))
    linear = arith::AddIOp::create(
        b, loc, linear, arith::MulIOp::create(b, loc, index, stride));
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  Value bytes = arith::ConstantIndexOp::create(b, loc, elementBytes);
  Value address = arith::AddIOp::create(
      b, loc, base, arith::MulIOp::create(b, loc, linear, bytes));
  auto i64 = [&](Value index) -> Value {
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
  };
  Value write = arith::ConstantIntOp::create(b, loc, b.getI64Type(), isWrite);
  func::CallOp::create(
      b, loc, kCheckAccess, TypeRange(),
      ValueRange{i64(base), i64(address), i64(bytes), write, name});
}

LogicalResult AccessChecker::instrument(gpu::LaunchOp launch, int64_t index) {
  SmallVector<Operation *> accesses;
  WalkResult walk = launch.getBody().walk([&](Operation *op) {
    Value memref;
    if (auto load = dyn_cast<memref::LoadOp>(op))
      memref = load.getMemRef();
    else if (auto store = dyn_cast<memref::StoreOp>(op))
      memref = store.getMemRef();
    else if (auto rmw = dyn_cast<memref::AtomicRMWOp>(op))
      memref = rmw.getMemref();
    if (memref) {
      if (!isThreadPrivate(memref, launch))
        accesses.push_back(op);
      return WalkResult::advance();
    }
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    bool touchesBuffer = effects &&
                         (effects.hasEffect<MemoryEffects::Read>() ||
                          effects.hasEffect<MemoryEffects::Write>()) &&
                         llvm::any_of(op->getOperands(), [&](Value operand) {
                           return isa<MemRefType>(operand.getType()) &&
                                  !isThreadPrivate(operand, launch);
                         });
    if (!touchesBuffer)
      return WalkResult::advance();
    op->emitError("weft-gpu-emulate-launches: cannot check the device "
                  "memory accesses of this op");
    return WalkResult::interrupt();
  });
  if (walk.wasInterrupted())
    return failure();
  if (accesses.empty())
    return success();
  declareCheck();
  OpBuilder b(launch);
  Value name = stringAddress(b, launch, describeLaunch(launch, index));
  for (Operation *op : accesses) {
    b.setInsertionPoint(op);
    if (auto load = dyn_cast<memref::LoadOp>(op))
      checkAccess(b, op->getLoc(), load.getMemRef(), load.getIndices(),
                  /*isWrite=*/false, name);
    else if (auto store = dyn_cast<memref::StoreOp>(op))
      checkAccess(b, op->getLoc(), store.getMemRef(), store.getIndices(),
                  /*isWrite=*/true, name);
    else if (auto rmw = dyn_cast<memref::AtomicRMWOp>(op))
      checkAccess(b, op->getLoc(), rmw.getMemref(), rmw.getIndices(),
                  /*isWrite=*/true, name);
  }
  return success();
}

LogicalResult emulate(gpu::LaunchOp launch) {
  if (!launch.getWorkgroupAttributions().empty() ||
      !launch.getPrivateAttributions().empty())
    return launch.emitError("weft-gpu-emulate-launches: a kernel with "
                            "shared memory needs threads that run together");
  WalkResult walk = launch.getBody().walk([](Operation *op) {
    if (!synchronizesThreads(op))
      return WalkResult::advance();
    op->emitError("weft-gpu-emulate-launches: this op synchronizes the "
                  "threads of a block, which the emulation runs one at a "
                  "time");
    return WalkResult::interrupt();
  });
  if (walk.wasInterrupted())
    return failure();
  OpBuilder b(launch);
  Location loc = launch.getLoc();
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  IRMapping mapping;
  gpu::KernelDim3 blockIds = launch.getBlockIds();
  gpu::KernelDim3 threadIds = launch.getThreadIds();
  gpu::KernelDim3 gridArgs = launch.getGridSize();
  gpu::KernelDim3 blockArgs = launch.getBlockSize();
  for (auto [arg, value] : {std::pair{gridArgs.x, grid.x},
                            {gridArgs.y, grid.y},
                            {gridArgs.z, grid.z},
                            {blockArgs.x, block.x},
                            {blockArgs.y, block.y},
                            {blockArgs.z, block.z}})
    mapping.map(arg, value);
  // Blocks, then the threads of each block, z outermost.
  for (auto [id, bound] : {std::pair{blockIds.z, grid.z},
                           {blockIds.y, grid.y},
                           {blockIds.x, grid.x},
                           {threadIds.z, block.z},
                           {threadIds.y, block.y},
                           {threadIds.x, block.x}}) {
    auto loop = scf::ForOp::create(b, loc, zero, bound, one);
    mapping.map(id, loop.getInductionVar());
    b.setInsertionPoint(loop.getBody()->getTerminator());
  }
  for (Operation &op : launch.getBody().front().without_terminator())
    b.clone(op, mapping);
  launch.erase();
  return success();
}

struct WeftGpuEmulateLaunchesPass
    : public weft::impl::WeftGpuEmulateLaunchesBase<
          WeftGpuEmulateLaunchesPass> {
  using WeftGpuEmulateLaunchesBase::WeftGpuEmulateLaunchesBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<gpu::LaunchOp, gpu::AllocOp, gpu::DeallocOp, gpu::MemcpyOp>(op))
        ops.push_back(op);
    });
    AccessChecker checker(module);
    llvm::DenseMap<Operation *, int64_t> launchesPerFunction;
    IRRewriter rewriter(&getContext());
    for (Operation *op : ops) {
      rewriter.setInsertionPoint(op);
      if (auto launch = dyn_cast<gpu::LaunchOp>(op)) {
        int64_t index =
            launchesPerFunction[launch->getParentOfType<func::FuncOp>()]++;
        if ((checkAccesses && failed(checker.instrument(launch, index))) ||
            failed(emulate(launch)))
          return signalPassFailure();
      } else if (auto alloc = dyn_cast<gpu::AllocOp>(op)) {
        rewriter.replaceOpWithNewOp<memref::AllocOp>(
            alloc, alloc.getMemref().getType(), alloc.getDynamicSizes(),
            alloc.getSymbolOperands());
      } else if (auto dealloc = dyn_cast<gpu::DeallocOp>(op)) {
        rewriter.replaceOpWithNewOp<memref::DeallocOp>(dealloc,
                                                       dealloc.getMemref());
      } else if (auto copy = dyn_cast<gpu::MemcpyOp>(op)) {
        rewriter.replaceOpWithNewOp<memref::CopyOp>(copy, copy.getSrc(),
                                                    copy.getDst());
      }
    }
  }
};

} // namespace
