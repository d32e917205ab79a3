//===- EmulateLaunches.cpp - Test tool: kernels run on the CPU ------------===//

#include "LaunchMemory.h"

#include "weft/Dialect/Weft/IR/TargetAttrNames.h"
#include "weft/Lowering/Memrefs.h"
#include "weft/Target/GPU/Passes.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

namespace weft {
#define GEN_PASS_DEF_WEFTGPUEMULATELAUNCHES
#include "weft/Target/GPU/Passes.h.inc"
} // namespace weft

using namespace mlir;
using weft::isThreadPrivate;

namespace {

// The emulation runtime's checks and marks (runtime/lib/emulation).
constexpr const char *kCheckAccess = weft::runtime::kEmulatedCheckAccess;
constexpr const char *kCheckAlignment = weft::runtime::kEmulatedCheckAlignment;
constexpr const char *kLaunchMark = weft::runtime::kEmulatedLaunchMark;
constexpr const char *kLaunchPartMark = weft::runtime::kEmulatedLaunchPartMark;
constexpr const char *kDeviceConstant = weft::runtime::kEmulatedDeviceConstant;

/// Makes the constants `launch`'s kernel reads from its own image
/// (weft-gpu-device-memory) device memory before it runs: a GPU loads them
/// with the kernel's module.
void registerKernelConstants(OpBuilder &b, ModuleOp module,
                             gpu::LaunchOp launch) {
  llvm::SetVector<StringRef> constants;
  launch.getBody().walk(
      [&](memref::GetGlobalOp global) { constants.insert(global.getName()); });
  if (constants.empty())
    return;
  Type i64 = b.getI64Type();
  if (!module.lookupSymbol(kDeviceConstant)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    auto declaration = func::FuncOp::create(b, module.getLoc(), kDeviceConstant,
                                            b.getFunctionType({i64, i64}, {}));
    declaration.setPrivate();
  }
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(launch);
  Location loc = launch.getLoc();
  for (StringRef symbol : constants) {
    auto global = module.lookupSymbol<memref::GlobalOp>(symbol);
    MemRefType type = global.getType();
    Value host = memref::GetGlobalOp::create(b, loc, type, symbol);
    Value address = arith::IndexCastOp::create(
        b, loc, i64,
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, host));
    Value bytes = arith::ConstantIntOp::create(
        b, loc, i64, type.getNumElements() * weft::elementBytes(type));
    func::CallOp::create(b, loc, kDeviceConstant, TypeRange(),
                         ValueRange{address, bytes});
  }
}

/// Calls kLaunchMark before `op` when the kernel report numbered it.
void markLaunch(OpBuilder &b, ModuleOp module, Operation *op) {
  auto id = op->getAttrOfType<IntegerAttr>(weft::kLaunchIdAttrName);
  if (!id)
    return;
  if (!module.lookupSymbol(kLaunchMark)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto mark = func::FuncOp::create(b, module.getLoc(), kLaunchMark,
                                     b.getFunctionType({b.getI64Type()}, {}));
    mark.setPrivate();
  }
  b.setInsertionPoint(op);
  Value number = arith::ConstantIntOp::create(b, op->getLoc(), b.getI64Type(),
                                              id.getInt());
  func::CallOp::create(b, op->getLoc(), kLaunchMark, TypeRange(),
                       ValueRange{number});
}

/// Calls kLaunchPartMark before `part`.
void markLaunchPart(OpBuilder &b, ModuleOp module, gpu::LaunchOp part) {
  if (!module.lookupSymbol(kLaunchPartMark)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto mark = func::FuncOp::create(b, module.getLoc(), kLaunchPartMark,
                                     b.getFunctionType({}, {}));
    mark.setPrivate();
  }
  b.setInsertionPoint(part);
  func::CallOp::create(b, part.getLoc(), kLaunchPartMark, TypeRange(),
                       ValueRange{});
}

/// Ops after which the threads of a block continue together: the emulation
/// runs every thread up to one before any runs past it.
bool isSyncPoint(Operation *op) {
  return isa<gpu::BarrierOp, gpu::ShuffleOp>(op);
}

