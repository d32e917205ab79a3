//===- KernelReport.cpp - What each kernel and GEMM of host code does -----===//

#include "LaunchMemory.h"

#include "weft/Dialect/Weft/IR/TargetAttrNames.h"
#include "weft/Dialect/Weft/Transforms/StepPhases.h"
#include "weft/Lowering/BufferAliases.h"
#include "weft/Lowering/Memrefs.h"
#include "weft/Target/GPU/Passes.h"
#include "weft/runtime/Contract.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <functional>

namespace weft {
#define GEN_PASS_DEF_WEFTGPUKERNELREPORT
#include "weft/Target/GPU/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// Index arithmetic of a kernel evaluated for one thread: the launch's ids
/// and sizes bound to numbers, everything else computed from constants.
class IndexEvaluator {
public:
  void bind(Value value, int64_t number) {
    bound[value] = number;
    cache.clear();
  }
  std::optional<int64_t> operator()(Value value) { return evaluate(value, 0); }

private:
  llvm::DenseMap<Value, int64_t> bound;
  llvm::DenseMap<Value, std::optional<int64_t>> cache;

  std::optional<int64_t> evaluate(Value value, unsigned depth);
  std::optional<int64_t> compute(Operation *op, unsigned depth);
  std::optional<int64_t> foldMap(AffineMap map, ValueRange operands,
                                 unsigned depth, bool takeMax);
};

std::optional<int64_t> IndexEvaluator::evaluate(Value value, unsigned depth) {
  if (auto it = bound.find(value); it != bound.end())
    return it->second;
  if (std::optional<int64_t> constant = getConstantIntValue(value))
    return value.getType().isInteger(1) ? *constant != 0 : *constant;
  Operation *def = value.getDefiningOp();
  if (!def || def->getNumResults() != 1 || depth > 64)
    return std::nullopt;
  if (auto it = cache.find(value); it != cache.end())
    return it->second;
  std::optional<int64_t> result = compute(def, depth + 1);
  cache[value] = result;
  return result;
}

std::optional<int64_t> IndexEvaluator::foldMap(AffineMap map,
                                               ValueRange operands,
                                               unsigned depth, bool takeMax) {
  SmallVector<Attribute> constants;
  for (Value operand : operands) {
    std::optional<int64_t> number = evaluate(operand, depth);
    if (!number)
      return std::nullopt;
    constants.push_back(
        IntegerAttr::get(IndexType::get(map.getContext()), *number));
  }
  SmallVector<Attribute> results;
  if (failed(map.constantFold(constants, results)) || results.empty())
    return std::nullopt;
  std::optional<int64_t> chosen;
  for (Attribute result : results) {
    int64_t number = cast<IntegerAttr>(result).getInt();
    if (!chosen || (takeMax ? number > *chosen : number < *chosen))
      chosen = number;
  }
  return chosen;
}

std::optional<int64_t> IndexEvaluator::compute(Operation *op, unsigned depth) {
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
          arith::ExtUIOp, arith::TruncIOp>(op))
    return evaluate(op->getOperand(0), depth);
  if (auto select = dyn_cast<arith::SelectOp>(op)) {
    std::optional<int64_t> condition = evaluate(select.getCondition(), depth);
    if (!condition)
      return std::nullopt;
    return evaluate(*condition ? select.getTrueValue() : select.getFalseValue(),
                    depth);
  }
  if (auto apply = dyn_cast<affine::AffineApplyOp>(op))
    return foldMap(apply.getAffineMap(), apply.getMapOperands(), depth, false);
  if (auto min = dyn_cast<affine::AffineMinOp>(op))
    return foldMap(min.getAffineMap(), min.getMapOperands(), depth, false);
  if (auto max = dyn_cast<affine::AffineMaxOp>(op))
    return foldMap(max.getAffineMap(), max.getMapOperands(), depth, true);
  if (op->getNumOperands() != 2)
    return std::nullopt;
  std::optional<int64_t> lhs = evaluate(op->getOperand(0), depth);
  std::optional<int64_t> rhs = evaluate(op->getOperand(1), depth);
  if (!lhs || !rhs)
    return std::nullopt;
  int64_t a = *lhs, b = *rhs;
  auto unsignedA = uint64_t(a), unsignedB = uint64_t(b);
  bool dividesByZero =
      b == 0 && isa<arith::DivUIOp, arith::DivSIOp, arith::CeilDivUIOp,
                    arith::CeilDivSIOp, arith::FloorDivSIOp, arith::RemUIOp,
                    arith::RemSIOp>(op);
  if (dividesByZero)
    return std::nullopt;
  return llvm::TypeSwitch<Operation *, std::optional<int64_t>>(op)
      .Case([&](arith::AddIOp) { return a + b; })
      .Case([&](arith::SubIOp) { return a - b; })
      .Case([&](arith::MulIOp) { return a * b; })
      .Case([&](arith::DivUIOp) { return int64_t(unsignedA / unsignedB); })
      .Case([&](arith::DivSIOp) { return a / b; })
      .Case([&](arith::CeilDivUIOp) {
        return int64_t((unsignedA + unsignedB - 1) / unsignedB);
      })
      .Case([&](arith::CeilDivSIOp) {
        return a / b + ((a % b != 0) && ((a < 0) == (b < 0)));
      })
      .Case([&](arith::FloorDivSIOp) {
        return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
      })
      .Case([&](arith::RemUIOp) { return int64_t(unsignedA % unsignedB); })
      .Case([&](arith::RemSIOp) { return a % b; })
      .Case([&](arith::MinSIOp) { return std::min(a, b); })
      .Case([&](arith::MaxSIOp) { return std::max(a, b); })
      .Case([&](arith::MinUIOp) {
        return int64_t(std::min(unsignedA, unsignedB));
      })
      .Case([&](arith::MaxUIOp) {
        return int64_t(std::max(unsignedA, unsignedB));
      })
      .Case([&](arith::AndIOp) { return a & b; })
      .Case([&](arith::OrIOp) { return a | b; })
      .Case([&](arith::XOrIOp) { return a ^ b; })
      .Case([&](arith::ShLIOp) { return int64_t(unsignedA << unsignedB); })
      .Case([&](arith::ShRUIOp) { return int64_t(unsignedA >> unsignedB); })
      .Case([&](arith::ShRSIOp) { return a >> b; })
      .Case([&](arith::CmpIOp cmp) -> std::optional<int64_t> {
        switch (cmp.getPredicate()) {
        case arith::CmpIPredicate::eq:
          return a == b;
        case arith::CmpIPredicate::ne:
          return a != b;
        case arith::CmpIPredicate::slt:
          return a < b;
        case arith::CmpIPredicate::sle:
          return a <= b;
        case arith::CmpIPredicate::sgt:
          return a > b;
        case arith::CmpIPredicate::sge:
          return a >= b;
        case arith::CmpIPredicate::ult:
          return unsignedA < unsignedB;
        case arith::CmpIPredicate::ule:
          return unsignedA <= unsignedB;
        case arith::CmpIPredicate::ugt:
          return unsignedA > unsignedB;
        case arith::CmpIPredicate::uge:
          return unsignedA >= unsignedB;
        }
        return std::nullopt;
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// How many times the ops of each block of a launch's body run in one run
/// of the launch: its first and last blocks (of each part of a merged
/// launch) counted thread by thread, guards and loop bounds evaluated, the
/// blocks between taken to do what the first does.
class ExecutionCounter {
public:
  explicit ExecutionCounter(gpu::LaunchOp launch) : launch(launch) {}

  /// Fails when the grid or the block has no constant size.
  LogicalResult count();
  /// The parts of the launch (one unless it is a merged launch: its
  /// non-empty block segments) and how many times `op` runs in the blocks
  /// of `part`.
  unsigned parts() const { return runs.size(); }
  double executions(Operation *op, unsigned part) const {
    return runs[part].lookup(op->getBlock());
  }
  std::array<int64_t, 3> grid{}, block{};
  /// Whether every guard and loop bound was evaluated.
  bool exact = true;

private:
  gpu::LaunchOp launch;
  IndexEvaluator evaluate;
  SmallVector<llvm::DenseMap<Block *, double>> runs; // per part
  llvm::DenseMap<Block *, double> runsInBlock;
  llvm::DenseMap<Block *, SmallVector<Operation *>> nestingOps;

  void countBlock(std::array<int64_t, 3> blockId);
  void visit(Block &body, double times);
};

LogicalResult ExecutionCounter::count() {
  gpu::KernelDim3 gridSizes = launch.getGridSizeOperandValues();
  gpu::KernelDim3 blockSizes = launch.getBlockSizeOperandValues();
  Value sizes[] = {gridSizes.x,  gridSizes.y,  gridSizes.z,
                   blockSizes.x, blockSizes.y, blockSizes.z};
  gpu::KernelDim3 gridArgs = launch.getGridSize();
  gpu::KernelDim3 blockArgs = launch.getBlockSize();
  Value args[] = {gridArgs.x,  gridArgs.y,  gridArgs.z,
                  blockArgs.x, blockArgs.y, blockArgs.z};
  for (auto [i, size] : llvm::enumerate(sizes)) {
    std::optional<int64_t> number = evaluate(size);
    if (!number || *number < 1)
      return failure();
    (i < 3 ? grid[i] : block[i - 3]) = *number;
    evaluate.bind(args[i], *number);
  }
  launch.getBody().walk([&](Operation *op) {
    if (op->getNumRegions())
      nestingOps[op->getBlock()].push_back(op);
  });
  // The blocks that run the same code: all of them, or each part of a
  // merged launch (weft-gpu-merge-launches).
  struct Segment {
    std::array<int64_t, 3> first, last;
    int64_t blocks;
  };
  SmallVector<Segment> segments;
  int64_t blocks = grid[0] * grid[1] * grid[2];
  auto starts =
      launch->getAttrOfType<DenseI64ArrayAttr>(weft::kBlockSegmentsAttrName);
  if (starts && grid[1] == 1 && grid[2] == 1) {
    ArrayRef<int64_t> first = starts.asArrayRef();
    for (auto [i, start] : llvm::enumerate(first)) {
      int64_t end = i + 1 < first.size() ? first[i + 1] : blocks;
      if (start < end)
        segments.push_back({{start, 0, 0}, {end - 1, 0, 0}, end - start});
    }
  } else {
    segments.push_back(
        {{0, 0, 0}, {grid[0] - 1, grid[1] - 1, grid[2] - 1}, blocks});
  }
  for (const Segment &segment : segments) {
    llvm::DenseMap<Block *, double> &partRuns = runs.emplace_back();
    runsInBlock.clear();
    countBlock(segment.first);
    llvm::DenseMap<Block *, double> first = std::move(runsInBlock);
    runsInBlock.clear();
    if (segment.blocks > 1)
      countBlock(segment.last);
    for (auto &[body, times] : first)
      partRuns[body] +=
          times * double(segment.blocks > 1 ? segment.blocks - 1 : 1);
    for (auto &[body, times] : runsInBlock)
      partRuns[body] += times;
  }
  return success();
}

void ExecutionCounter::countBlock(std::array<int64_t, 3> blockId) {
  gpu::KernelDim3 ids = launch.getBlockIds();
  evaluate.bind(ids.x, blockId[0]);
  evaluate.bind(ids.y, blockId[1]);
  evaluate.bind(ids.z, blockId[2]);
  gpu::KernelDim3 threads = launch.getThreadIds();
  for (int64_t z = 0; z < block[2]; ++z)
    for (int64_t y = 0; y < block[1]; ++y)
      for (int64_t x = 0; x < block[0]; ++x) {
        evaluate.bind(threads.x, x);
        evaluate.bind(threads.y, y);
        evaluate.bind(threads.z, z);
        visit(launch.getBody().front(), 1);
      }
}

void ExecutionCounter::visit(Block &body, double times) {
  runsInBlock[&body] += times;
  for (Operation *op : nestingOps.lookup(&body)) {
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      std::optional<int64_t> lower = evaluate(loop.getLowerBound());
      std::optional<int64_t> upper = evaluate(loop.getUpperBound());
      std::optional<int64_t> step = evaluate(loop.getStep());
      double trips = 1;
      if (lower && upper && step && *step > 0)
        trips =
            double(std::max<int64_t>(0, *upper - *lower + *step - 1) / *step);
      else
        exact = false;
      if (trips > 0)
        visit(*loop.getBody(), times * trips);
      continue;
    }
    if (auto branch = dyn_cast<scf::IfOp>(op)) {
      std::optional<int64_t> condition = evaluate(branch.getCondition());
      if (!condition)
        exact = false;
      if (!condition || *condition)
        visit(branch.getThenRegion().front(), times);
      if ((!condition || !*condition) && !branch.getElseRegion().empty())
        visit(branch.getElseRegion().front(), times);
      continue;
    }
    // Other control flow (a while loop): its regions once, not exact.
    exact = false;
    for (Region &region : op->getRegions())
      for (Block &nested : region)
        visit(nested, times);
  }
}

/// Floating-point operations of one run of `op`.
int64_t flopsOf(Operation *op) {
  if (op->getNumResults() != 1)
    return 0;
  Type type = op->getResult(0).getType();
  int64_t elements = 1;
  if (auto shaped = dyn_cast<ShapedType>(type)) {
    if (!shaped.hasStaticShape())
      return 0;
    elements = shaped.getNumElements();
    type = shaped.getElementType();
  }
  if (!isa<FloatType>(type))
    return 0;
  if (isa<math::FmaOp>(op))
    return 2 * elements;
  bool arithmetic =
      isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
          arith::RemFOp, arith::NegFOp, arith::MaximumFOp, arith::MinimumFOp,
          arith::MaxNumFOp, arith::MinNumFOp>(op) ||
      isa<math::MathDialect>(op->getDialect());
  return arithmetic ? elements : 0;
}

/// Whether `value` is computed from a value a kernel loaded from memory.
bool dependsOnMemory(Value value, gpu::LaunchOp launch,
                     llvm::DenseSet<Value> &seen) {
  if (!seen.insert(value).second)
    return false;
  Operation *def = value.getDefiningOp();
  if (!def || !launch->isProperAncestor(def))
    return false;
  if (isa<memref::LoadOp, memref::AtomicRMWOp>(def))
    return true;
  return llvm::any_of(def->getOperands(), [&](Value operand) {
    return dependsOnMemory(operand, launch, seen);
  });
}

/// The distinct elements of a strided view: a broadcast dim (stride 0) is
/// read once (a GEMM's broadcast batch, attention's mask).
int64_t distinctElements(MemRefType type) {
  auto [strides, offset] = type.getStridesAndOffset();
  int64_t elements = 1;
  for (auto [size, stride] : llvm::zip(type.getShape(), strides))
    elements *= stride ? size : 1;
  return elements;
}

/// The node of the model an op computes, from its location.
std::string nodeName(Location loc) {
  if (auto fused = dyn_cast<FusedLoc>(loc);
      fused && !fused.getLocations().empty())
    loc = fused.getLocations().front();
  if (auto named = dyn_cast<NameLoc>(loc))
    return named.getName().str();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine())).str();
  return "";
}