/// Ops whose meaning depends on threads running together.
bool synchronizesThreads(Operation *op) {
  return isSyncPoint(op) || isa<gpu::AllReduceOp, gpu::SubgroupReduceOp>(op);
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
  /// device memory in `launch`, which its messages call `name`; fails at
  /// an access it cannot check.
  LogicalResult instrument(gpu::LaunchOp launch, StringRef name);
  /// Replaces each alignment `launch` states of a buffer
  /// (weft-gpu-assume-alignment) with a call of the runtime's check: a
  /// wrong one would make the kernel's accesses poison on a GPU.
  void checkAlignments(gpu::LaunchOp launch, StringRef name);

private:
  ModuleOp module;
  int64_t names = 0;

  /// The address of a NUL-terminated copy of `text`, as i64, computed
  /// before `launch`.
  Value stringAddress(OpBuilder &b, gpu::LaunchOp launch, StringRef text);
  void checkAccess(OpBuilder &b, Location loc, Value memref, ValueRange indices,
                   bool isWrite, Value name);
  void declareCheck();
  /// The address of the first byte of `memref`'s view, as index.
  Value firstByte(OpBuilder &b, Location loc, Value memref);
};

Value AccessChecker::firstByte(OpBuilder &b, Location loc, Value memref) {
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  Value bytes = arith::ConstantIndexOp::create(
      b, loc, weft::elementBytes(memref.getType()));
  return arith::AddIOp::create(
      b, loc, base, arith::MulIOp::create(b, loc, metadata.getOffset(), bytes));
}

void AccessChecker::checkAlignments(gpu::LaunchOp launch,
                                    StringRef kernelName) {
  SmallVector<memref::AssumeAlignmentOp> assumptions;
  launch.getBody().walk(
      [&](memref::AssumeAlignmentOp op) { assumptions.push_back(op); });
  if (assumptions.empty())
    return;
  OpBuilder b(launch);
  if (!module.lookupSymbol(kCheckAlignment)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    Type i64 = b.getI64Type();
    auto check = func::FuncOp::create(b, module.getLoc(), kCheckAlignment,
                                      b.getFunctionType({i64, i64, i64}, {}));
    check.setPrivate();
  }
  Value name = stringAddress(b, launch, kernelName);
  for (memref::AssumeAlignmentOp assumption : assumptions) {
    Value buffer = assumption.getMemref();
    // A buffer the kernel takes from host code is checked once, before it.
    if (launch.getBody().isAncestor(buffer.getParentRegion()))
      b.setInsertionPoint(assumption);
    else
      b.setInsertionPoint(launch);
    Location loc = assumption.getLoc();
    auto i64 = [&](Value index) -> Value {
      return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
    };
    Value alignment = arith::ConstantIntOp::create(b, loc, b.getI64Type(),
                                                   assumption.getAlignment());
    func::CallOp::create(
        b, loc, kCheckAlignment, TypeRange(),
        ValueRange{i64(firstByte(b, loc, buffer)), alignment, name});
    assumption.replaceAllUsesWith(buffer);
    assumption.erase();
  }
}

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
  int64_t elementBytes = weft::elementBytes(type);
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

LogicalResult AccessChecker::instrument(gpu::LaunchOp launch,
                                        StringRef kernelName) {
  SmallVector<Operation *> accesses;
  WalkResult walk = launch.getBody().walk([&](Operation *op) {
    if (isa<memref::LoadOp, memref::StoreOp, memref::AtomicRMWOp>(op)) {
      if (weft::deviceMemoryAccessed(op, launch))
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
  Value name = stringAddress(b, launch, kernelName);
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

/// A launch run as loops: its blocks one after another, and within a block
/// its threads phase by phase. A phase ends at each barrier and before each
/// shuffle, so that every thread has reached it before any goes on (loop
/// fission at barriers). Values a later phase reads are kept per thread;
/// a shuffle reads its partner's value from a slot each thread fills at the
/// end of the phase before.
class PhasedLaunch {
public:
  explicit PhasedLaunch(gpu::LaunchOp launch) : launch(launch) {}
  LogicalResult emulate();

private:
  gpu::LaunchOp launch;
  /// The kernel's top-level ops in phases; a shuffle starts its phase.
  SmallVector<SmallVector<Operation *>> phases;
  /// The phase of each top-level op.
  llvm::DenseMap<Operation *, unsigned> phaseOf;
  /// Values of one phase that later phases read, with their per-thread
  /// storage once allocated.
  llvm::MapVector<Value, Value> carried;
  /// Per phase: the carried values it reloads, and the pure ops of earlier
  /// phases (views, index arithmetic on them) it recomputes instead.
  SmallVector<llvm::SetVector<Value>> reads;
  SmallVector<llvm::SetVector<Operation *>> recomputed;
  /// Each shuffle's slots: the value each thread offers its partners.
  llvm::DenseMap<Operation *, Value> slots;

  LogicalResult split();
  /// Makes `value` available in phase `p`.
  LogicalResult need(Value value, unsigned p);
  void emitPhase(OpBuilder &b, unsigned p, IRMapping mapping, Value tid);
  /// The shuffle's result and validity for thread `tid`.
  std::pair<Value, Value> emitShuffle(OpBuilder &b, gpu::ShuffleOp shuffle,
                                      const IRMapping &mapping, Value tid);
};

LogicalResult PhasedLaunch::split() {
  Block &body = launch.getBody().front();
  WalkResult nested = body.walk([&](Operation *op) {
    if (!synchronizesThreads(op) ||
        (isSyncPoint(op) && op->getBlock() == &body))
      return WalkResult::advance();
    op->emitError("weft-gpu-emulate-launches: the emulation runs a block's "
                  "threads phase by phase between barriers and shuffles, "
                  "which must be at the kernel's top level");
    return WalkResult::interrupt();
  });
  if (nested.wasInterrupted())
    return failure();
  phases.emplace_back();
  for (Operation &op : body.without_terminator()) {
    if (isa<gpu::BarrierOp>(op)) {
      phases.emplace_back();
      continue;
    }
    if (isa<gpu::ShuffleOp>(op) && !phases.back().empty())
      phases.emplace_back();
    phaseOf[&op] = phases.size() - 1;
    phases.back().push_back(&op);
  }
  // What crosses a phase boundary: a value used by a later phase, and the
  // value each shuffle offers (stored at the end of the phase before).
  reads.resize(phases.size());
  recomputed.resize(phases.size());
  for (auto [p, ops] : llvm::enumerate(phases)) {
    for (Operation *op : ops) {
      WalkResult walk = op->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          if (failed(need(operand, p)))
            return WalkResult::interrupt();
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return failure();
    }
    if (p + 1 < phases.size())
      if (auto shuffle = dyn_cast<gpu::ShuffleOp>(phases[p + 1].front()))
        if (failed(need(shuffle.getValue(), p)))
          return failure();
  }
  // The recomputed ops run in program order.
  for (auto &ops : recomputed) {
    SmallVector<Operation *> sorted(ops.begin(), ops.end());
    llvm::sort(sorted, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    ops = llvm::SetVector<Operation *>(sorted.begin(), sorted.end());
  }
  return success();
}

LogicalResult PhasedLaunch::need(Value value, unsigned p) {
  Operation *def = value.getDefiningOp();
  auto phase = def ? phaseOf.find(def) : phaseOf.end();
  if (phase == phaseOf.end() || phase->second >= p)
    return success();
  if (value.getType().isIntOrIndexOrFloat()) {
    carried.insert({value, Value()});
    reads[p].insert(value);
    return success();
  }
  if (def->getNumRegions() || !isMemoryEffectFree(def))
    return def->emitError("weft-gpu-emulate-launches: a value of this type "
                          "cannot be kept across a barrier or shuffle");
  if (!recomputed[p].insert(def))
    return success();
  for (Value operand : def->getOperands())
    if (failed(need(operand, p)))
      return failure();
  return success();
}

std::pair<Value, Value> PhasedLaunch::emitShuffle(OpBuilder &b,
                                                  gpu::ShuffleOp shuffle,
                                                  const IRMapping &mapping,
                                                  Value tid) {
  Location loc = shuffle.getLoc();
  auto index = [&](Value v) -> Value {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                      mapping.lookupOrDefault(v));
  };
  Value offset = index(shuffle.getOffset());
  Value width = index(shuffle.getWidth());
  Value warpSize = arith::ConstantIndexOp::create(b, loc, 32);
  Value lane = arith::RemUIOp::create(b, loc, tid, warpSize);
  Value partner;
  Value valid;
  switch (shuffle.getMode()) {
  case gpu::ShuffleMode::XOR:
    partner = arith::XOrIOp::create(b, loc, lane, offset);
    valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, partner,
                                  width);
    break;
  case gpu::ShuffleMode::DOWN:
    partner = arith::AddIOp::create(b, loc, lane, offset);
    valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, partner,
                                  width);
    break;
  case gpu::ShuffleMode::UP:
    valid =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, lane, offset);
    partner = arith::SelectOp::create(
        b, loc, valid, arith::SubIOp::create(b, loc, lane, offset), lane);
    break;
  case gpu::ShuffleMode::IDX:
    partner = offset;
    valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, partner,
                                  width);
    break;
  }
  // An invalid partner leaves the thread its own value.
  Value source = arith::SelectOp::create(
      b, loc, valid,
      arith::AddIOp::create(b, loc, arith::SubIOp::create(b, loc, tid, lane),
                            partner),
      tid);
  Value value = memref::LoadOp::create(b, loc, slots.lookup(shuffle), source);
  Value result = arith::SelectOp::create(
      b, loc, valid, value, mapping.lookupOrDefault(shuffle.getValue()));
  return {result, valid};
}