/// A call of a fused attention kernel (weft-attention-to-library).
bool isAttentionCall(func::CallOp call) {
  bool backward;
  return weft::isFusedAttentionCall(call, backward);
}

class ReportBuilder {
public:
  ReportBuilder(ModuleOp module, const llvm::StringSet<> &called)
      : module(module), b(module.getContext()), called(called),
        functionRuns(weft::runsPerEntryCall(module)) {}

  LogicalResult add(Operation *op);
  DictionaryAttr finish();

private:
  ModuleOp module;
  Builder b;
  const llvm::StringSet<> &called;
  llvm::StringMap<int64_t> functionRuns;
  llvm::DenseMap<Operation *, int64_t> launchesPerFunction;
  SmallVector<Attribute> launches;

  NamedAttrList common(Operation *op, StringRef kind);
  LogicalResult addLaunch(gpu::LaunchOp launch);
  void addGemm(func::CallOp call);
  void addAttention(func::CallOp call);
  ArrayAttr integers(ArrayRef<int64_t> values) {
    return b.getI64ArrayAttr(values);
  }
};

NamedAttrList ReportBuilder::common(Operation *op, StringRef kind) {
  auto function = op->getParentOfType<func::FuncOp>();
  int64_t id = int64_t(launches.size());
  op->setAttr(weft::kLaunchIdAttrName, b.getI64IntegerAttr(id));
  NamedAttrList entry;
  entry.append("id", b.getI64IntegerAttr(id));
  entry.append("kind", b.getStringAttr(kind));
  entry.append("function", function.getSymNameAttr());
  entry.append("index", b.getI64IntegerAttr(launchesPerFunction[function]++));
  entry.append("node", b.getStringAttr(nodeName(op->getLoc())));
  entry.append("runs",
               b.getI64IntegerAttr(weft::runsPerCall(op) *
                                   functionRuns.lookup(function.getSymName())));
  return entry;
}

LogicalResult ReportBuilder::addLaunch(gpu::LaunchOp launch) {
  ExecutionCounter counter(launch);
  if (failed(counter.count()))
    return launch.emitError("weft-gpu-kernel-report: a launch whose grid or "
                            "block size is not a constant");
  struct Traffic {
    double reads = 0, writes = 0;
  };
  // Each part of a merged launch reads and writes its buffers on its own
  // (as the emulation counts them).
  SmallVector<llvm::MapVector<Value, Traffic>> traffic(counter.parts());
  double flops = 0;
  bool exact = counter.exact;
  launch.getBody().walk([&](Operation *op) {
    Value memref = weft::deviceMemoryAccessed(op, launch);
    for (unsigned part = 0; part < counter.parts(); ++part) {
      double times = counter.executions(op, part);
      flops += times * double(flopsOf(op));
      if (!memref || !times)
        continue;
      Traffic &buffer = traffic[part][weft::bufferOutside(memref, launch)];
      bool writes = isa<memref::StoreOp, memref::AtomicRMWOp>(op);
      (writes ? buffer.writes : buffer.reads) += times;
      if (isa<memref::AtomicRMWOp>(op))
        buffer.reads += times;
    }
    if (!memref)
      return;
    ValueRange indices =
        isa<memref::LoadOp>(op)    ? cast<memref::LoadOp>(op).getIndices()
        : isa<memref::StoreOp>(op) ? cast<memref::StoreOp>(op).getIndices()
                                   : cast<memref::AtomicRMWOp>(op).getIndices();
    llvm::DenseSet<Value> seen;
    for (Value index : indices)
      if (dependsOnMemory(index, launch, seen))
        exact = false;
  });
  double bytesRead = 0, bytesWritten = 0, elements = 0;
  for (auto &partTraffic : traffic)
    for (auto &[buffer, counts] : partTraffic) {
      auto type = cast<MemRefType>(buffer.getType());
      double size = type.hasStaticShape() ? double(type.getNumElements()) : -1;
      auto touched = [&](double accesses) {
        return size < 0 ? accesses : std::min(accesses, size);
      };
      if (size < 0)
        exact = false;
      elements += touched(counts.reads) + touched(counts.writes);
      bytesRead += touched(counts.reads) * double(weft::elementBytes(type));
      bytesWritten += touched(counts.writes) * double(weft::elementBytes(type));
    }
  NamedAttrList entry = common(launch, "kernel");
  entry.append("grid", integers(counter.grid));
  entry.append("block", integers(counter.block));
  entry.append("flops", b.getI64IntegerAttr(int64_t(flops)));
  entry.append("bytes_read", b.getI64IntegerAttr(int64_t(bytesRead)));
  entry.append("bytes_written", b.getI64IntegerAttr(int64_t(bytesWritten)));
  entry.append("elements", b.getI64IntegerAttr(int64_t(elements)));
  entry.append("exact", b.getBoolAttr(exact));
  entry.append("tensor_cores", b.getBoolAttr(false));
  launches.push_back(entry.getDictionary(b.getContext()));
  return success();
}