void PhasedLaunch::emitPhase(OpBuilder &b, unsigned p, IRMapping mapping,
                             Value tid) {
  Location loc = launch.getLoc();
  for (Value read : reads[p])
    mapping.map(read,
                memref::LoadOp::create(b, loc, carried.lookup(read), tid));
  for (Operation *op : recomputed[p])
    b.clone(*op, mapping);
  for (Operation *op : phases[p]) {
    if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op)) {
      auto [value, valid] = emitShuffle(b, shuffle, mapping, tid);
      mapping.map(shuffle.getShuffleResult(), value);
      mapping.map(shuffle.getValid(), valid);
      continue;
    }
    b.clone(*op, mapping);
  }
  for (Operation *op : phases[p])
    for (Value result : op->getResults())
      if (Value storage = carried.lookup(result))
        memref::StoreOp::create(b, loc, mapping.lookup(result), storage, tid);
  if (p + 1 < phases.size())
    if (auto shuffle = dyn_cast<gpu::ShuffleOp>(phases[p + 1].front()))
      memref::StoreOp::create(b, loc,
                              mapping.lookupOrDefault(shuffle.getValue()),
                              slots.lookup(shuffle), tid);
}

LogicalResult PhasedLaunch::emulate() {
  if (!launch.getPrivateAttributions().empty())
    return launch.emitError("weft-gpu-emulate-launches: a kernel with "
                            "private memory attributions");
  // Constants need no per-thread copies: they move out of the kernel.
  for (Operation &op : llvm::make_early_inc_range(
           launch.getBody().front().without_terminator()))
    if (op.hasTrait<OpTrait::ConstantLike>())
      op.moveBefore(launch);
  if (failed(split()))
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
  // The memory of a block, allocated once for all of them: its shared
  // memory, and per thread what crosses a phase boundary.
  Value threads = arith::MulIOp::create(
      b, loc, arith::MulIOp::create(b, loc, block.x, block.y), block.z);
  SmallVector<Value> blockMemory;
  for (BlockArgument shared : launch.getWorkgroupAttributions()) {
    auto type = cast<MemRefType>(shared.getType());
    auto hostType = MemRefType::get(type.getShape(), type.getElementType());
    blockMemory.push_back(memref::AllocOp::create(b, loc, hostType));
    mapping.map(shared, blockMemory.back());
  }
  auto perThread = [&](Type element) {
    blockMemory.push_back(memref::AllocOp::create(
        b, loc, MemRefType::get({ShapedType::kDynamic}, element),
        ValueRange{threads}));
    return blockMemory.back();
  };
  for (auto &[value, storage] : carried)
    storage = perThread(value.getType());
  for (auto &phase : phases)
    if (auto shuffle = dyn_cast<gpu::ShuffleOp>(phase.front()))
      slots[shuffle] = perThread(shuffle.getValue().getType());
  OpBuilder::InsertPoint afterBlocks;
  // Blocks one after another, z outermost, the last first: a GPU runs a
  // launch's blocks in no order, and a kernel whose blocks depend on one
  // another (parts merged by weft-gpu-merge-launches that were not
  // independent) then computes wrong numbers here too.
  for (auto [id, bound] : {std::pair{blockIds.z, grid.z},
                           {blockIds.y, grid.y},
                           {blockIds.x, grid.x}}) {
    auto loop = scf::ForOp::create(b, loc, zero, bound, one);
    if (!afterBlocks.isSet())
      afterBlocks = OpBuilder::InsertPoint(loop->getBlock(),
                                           std::next(loop->getIterator()));
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value last = arith::SubIOp::create(b, loc, bound, one);
    mapping.map(id,
                arith::SubIOp::create(b, loc, last, loop.getInductionVar()));
  }
  for (unsigned p = 0; p < phases.size(); ++p) {
    OpBuilder::InsertionGuard guard(b);
    IRMapping threadMapping = mapping;
    for (auto [id, bound] : {std::pair{threadIds.z, block.z},
                             {threadIds.y, block.y},
                             {threadIds.x, block.x}}) {
      auto loop = scf::ForOp::create(b, loc, zero, bound, one);
      threadMapping.map(id, loop.getInductionVar());
      b.setInsertionPoint(loop.getBody()->getTerminator());
    }
    // The thread's linear id: x fastest, as CUDA numbers lanes.
    Value tid = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(
            b, loc,
            arith::AddIOp::create(
                b, loc,
                arith::MulIOp::create(b, loc, threadMapping.lookup(threadIds.z),
                                      block.y),
                threadMapping.lookup(threadIds.y)),
            block.x),
        threadMapping.lookup(threadIds.x));
    emitPhase(b, p, threadMapping, tid);
  }
  b.restoreInsertionPoint(afterBlocks);
  for (Value memory : blockMemory)
    memref::DeallocOp::create(b, loc, memory);
  launch.erase();
  return success();
}