void ReportBuilder::addGemm(func::CallOp call) {
  SmallVector<MemRefType> views;
  // a, b, c, the bias, aux, then the flags (weft/runtime/Contract.h).
  for (Value operand :
       call.getOperands().take_front(weft::runtime::kGemmFlagsOperand)) {
    auto cast = operand.getDefiningOp<memref::CastOp>();
    views.push_back(cast ? dyn_cast<MemRefType>(cast.getSource().getType())
                         : MemRefType());
  }
  // Its inputs' type: bf16 (into an f32 c or into a bf16 c) or fp16.
  bool halfWidth =
      call.getCallee().contains("_bf16") || call.getCallee().contains("_f16");
  // Flags not known: c is read, as an upper bound, and f32 stays f32.
  int64_t flags = weft::runtime::kGemmAccumulate;
  if (call.getNumOperands() == weft::runtime::kGemmOperands)
    flags =
        getConstantIntValue(call.getOperand(weft::runtime::kGemmFlagsOperand))
            .value_or(flags);
  // An f32 GEMM the user let multiply as TF32.
  bool tf32 = !halfWidth && (flags & weft::runtime::kGemmTf32);
  NamedAttrList entry = common(call, "gemm");
  entry.append("library", b.getStringAttr("cublasLtMatmul"));
  bool biased = flags & weft::runtime::kGemmBias,
       gradient = flags & weft::runtime::kGemmBiasGradient,
       gelu = flags & weft::runtime::kGemmGelu,
       geluGradient = flags & weft::runtime::kGemmGeluGradient;
  if (views.size() == weft::runtime::kGemmFlagsOperand &&
      llvm::all_of(ArrayRef(views).take_front(3),
                   [](MemRefType type) {
                     return type && type.hasStaticShape() &&
                            type.getRank() >= 2;
                   }) &&
      (!(biased || gradient) || (views[3] && views[3].hasStaticShape()))) {
    ArrayRef<int64_t> a = views[0].getShape(), c = views[2].getShape();
    int64_t m = c[c.size() - 2], n = c.back(), k = a.back(), batch = 1;
    for (int64_t size : c.drop_back(2))
      batch *= size;
    int64_t aBytes = distinctElements(views[0]) * weft::elementBytes(views[0]),
            bBytes = distinctElements(views[1]) * weft::elementBytes(views[1]),
            cBytes = distinctElements(views[2]) * weft::elementBytes(views[2]);
    // c += a * b reads c as well as writing it; c = a * b (beta = 0) only
    // writes it.
    bool readsC = flags & weft::runtime::kGemmAccumulate;
    // The bias epilogue reads its vector once, the bias-gradient epilogue
    // writes it.
    int64_t biasElements = biased || gradient ? views[3].getNumElements() : 0;
    int64_t biasBytes = biasElements * weft::elementBytes(views[2]);
    // The GELU epilogue writes the pre-activation (aux, c's type and
    // shape), the GELU-gradient epilogue reads it.
    int64_t auxBytes = gelu || geluGradient ? cBytes : 0;
    entry.append("shape", integers({batch, m, n, k}));
    entry.append("flops", b.getI64IntegerAttr(2 * batch * m * n * k));
    entry.append("bytes_read",
                 b.getI64IntegerAttr(aBytes + bBytes + (readsC ? cBytes : 0) +
                                     (biased ? biasBytes : 0) +
                                     (geluGradient ? auxBytes : 0)));
    entry.append("bytes_written",
                 b.getI64IntegerAttr(cBytes + (gradient ? biasBytes : 0) +
                                     (gelu ? auxBytes : 0)));
    entry.append("elements",
                 b.getI64IntegerAttr(
                     distinctElements(views[0]) + distinctElements(views[1]) +
                     (readsC ? 2 : 1) * distinctElements(views[2]) +
                     biasElements +
                     (auxBytes ? distinctElements(views[2]) : 0)));
    // What the epilogue fuses, in the order it applies them.
    SmallVector<StringRef> epilogue;
    if (gradient)
      epilogue.push_back("bias gradient");
    if (biased)
      epilogue.push_back("bias");
    if (gelu)
      epilogue.push_back("GELU");
    if (geluGradient)
      epilogue.push_back("GELU gradient");
    entry.append("epilogue", b.getStringAttr(llvm::join(epilogue, " + ")));
    entry.append("exact", b.getBoolAttr(true));
  } else {
    entry.append("exact", b.getBoolAttr(false));
  }
  // bf16, fp16 and TF32 inputs multiply on tensor cores, accumulating in
  // f32.
  entry.append("tensor_cores", b.getBoolAttr(halfWidth || tf32));
  entry.append("tf32", b.getBoolAttr(tf32));
  launches.push_back(entry.getDictionary(b.getContext()));
}

/// A fused attention call (weft-attention-to-library): `flops` counts its
/// two products forward (four backward) over every query-key pair, as the
/// step's FLOPs do; `kernel_flops` what the kernel computes as
/// FlashAttention counts it (the visible pairs only, and the backward's
/// recomputed scores: 2.5 times the forward), which its ceiling prices.
void ReportBuilder::addAttention(func::CallOp call) {
  SmallVector<MemRefType> views;
  for (Value operand : call.getOperands())
    if (auto cast = operand.getDefiningOp<memref::CastOp>())
      views.push_back(dyn_cast<MemRefType>(cast.getSource().getType()));
  bool backward = false;
  weft::isFusedAttentionCall(call, backward);
  bool forward = !backward;
  NamedAttrList entry = common(call, "attention");
  entry.append("library", b.getStringAttr(forward ? "cuDNN SDPA forward"
                                                  : "cuDNN SDPA backward"));
  IntegerAttr flags;
  unsigned tensors = forward ? 6 : 10;
  if (views.size() != tensors ||
      !llvm::all_of(views,
                    [](MemRefType t) { return t && t.hasStaticShape(); }) ||
      !matchPattern(call.getOperand(tensors), m_Constant(&flags))) {
    entry.append("exact", b.getBoolAttr(false));
    entry.append("tensor_cores", b.getBoolAttr(true));
    launches.push_back(entry.getDictionary(b.getContext()));
    return;
  }
  ArrayRef<int64_t> q = views[0].getShape(), k = views[1].getShape(),
                    v = views[2].getShape();
  int64_t batch = q[0], heads = q[1], s = q[2], d = q[3], t = k[2], dv = v[3];
  bool causal = flags.getInt() & weft::runtime::kAttentionCausal;
  bool biased = flags.getInt() & weft::runtime::kAttentionBias;
  // Key j is visible to query i when j <= i + t - s.
  int64_t visible = 0;
  for (int64_t i = 0; i < s; ++i)
    visible += causal ? std::clamp<int64_t>(i + t - s + 1, 0, t) : t;
  int64_t pairs = batch * heads * s * t;
  visible *= batch * heads;
  int64_t products = 2 * (d + dv);
  int64_t read = 0, written = 0, elements = 0;
  for (auto [index, view] : llvm::enumerate(views)) {
    bool isBias = index == 3;
    if (isBias && !biased)
      continue;
    bool isResult = forward ? index >= 4 : index >= 7;
    (isResult ? written : read) +=
        distinctElements(view) * weft::elementBytes(view);
    elements += distinctElements(view);
  }
  entry.append("shape", integers({batch, heads, s, t, d, dv}));
  entry.append("flops",
               b.getI64IntegerAttr((forward ? 1 : 2) * pairs * products));
  entry.append("kernel_flops",
               b.getI64IntegerAttr(forward ? visible * products
                                           : visible * products * 5 / 2));
  entry.append("bytes_read", b.getI64IntegerAttr(read));
  entry.append("bytes_written", b.getI64IntegerAttr(written));
  entry.append("elements", b.getI64IntegerAttr(elements));
  entry.append("exact", b.getBoolAttr(true));
  entry.append("tensor_cores", b.getBoolAttr(true));
  launches.push_back(entry.getDictionary(b.getContext()));
}