/// Moves `launch` into a function of its own, `name`, called where the
/// launch was: the values it uses become arguments, constants are copied
/// in. A host function with hundreds of emulated kernels in its body would
/// cost LLVM time superlinear in its size; a GPU's kernels are functions
/// too. The function is never inlined; `symbols` renames it where the
/// name is taken.
gpu::LaunchOp outlineLaunch(gpu::LaunchOp launch, StringRef name,
                            SymbolTable &symbols, OpBuilder &b) {
  llvm::SetVector<Value> used(launch->getOperands().begin(),
                              launch->getOperands().end());
  getUsedValuesDefinedAbove(launch.getBody(), used);
  SmallVector<Value> arguments;
  SmallVector<Operation *> constants;
  for (Value value : used) {
    Operation *def = value.getDefiningOp();
    if (def && def->hasTrait<OpTrait::ConstantLike>())
      constants.push_back(def);
    else
      arguments.push_back(value);
  }
  auto host = launch->getParentOfType<func::FuncOp>();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfter(host);
  auto kernel = func::FuncOp::create(
      b, launch.getLoc(), name,
      b.getFunctionType(ValueRange(arguments).getTypes(), {}));
  kernel.setPrivate();
  symbols.insert(kernel);
  kernel->setAttr("passthrough", b.getArrayAttr({b.getStringAttr("noinline")}));
  Block *body = kernel.addEntryBlock();
  b.setInsertionPointToStart(body);
  IRMapping mapping;
  mapping.map(arguments, body->getArguments());
  for (Operation *constant : constants)
    b.clone(*constant, mapping);
  auto outlined = cast<gpu::LaunchOp>(b.clone(*launch, mapping));
  func::ReturnOp::create(b, launch.getLoc());
  b.setInsertionPoint(launch);
  func::CallOp::create(b, launch.getLoc(), kernel, arguments);
  launch.erase();
  return outlined;
}