LogicalResult ReportBuilder::add(Operation *op) {
  if (auto launch = dyn_cast<gpu::LaunchOp>(op))
    return addLaunch(launch);
  auto call = cast<func::CallOp>(op);
  if (isAttentionCall(call))
    addAttention(call);
  else
    addGemm(call);
  return success();
}

DictionaryAttr ReportBuilder::finish() {
  // Every buffer host code allocates or views, by type.
  llvm::MapVector<std::pair<StringRef, Type>, int64_t> buffers;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isDeclaration())
      continue;
    // The entry's arguments: the model's parameters, inputs and state.
    if (!called.contains(func.getSymName()))
      for (BlockArgument arg : func.getArguments())
        if (isa<MemRefType>(arg.getType()))
          ++buffers[{"argument", arg.getType()}];
    func.walk([&](Operation *op) {
      if (isa<gpu::LaunchOp>(op))
        return WalkResult::skip();
      StringRef kind = isa<memref::AllocOp, gpu::AllocOp>(op) ? "alloc"
                       : isa<memref::ViewOp>(op)              ? "view"
                                                              : "";
      if (!kind.empty())
        ++buffers[{kind, op->getResult(0).getType()}];
      return WalkResult::advance();
    });
  }
  SmallVector<Attribute> bufferList;
  for (auto &[key, count] : buffers) {
    auto type = dyn_cast<MemRefType>(key.second);
    if (!type)
      continue;
    int64_t elements = type.hasStaticShape() ? type.getNumElements() : -1;
    std::string text;
    llvm::raw_string_ostream(text) << type;
    NamedAttrList entry;
    entry.append("kind", b.getStringAttr(key.first));
    entry.append("type", b.getStringAttr(text));
    entry.append("shape", integers(type.getShape()));
    entry.append("element_bits",
                 b.getI64IntegerAttr(weft::elementBytes(type) * 8));
    entry.append("elements", b.getI64IntegerAttr(elements));
    entry.append("count", b.getI64IntegerAttr(count));
    bufferList.push_back(entry.getDictionary(b.getContext()));
  }
  NamedAttrList report;
  report.append("launches", b.getArrayAttr(launches));
  report.append("buffers", b.getArrayAttr(bufferList));
  return report.getDictionary(b.getContext());
}

/// A library call the report lists: a GEMM or a fused attention.
bool isLibraryCall(func::CallOp call) {
  return weft::isGemmCall(call) || isAttentionCall(call);
}

struct WeftGpuKernelReportPass
    : public weft::impl::WeftGpuKernelReportBase<WeftGpuKernelReportPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Launches and GEMMs in the order they first run: a call's function
    // at the call.
    SmallVector<Operation *> order;
    llvm::DenseSet<Operation *> visited;
    std::function<void(func::FuncOp)> visit = [&](func::FuncOp func) {
      if (!visited.insert(func).second || func.isDeclaration())
        return;
      func.walk<WalkOrder::PreOrder>([&](Operation *op) {
        if (isa<gpu::LaunchOp>(op)) {
          order.push_back(op);
          return WalkResult::skip();
        }
        if (auto call = dyn_cast<func::CallOp>(op)) {
          if (isLibraryCall(call))
            order.push_back(op);
          else if (auto callee =
                       module.lookupSymbol<func::FuncOp>(call.getCallee()))
            visit(callee);
        }
        return WalkResult::advance();
      });
    };
    llvm::StringSet<> called;
    module.walk([&](func::CallOp call) { called.insert(call.getCallee()); });
    for (auto func : module.getOps<func::FuncOp>())
      if (!called.contains(func.getSymName()))
        visit(func);
    for (auto func : module.getOps<func::FuncOp>())
      visit(func);
    ReportBuilder report(module, called);
    for (Operation *op : order)
      if (failed(report.add(op)))
        return signalPassFailure();
    module->setAttr(weft::kKernelReportAttrName, report.finish());
  }
};

} // namespace