/// A merged launch (weft-gpu-merge-launches) as one launch per part, the
/// last part first: the blocks still run last first, and each part's
/// barriers are at its kernel's top level again. Each part's copy of the
/// dispatch keeps only the branch its block ids take.
SmallVector<gpu::LaunchOp> splitMergedLaunch(gpu::LaunchOp launch,
                                             OpBuilder &b) {
  auto starts =
      launch->getAttrOfType<DenseI64ArrayAttr>(weft::kBlockSegmentsAttrName);
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  std::optional<int64_t> total = getConstantIntValue(grid.x);
  if (!starts || !total)
    return {launch};
  Location loc = launch.getLoc();
  SmallVector<Type> shared, private_;
  for (BlockArgument attribution : launch.getWorkgroupAttributions())
    shared.push_back(attribution.getType());
  for (BlockArgument attribution : launch.getPrivateAttributions())
    private_.push_back(attribution.getType());
  SmallVector<gpu::LaunchOp> parts;
  for (int64_t k = int64_t(starts.size()) - 1; k >= 0; --k) {
    int64_t begin = starts[k],
            end = k + 1 < int64_t(starts.size()) ? starts[k + 1] : *total;
    if (begin >= end)
      continue;
    b.setInsertionPoint(launch);
    Value blocks = arith::ConstantIndexOp::create(b, loc, end - begin);
    auto part = gpu::LaunchOp::create(
        b, loc, blocks, grid.y, grid.z, block.x, block.y, block.z,
        /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
        /*asyncDependencies=*/{}, shared, private_);
    IRMapping mapping;
    for (auto [from, to] : llvm::zip(launch.getBody().getArguments(),
                                     part.getBody().getArguments()))
      mapping.map(from, to);
    OpBuilder::InsertionGuard guard(b);
    Block &body = part.getBody().front();
    b.setInsertionPointToStart(&body);
    Value id = part.getBlockIds().x;
    if (begin)
      id = arith::AddIOp::create(b, loc, id,
                                 arith::ConstantIndexOp::create(b, loc, begin));
    mapping.map(launch.getBlockIds().x, id);
    for (Operation &op : launch.getBody().front())
      b.clone(op, mapping);
    for (bool folded = true; folded;) {
      folded = false;
      for (auto branch : body.getOps<scf::IfOp>()) {
        auto below = branch.getCondition().getDefiningOp<arith::CmpIOp>();
        std::optional<int64_t> bound =
            below ? getConstantIntValue(below.getRhs()) : std::nullopt;
        if (!bound || below.getPredicate() != arith::CmpIPredicate::ult ||
            below.getLhs() != id || (*bound > begin && *bound < end))
          continue;
        Block *taken = *bound >= end ? branch.thenBlock() : branch.elseBlock();
        if (taken)
          for (Operation &op :
               llvm::make_early_inc_range(taken->without_terminator()))
            op.moveBefore(branch);
        branch.erase();
        folded = true;
        break;
      }
    }
    parts.push_back(part);
  }
  launch.erase();
  return parts;
}

struct WeftGpuEmulateLaunchesPass
    : public weft::impl::WeftGpuEmulateLaunchesBase<
          WeftGpuEmulateLaunchesPass> {
  using WeftGpuEmulateLaunchesBase::WeftGpuEmulateLaunchesBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<gpu::LaunchOp, gpu::AllocOp, gpu::DeallocOp, gpu::MemcpyOp>(op) ||
          (isa<func::CallOp>(op) && op->hasAttr(weft::kLaunchIdAttrName)))
        ops.push_back(op);
    });
    AccessChecker checker(module);
    SymbolTable symbols(module);
    llvm::DenseMap<Operation *, int64_t> launchesPerFunction;
    IRRewriter rewriter(&getContext());
    for (Operation *op : ops) {
      markLaunch(rewriter, module, op);
      rewriter.setInsertionPoint(op);
      if (auto launch = dyn_cast<gpu::LaunchOp>(op)) {
        auto host = launch->getParentOfType<func::FuncOp>();
        int64_t index = launchesPerFunction[host]++;
        std::string name = describeLaunch(launch, index);
        checker.checkAlignments(launch, name);
        registerKernelConstants(rewriter, module, launch);
        launch = outlineLaunch(
            launch,
            (host.getSymName() + "_kernel_" + std::to_string(index)).str(),
            symbols, rewriter);
        SmallVector<gpu::LaunchOp> parts = splitMergedLaunch(launch, rewriter);
        for (auto [k, part] : llvm::enumerate(parts)) {
          if (k)
            markLaunchPart(rewriter, module, part);
          if ((checkAccesses && failed(checker.instrument(part, name))) ||
              failed(PhasedLaunch(part).emulate()))
            return signalPassFailure();
        }
      } else if (auto alloc = dyn_cast<gpu::AllocOp>(op)) {
        // The CPU runtime's blocks are at kDeviceBufferAlignment already:
        // an alignment here would pad the block the bounds check sees.
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
