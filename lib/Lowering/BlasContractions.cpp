//===- BlasContractions.cpp - GEMMs to BLAS, polynomial math --------------===//

#include "weft/Dialect/Weft/IR/TargetAttrNames.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Lowering/BufferAliases.h"
#include "weft/Lowering/BufferFills.h"
#include "weft/Lowering/Contractions.h"
#include "weft/Lowering/Memrefs.h"
#include "weft/Lowering/Passes.h"
#include "weft/Lowering/ScalarMath.h"
#include "weft/runtime/Contract.h"
#include "weft/runtime/GemmLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/RegionUtils.h"

namespace weft {
#define GEN_PASS_DEF_WEFTCONTRACTIONSTOBLAS
#define GEN_PASS_DEF_WEFTAPPROXIMATEMATH
#include "weft/Lowering/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

using weft::canHoist;
using weft::hoist;
using weft::touches;

/// The type of a view of `memref` (indexed by `map`) with dims `loops`:
/// each view dim's stride is that of the operand dim indexed by the loop,
/// or 0 if absent.
MemRefType gemmViewType(Value memref, AffineMap map, ArrayRef<unsigned> loops,
                        ArrayRef<int64_t> loopSizes) {
  auto type = cast<MemRefType>(memref.getType());
  auto [strides, offset] = type.getStridesAndOffset();
  SmallVector<int64_t> viewSizes, viewStrides;
  for (unsigned loop : loops) {
    int64_t stride = 0;
    for (auto [pos, e] : llvm::enumerate(map.getResults()))
      if (auto d = dyn_cast<AffineDimExpr>(e); d && d.getPosition() == loop)
        stride = strides[pos];
    viewSizes.push_back(loopSizes[loop]);
    viewStrides.push_back(stride);
  }
  return MemRefType::get(
      viewSizes, type.getElementType(),
      StridedLayoutAttr::get(memref.getContext(), offset, viewStrides));
}

Value gemmView(OpBuilder &b, Location loc, Value memref, MemRefType viewType) {
  auto [strides, offset] = viewType.getStridesAndOffset();
  return memref::ReinterpretCastOp::create(b, loc, viewType, memref, offset,
                                           viewType.getShape(), strides);
}

/// Whether a column-major GEMM library reads the matrix `view` (its last
/// two dims).
bool readsAsColumnMajor(MemRefType type) {
  auto [strides, offset] = type.getStridesAndOffset();
  int64_t rank = type.getRank();
  return weft::runtime::columnMajorLayout(type.getDimSize(rank - 2),
                                          type.getDimSize(rank - 1),
                                          strides[rank - 2], strides[rank - 1])
      .has_value();
}

/// The buffer a view shows: views followed up to a planned buffer (a view
/// of the arena), an allocation or an argument.
Value bufferOf(Value memref) {
  while (auto view = memref.getDefiningOp<ViewLikeOpInterface>()) {
    if (isa<memref::ViewOp>(view))
      break;
    memref = view.getViewSource();
  }
  return memref;
}

/// Whether `use` only stores into its memref, itself or through views.
bool onlyStores(OpOperand &use) {
  Operation *user = use.getOwner();
  if (auto view = dyn_cast<ViewLikeOpInterface>(user);
      view && view.getViewSource() == use.get())
    return llvm::all_of(user->getResults(), [](Value result) {
      return llvm::all_of(result.getUses(), onlyStores);
    });
  auto store = dyn_cast<memref::StoreOp>(user);
  return store && store.getMemRef() == use.get();
}

/// Whether `op` writes the bytes of `buffer` it touches without reading
/// them (a fill, or a linalg op whose body never reads them) or frees them.
bool onlyOverwrites(Operation *op, Value buffer, StringRef gemmCallee) {
  if (isa<linalg::FillOp, memref::DeallocOp>(op))
    return true;
  // A GEMM this pass made, c = a * b (beta = 0) reading no bias in c.
  if (auto call = dyn_cast<func::CallOp>(op);
      call && call.getCallee().starts_with(gemmCallee) &&
      call.getNumOperands() == runtime::kGemmOperands) {
    std::optional<int64_t> flags =
        getConstantIntValue(call.getOperand(runtime::kGemmFlagsOperand));
    return flags && !(*flags & runtime::kGemmAccumulate) &&
           (!(*flags & runtime::kGemmBias) ||
            !weft::operandMayAlias(call.getOperand(runtime::kGemmBiasOperand),
                                   buffer)) &&
           (!(*flags & runtime::kGemmGeluGradient) ||
            !weft::operandMayAlias(call.getOperand(runtime::kGemmAuxOperand),
                                   buffer)) &&
           !weft::operandMayAlias(call.getOperand(0), buffer) &&
           !weft::operandMayAlias(call.getOperand(1), buffer);
  }
  // A fused attention's outputs (weft/runtime/Contract.h).
  if (isa<func::CallOp>(op)) {
    bool backward;
    if (!weft::isFusedAttentionCall(op, backward))
      return false;
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      if (isa<BaseMemRefType>(operand.getType()) &&
          !weft::runtime::attentionOverwrites(backward, index) &&
          weft::operandMayAlias(operand, buffer))
        return false;
    return true;
  }
  // A loop nest (a row kernel) that only stores into the buffers it
  // captures that share bytes with `buffer`.
  if (isa<scf::ForallOp, scf::ParallelOp, scf::ForOp>(op)) {
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(op->getRegions(), captured);
    return llvm::all_of(captured, [&](Value value) {
      return !isa<MemRefType>(value.getType()) ||
             !weft::buffersMayAlias(value, buffer) ||
             llvm::all_of(value.getUses(), [&](OpOperand &use) {
               return !op->isProperAncestor(use.getOwner()) || onlyStores(use);
             });
    });
  }
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureBufferSemantics())
    return false;
  for (OpOperand &operand : op->getOpOperands())
    if (isa<MemRefType>(operand.get().getType()) &&
        weft::buffersMayAlias(operand.get(), buffer) &&
        (!linalgOp.isDpsInit(&operand) ||
         linalgOp.payloadUsesValueFromOperand(&operand)))
      return false;
  return true;
}

/// A contiguous row-major memref: element i of one is element i of another
/// of the same size, whatever their shapes.
bool isRowMajor(Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  return type.getLayout().isIdentity() && type.hasStaticShape();
}

/// A bf16 GEMM's f32 temporary that only a rounding reads: the GEMM can
/// write the rounded (bf16) buffer itself, as cuBLAS does with a bf16 c,
/// and the f32 buffer and its passes over memory go. `producer`, the last
/// op to touch c before the GEMM, initialized all of it (a zero fill, or
/// an elementwise op such as a bias's broadcast, which then writes the
/// bf16 buffer instead, rounded); `reader`, the first to touch it after,
/// yields truncf(c) element for element into `rounded` (and may compute
/// more from c, which it then reads widened from the bf16 buffer); the
/// next op to touch c's bytes writes them without reading (c's life ended).
///
/// Or, where the reader uses c only rounded (truncf to bf16, as a head
/// view's transpose does) but writes no element-for-element copy: the GEMM
/// writes bf16 into the first half of c's own bytes (`inPlace`), and the
/// reader reads them as they are. Both are exact: the rounding happens
/// once, where it happened before.
struct RoundedResult {
  Operation *producer;
  linalg::GenericOp reader;
  unsigned cInput, roundedOutput;
  Value rounded;
  bool inPlace = false;
};

/// Whether `op` writes every element of `buffer`: a fill of it, or a
/// linalg op whose output it is through a permutation (each element of the
/// buffer at one point of the iteration space).
bool writesAllOf(Operation *op, Value buffer) {
  if (auto fill = dyn_cast<linalg::FillOp>(op))
    return fill.getOutputs()[0] == buffer;
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic &&
         llvm::any_of(generic.getDpsInitsMutable(), [&](OpOperand &output) {
           return output.get() == buffer &&
                  generic.getMatchingIndexingMap(&output).isPermutation();
         });
}

/// Whether every use of `value` rounds it to bf16.
bool onlyRounded(BlockArgument value) {
  return !value.use_empty() &&
         llvm::all_of(value.getUsers(), [](Operation *user) {
           auto truncation = dyn_cast<arith::TruncFOp>(user);
           return truncation && truncation.getType().isBF16();
         });
}

std::optional<RoundedResult> matchRoundedResult(linalg::GenericOp gemm, Value c,
                                                bool inPlaceOnly,
                                                StringRef gemmCallee) {
  if (!isRowMajor(c))
    return std::nullopt;
  Operation *producer = gemm->getPrevNode();
  while (producer && !touches(producer, c))
    producer = producer->getPrevNode();
  Operation *next = gemm->getNextNode();
  while (next && !touches(next, c))
    next = next->getNextNode();
  auto reader = dyn_cast_or_null<linalg::GenericOp>(next);
  if (!producer || !reader || !reader.hasPureBufferSemantics() ||
      reader.getNumReductionLoops() != 0)
    return std::nullopt;
  // A temporary, or an argument (the plan lends the bytes of an output
  // before its value is written) filled all over again afterwards: the
  // caller reads the argument after the call.
  Value buffer = bufferOf(c);
  bool overwritten = false;
  for (Operation *later = reader->getNextNode(); later;
       later = later->getNextNode())
    if (touches(later, c)) {
      if (!onlyOverwrites(later, c, gemmCallee))
        return std::nullopt;
      overwritten = writesAllOf(later, buffer);
      break;
    }
  if (isa<BlockArgument>(buffer) && !overwritten)
    return std::nullopt;
  // The producer writes all of c and reads nothing of it.
  if (auto fill = dyn_cast<linalg::FillOp>(producer)) {
    auto zero = dyn_cast<FloatAttr>(fillConstant(fill));
    if (fill != constantFillBefore(gemm, c) || !zero ||
        !zero.getValue().isZero())
      return std::nullopt;
  } else if (auto generic = dyn_cast<linalg::GenericOp>(producer)) {
    if (!generic.hasPureBufferSemantics() || generic.getNumDpsInits() != 1 ||
        generic.getDpsInits()[0] != c || generic.getNumReductionLoops() != 0 ||
        !generic.getMatchingIndexingMap(generic.getDpsInitOperand(0))
             .isPermutation() ||
        generic.payloadUsesValueFromOperand(generic.getDpsInitOperand(0)) ||
        llvm::any_of(generic.getDpsInputs(), [&](Value input) {
          return weft::buffersMayAlias(input, c);
        }))
      return std::nullopt;
  } else {
    return std::nullopt;
  }
  // The reader reads all of c (through a reshape, maybe) and rounds it,
  // element for element, into a row-major bf16 buffer of the same shape.
  auto yield = cast<linalg::YieldOp>(reader.getBody()->getTerminator());
  int64_t elements = cast<MemRefType>(c.getType()).getNumElements();
  for (OpOperand *input : reader.getDpsInputOperands()) {
    Value read = input->get();
    if (inPlaceOnly || bufferOf(read) != bufferOf(c) || !isRowMajor(read) ||
        cast<MemRefType>(read.getType()).getNumElements() != elements)
      continue;
    AffineMap readMap = reader.getMatchingIndexingMap(input);
    BlockArgument value = reader.getMatchingBlockArgument(input);
    for (OpOperand &output : reader.getDpsInitsMutable()) {
      unsigned index = output.getOperandNumber() - reader.getNumDpsInputs();
      auto truncation =
          yield.getOperand(index).getDefiningOp<arith::TruncFOp>();
      auto type = cast<MemRefType>(output.get().getType());
      if (!truncation || truncation.getIn() != value ||
          !truncation.getType().isBF16() || !isRowMajor(output.get()) ||
          type.getShape() != cast<MemRefType>(read.getType()).getShape() ||
          reader.getMatchingIndexingMap(&output) != readMap ||
          !readMap.isPermutation() ||
          reader.payloadUsesValueFromOperand(&output))
        continue;
      return RoundedResult{producer, reader, input->getOperandNumber(), index,
                           output.get()};
    }
  }
  // In place: the reader reads c once, only to round it, and touches
  // nothing else of its bytes (the GEMM writes bf16 into c's own bytes
  // where c is a view of the arena).
  for (OpOperand *input : reader.getDpsInputOperands()) {
    Value read = input->get();
    if (bufferOf(read) != bufferOf(c) || !isRowMajor(read) ||
        cast<MemRefType>(read.getType()).getNumElements() != elements ||
        !onlyRounded(reader.getMatchingBlockArgument(input)))
      continue;
    for (OpOperand &other : reader->getOpOperands())
      if (&other != input && isa<MemRefType>(other.get().getType()) &&
          weft::buffersMayAlias(other.get(), c))
        return std::nullopt;
    return RoundedResult{producer, reader,  input->getOperandNumber(),
                         0,        Value(), /*inPlace=*/true};
  }
  return std::nullopt;
}

/// Whether an op from `from` up to (not including) `to` touches bytes of
/// `buffer`: the rounded buffer is written from the producer on, where the
/// plan may have let other buffers use its bytes.
bool touchedBetween(Operation *from, Operation *to, Value buffer) {
  for (Operation *op = from; op != to; op = op->getNextNode())
    if (touches(op, buffer))
      return true;
  return false;
}

/// Makes `generic`, the only writer of its one output before the GEMM,
/// write `target` (bf16) instead, each value rounded.
void writeRounded(PatternRewriter &rewriter, linalg::GenericOp generic,
                  Value target) {
  rewriter.setInsertionPoint(generic);
  auto replacement = linalg::GenericOp::create(
      rewriter, generic.getLoc(), generic.getDpsInputs(), ValueRange{target},
      generic.getIndexingMapsArray(), generic.getIteratorTypesArray());
  rewriter.inlineRegionBefore(generic.getRegion(), replacement.getRegion(),
                              replacement.getRegion().end());
  Block &body = replacement.getRegion().front();
  Type narrow = getElementTypeOrSelf(target.getType());
  body.getArguments().back().setType(narrow);
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  rewriter.setInsertionPoint(yield);
  Value rounded = arith::TruncFOp::create(rewriter, yield.getLoc(), narrow,
                                          yield.getOperand(0));
  rewriter.modifyOpInPlace(yield, [&] { yield->setOperand(0, rounded); });
  rewriter.eraseOp(generic);
}

/// Makes the reader of a rounded result read the bf16 buffer (widened)
/// instead of c, and no longer write the rounding; it goes when that was
/// all it wrote.
void readRounded(PatternRewriter &rewriter, const RoundedResult &match) {
  linalg::GenericOp reader = match.reader;
  if (reader.getNumDpsInits() == 1) {
    rewriter.eraseOp(reader);
    return;
  }
  SmallVector<Value> inputs = reader.getDpsInputs();
  SmallVector<Value> outputs = reader.getDpsInits();
  SmallVector<AffineMap> maps = reader.getIndexingMapsArray();
  unsigned numInputs = inputs.size();
  inputs[match.cInput] = match.rounded;
  outputs.erase(outputs.begin() + match.roundedOutput);
  maps.erase(maps.begin() + numInputs + match.roundedOutput);
  rewriter.setInsertionPoint(reader);
  auto replacement =
      linalg::GenericOp::create(rewriter, reader.getLoc(), inputs, outputs,
                                maps, reader.getIteratorTypesArray());
  rewriter.inlineRegionBefore(reader.getRegion(), replacement.getRegion(),
                              replacement.getRegion().end());
  Block &body = replacement.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Operation *rounding = yield.getOperand(match.roundedOutput).getDefiningOp();
  rewriter.modifyOpInPlace(yield,
                           [&] { yield->eraseOperand(match.roundedOutput); });
  if (rounding->use_empty())
    rewriter.eraseOp(rounding);
  body.eraseArgument(numInputs + match.roundedOutput);
  BlockArgument value = body.getArgument(match.cInput);
  Type wide = value.getType();
  value.setType(getElementTypeOrSelf(match.rounded.getType()));
  rewriter.setInsertionPointToStart(&body);
  Value widened = arith::ExtFOp::create(rewriter, reader.getLoc(), wide, value);
  rewriter.replaceAllUsesExcept(value, widened, widened.getDefiningOp());
  rewriter.eraseOp(reader);
}

/// Makes the reader of an in-place rounded result read c's bytes as the
/// bf16 the GEMM wrote, in the shape it read c, without rounding again.
void readInPlace(PatternRewriter &rewriter, const RoundedResult &match,
                 Value c) {
  linalg::GenericOp reader = match.reader;
  auto view = c.getDefiningOp<memref::ViewOp>();
  Value read = reader->getOperand(match.cInput);
  rewriter.setInsertionPoint(reader);
  Value narrow = memref::ViewOp::create(
      rewriter, reader.getLoc(),
      MemRefType::get(cast<MemRefType>(read.getType()).getShape(),
                      rewriter.getBF16Type()),
      view.getSource(), view.getByteShift(), view.getSizes());
  rewriter.modifyOpInPlace(reader, [&] {
    reader->setOperand(match.cInput, narrow);
    BlockArgument value = reader.getBody()->getArgument(match.cInput);
    value.setType(rewriter.getBF16Type());
    for (Operation *truncation : llvm::make_early_inc_range(value.getUsers())) {
      truncation->getResult(0).replaceAllUsesWith(value);
      truncation->erase();
    }
  });
}

/// A tanh-form GELU, or its gradient, that the epilogue of a bf16 GEMM
/// computes instead (kGemmGelu, kGemmGeluGradient): the reader of its
/// rounded result (`rounded`) is a kernel over all of c, element for
/// element, that computes only this from c rounded, and the GEMM writes
/// its `output` itself (and `aux`, forward). Forward, the reader rounds c
/// into `aux` (the pre-activation the backward reads) and writes
/// round(gelu(c rounded)) into `output`; backward, it writes
/// round(gelu_grad(c rounded, aux)), and the GEMM runs `at` an op between
/// where it ran and the reader: where a and b still hold what it read,
/// and after the last op that touches the output's bytes (the plan may
/// have given them a value read until the reader) or writes the
/// pre-activation's. The epilogue computes from the f32 sum where the
/// kernel read it rounded: one bf16 rounding apart.
struct GeluEpilogue {
  linalg::GenericOp reader;
  Value output, aux;
  bool gradient;
  Operation *at = nullptr;
};

std::optional<GeluEpilogue> matchGeluEpilogue(linalg::GenericOp gemm,
                                              const RoundedResult &rounded) {
  linalg::GenericOp reader = rounded.reader;
  Value read = reader->getOperand(rounded.cInput);
  auto readType = cast<MemRefType>(read.getType());
  if (reader->getNumOperands() != 3 ||
      !reader.getBody()->getOps<linalg::IndexOp>().empty() ||
      llvm::any_of(reader.getIndexingMapsArray(),
                   [](AffineMap map) { return !map.isIdentity(); }) ||
      llvm::any_of(reader->getOperands(), [&](Value operand) {
        auto type = cast<MemRefType>(operand.getType());
        return !isRowMajor(operand) || type.getShape() != readType.getShape();
      }))
    return std::nullopt;
  for (OpOperand &output : reader.getDpsInitsMutable())
    if (reader.payloadUsesValueFromOperand(&output))
      return std::nullopt;
  auto yield = cast<linalg::YieldOp>(reader.getBody()->getTerminator());
  Value c = reader.getBody()->getArgument(rounded.cInput);
  Type wide = c.getType();
  auto roundTrip = [&](OpBuilder &b, Location loc, Value x) {
    Value bf16 = arith::TruncFOp::create(b, loc, b.getBF16Type(), x);
    return arith::ExtFOp::create(b, loc, wide, bf16).getResult();
  };
  auto round = [&](OpBuilder &b, Location loc, Value x) {
    return arith::TruncFOp::create(b, loc, b.getBF16Type(), x).getResult();
  };
  if (!rounded.inPlace) {
    // Forward: c is the one input; the other output is the GELU.
    if (reader.getNumDpsInputs() != 1)
      return std::nullopt;
    unsigned geluOutput = 1 - rounded.roundedOutput;
    if (!computesExpression(yield.getOperand(geluOutput), {c},
                            [&](OpBuilder &b, Location loc, ValueRange x) {
                              return round(b, loc,
                                           geluScalar(b, loc,
                                                      roundTrip(b, loc, x[0]),
                                                      /*tanhForm=*/true));
                            }))
      return std::nullopt;
    return GeluEpilogue{reader, reader.getDpsInits()[geluOutput],
                        rounded.rounded, /*gradient=*/false};
  }
  // Backward: c and the pre-activation in, the gradient out.
  if (reader.getNumDpsInputs() != 2)
    return std::nullopt;
  OpOperand *auxInput = reader.getDpsInputOperand(1 - rounded.cInput);
  Value aux = auxInput->get();
  BlockArgument auxValue = reader.getMatchingBlockArgument(auxInput);
  if (!auxValue.getType().isBF16() ||
      !computesExpression(
          yield.getOperand(0), {c, auxValue},
          [&](OpBuilder &b, Location loc, ValueRange x) {
            Value preActivation = arith::ExtFOp::create(b, loc, wide, x[1]);
            return round(b, loc,
                         geluGradientScalar(b, loc, roundTrip(b, loc, x[0]),
                                            preActivation,
                                            /*tanhForm=*/true));
          }))
    return std::nullopt;
  Value output = reader.getDpsInits()[0];
  Value a = gemm.getDpsInputs()[0], b = gemm.getDpsInputs()[1];
  if (llvm::any_of(ArrayRef<Value>{a, b, aux}, [&](Value read) {
        return weft::buffersMayAlias(output, read);
      }))
    return std::nullopt;
  // The earliest place after the last op that touches the output or
  // writes the pre-activation, if nothing writes a or b before it.
  Operation *at = gemm->getNextNode();
  for (Operation *op = at; op != reader; op = op->getNextNode())
    if (touches(op, output) || weft::mayWrite(op, aux))
      at = op->getNextNode();
  for (Operation *op = gemm->getNextNode(); op != at; op = op->getNextNode())
    if (weft::mayWrite(op, a) || weft::mayWrite(op, b))
      return std::nullopt;
  if (!canHoist(output, at) || !canHoist(aux, at))
    return std::nullopt;
  return GeluEpilogue{reader, output, aux, /*gradient=*/true, at};
}

/// A bias broadcast over all of c that the GEMM's epilogue adds instead
/// (kGemmBias): the last op to touch c before the GEMM writes every element
/// of c (row-major, the GEMM's n its last dim) from one vector read along
/// that dim, which nothing touches until the GEMM.
struct BiasBroadcast {
  linalg::GenericOp producer;
  Value vector;
  /// The producer yields the vector's elements as they are.
  bool asIs;
};

std::optional<BiasBroadcast> matchBiasBroadcast(linalg::GenericOp gemm,
                                                const GemmShape &shape) {
  Value c = gemm.getDpsInits()[0];
  auto cType = cast<MemRefType>(c.getType());
  int64_t rank = cType.getRank();
  AffineMap cMap = gemm.getMatchingIndexingMap(gemm.getDpsInitOperand(0));
  if (!cMap.isProjectedPermutation() ||
      cMap.getResult(rank - 1) !=
          getAffineDimExpr(shape.n, gemm.getContext()) ||
      cType.getStridesAndOffset().first.back() != 1)
    return std::nullopt;
  Operation *previous = gemm->getPrevNode();
  while (previous && !touches(previous, c))
    previous = previous->getPrevNode();
  auto producer = dyn_cast_or_null<linalg::GenericOp>(previous);
  if (!producer || !producer.hasPureBufferSemantics() ||
      producer.getNumDpsInputs() != 1 || producer.getNumDpsInits() != 1 ||
      producer.getDpsInits()[0] != c || producer.getNumReductionLoops() != 0 ||
      !producer.getMatchingIndexingMap(producer.getDpsInitOperand(0))
           .isIdentity() ||
      producer.payloadUsesValueFromOperand(producer.getDpsInitOperand(0)) ||
      !producer.getBody()->getOps<linalg::IndexOp>().empty())
    return std::nullopt;
  OpOperand *input = producer.getDpsInputOperand(0);
  Value vector = input->get();
  auto vectorType = dyn_cast<MemRefType>(vector.getType());
  AffineMap inputMap = producer.getMatchingIndexingMap(input);
  if (!vectorType || vectorType.getRank() != 1 ||
      !vectorType.hasStaticShape() || inputMap.getNumResults() != 1 ||
      inputMap.getResult(0) !=
          getAffineDimExpr(rank - 1, producer.getContext()) ||
      weft::buffersMayAlias(vector, c))
    return std::nullopt;
  for (Operation *op = producer->getNextNode(); op != gemm;
       op = op->getNextNode())
    if (touches(op, vector))
      return std::nullopt;
  auto yield = cast<linalg::YieldOp>(producer.getBody()->getTerminator());
  bool asIs = yield.getOperand(0) == producer.getMatchingBlockArgument(input);
  return BiasBroadcast{producer, vector, asIs};
}

/// A buffer of `type` after the bytes of the arena weft-plan-buffers gave
/// the function of `op` (its one i8 allocation, grown by the buffer's
/// bytes), or nothing where the function has no arena.
Value arenaSlot(PatternRewriter &rewriter, Operation *op, MemRefType type) {
  auto function = op->getParentOfType<func::FuncOp>();
  memref::AllocOp arena;
  for (auto alloc : function.getBody().front().getOps<memref::AllocOp>())
    if (alloc.getType().getRank() == 1 && alloc.getType().hasStaticShape() &&
        alloc.getType().getElementType().isInteger(8) &&
        llvm::any_of(alloc->getUsers(), [](Operation *user) {
          return isa<memref::ViewOp>(user);
        })) {
      arena = alloc;
      break;
    }
  if (!arena)
    return Value();
  // Each slot starts on 256 bytes, as the library's vectors want.
  int64_t offset = llvm::alignTo(arena.getType().getDimSize(0), 256);
  int64_t bytes = type.getNumElements() * weft::elementBytes(type);
  int64_t growth = offset + bytes - arena.getType().getDimSize(0);
  rewriter.modifyOpInPlace(arena, [&] {
    arena.getResult().setType(
        MemRefType::get({offset + bytes}, arena.getType().getElementType()));
  });
  // The plan's peak (weft-plan-buffers) grows with it, at most.
  auto module = function->getParentOfType<ModuleOp>();
  if (auto plan = module->getAttrOfType<DictionaryAttr>(
          weft::WeftDialect::kMemoryPlanAttrName))
    if (auto peak = plan.getAs<IntegerAttr>("peak_bytes")) {
      NamedAttrList entries(plan);
      entries.set("peak_bytes",
                  rewriter.getI64IntegerAttr(peak.getInt() + growth));
      rewriter.modifyOpInPlace(module, [&] {
        module->setAttr(weft::WeftDialect::kMemoryPlanAttrName,
                        entries.getDictionary(module.getContext()));
      });
    }
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointAfter(arena);
  Value shift =
      arith::ConstantIndexOp::create(rewriter, arena.getLoc(), offset);
  return memref::ViewOp::create(rewriter, arena.getLoc(), type, arena, shift,
                                ValueRange{});
}

/// The bias vector the GEMM's epilogue reads, of c's element type
/// `element`: the producer's vector where it yields it as it is, else
/// the producer computing the vector into a slot of the arena (rounded to
/// `element` where it yields a wider float). Nothing where there is no
/// arena.
Value biasVector(PatternRewriter &rewriter, const BiasBroadcast &bias,
                 Type element) {
  auto vectorType = cast<MemRefType>(bias.vector.getType());
  if (bias.asIs && vectorType.getElementType() == element &&
      vectorType.getLayout().isIdentity())
    return bias.vector;
  auto slotType = MemRefType::get(vectorType.getShape(), element);
  Value slot = arenaSlot(rewriter, bias.producer, slotType);
  if (!slot)
    return Value();
  linalg::GenericOp producer = bias.producer;
  rewriter.setInsertionPoint(producer);
  AffineMap identity = rewriter.getMultiDimIdentityMap(1);
  auto vector = linalg::GenericOp::create(
      rewriter, producer.getLoc(), ValueRange{bias.vector}, ValueRange{slot},
      ArrayRef<AffineMap>{identity, identity},
      ArrayRef<utils::IteratorType>{utils::IteratorType::parallel});
  rewriter.inlineRegionBefore(producer.getRegion(), vector.getRegion(),
                              vector.getRegion().end());
  Block &body = vector.getRegion().front();
  body.getArguments().back().setType(element);
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield.getOperand(0).getType() != element) {
    rewriter.setInsertionPoint(yield);
    Value rounded = arith::TruncFOp::create(rewriter, yield.getLoc(), element,
                                            yield.getOperand(0));
    rewriter.modifyOpInPlace(yield, [&] { yield->setOperand(0, rounded); });
  }
  return slot;
}

/// A sum over the rows of the GEMM's b (its k) into a zero-filled f32
/// vector (a bias's gradient: the columns of the output gradient summed,
/// when b is that gradient), which the GEMM's epilogue writes instead
/// (kGemmBiasGradient): the GEMM has no batch dims and an f32 c, row-major
/// with the GEMM's n last; nothing writes b or touches the vector between
/// the GEMM and the sum. Where the vector may share bytes with what the
/// GEMM reads or writes, or the GEMM writes c rounded to bf16 (its epilogue
/// then writes the sums rounded alike: the same values where every reader
/// of the vector rounds it to bf16), the epilogue writes a slot of its own
/// (`throughSlot`), which the sum's place widens into the vector.
struct BiasGradient {
  linalg::GenericOp sum;
  linalg::FillOp fill;
  Value vector;
  bool throughSlot;
};

/// Whether `value` is `buffer` or a view of it.
bool viewOf(Value value, Value buffer) {
  while (value != buffer) {
    auto view = value.getDefiningOp<ViewLikeOpInterface>();
    if (!view)
      return false;
    value = view.getViewSource();
  }
  return true;
}

/// Whether what `sum` leaves in `vector` (a temporary that is its own
/// buffer: an allocation or a view of the arena) is only ever read rounded
/// to bf16, and is read: each op after the sum that uses the vector reads
/// it in a generic that rounds each value first, until one writes all of
/// it without reading it, or its bytes serve another buffer (the plan gives
/// them to one only once the vector is dead).
bool readOnlyRounded(Value vector, linalg::GenericOp sum) {
  if (bufferOf(vector) != vector || isa<BlockArgument>(vector))
    return false;
  int64_t length = cast<MemRefType>(vector.getType()).getDimSize(0);
  bool rounds = false;
  for (Operation *op = sum->getNextNode(); op; op = op->getNextNode()) {
    // A view of it, or a use inside a region (a yield, a return): not
    // followed.
    bool direct = false, elsewhere = false;
    op->walk([&](Operation *inner) {
      for (Value operand : inner->getOperands())
        if (viewOf(operand, vector)) {
          if (inner == op && operand == vector)
            direct = true;
          else
            elsewhere = true;
        }
    });
    if (elsewhere)
      return false;
    if (!direct) {
      if (touches(op, vector))
        return rounds;
      continue;
    }
    if (auto fill = dyn_cast<linalg::FillOp>(op))
      if (fill.getOutputs()[0] == vector)
        return rounds;
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic || !generic.hasPureBufferSemantics())
      return false;
    bool overwrites = false;
    for (OpOperand &operand : generic->getOpOperands()) {
      if (operand.get() != vector)
        continue;
      BlockArgument value = generic.getMatchingBlockArgument(&operand);
      if (generic.isDpsInput(&operand)) {
        if (!onlyRounded(value))
          return false;
        rounds = true;
        continue;
      }
      if (!value.use_empty() || generic.getNumLoops() != 1 ||
          !generic.getMatchingIndexingMap(&operand).isIdentity() ||
          generic.getStaticLoopRanges()[0] != length)
        return false;
      overwrites = true;
    }
    if (overwrites)
      return rounds;
  }
  return rounds;
}

/// Whether `body` is `acc + x` or `acc + extf(x)` for its input x and
/// accumulator acc.
bool isPlainSum(Block &body) {
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value accumulator = body.getArgument(1);
  Value other = add.getLhs() == accumulator   ? add.getRhs()
                : add.getRhs() == accumulator ? add.getLhs()
                                              : Value();
  size_t ops = 2; // the add and the yield
  if (auto widened =
          other ? other.getDefiningOp<arith::ExtFOp>() : arith::ExtFOp()) {
    other = widened.getIn();
    ++ops;
  }
  return other && other == body.getArgument(0) &&
         body.getOperations().size() == ops;
}

/// `written` is what the GEMM writes: c, or the bf16 buffer it rounds c
/// into (`roundedC`).
std::optional<BiasGradient> matchBiasGradient(linalg::GenericOp gemm,
                                              const GemmShape &shape,
                                              Value written, bool roundedC) {
  Value c = gemm.getDpsInits()[0];
  auto cType = cast<MemRefType>(c.getType());
  AffineMap cMap = gemm.getMatchingIndexingMap(gemm.getDpsInitOperand(0));
  MLIRContext *context = gemm.getContext();
  Value bInput = gemm.getDpsInputs()[shape.lhsIsA ? 1 : 0];
  if (!shape.batch.empty() || !cType.getElementType().isF32() ||
      weft::buffersMayAlias(c, bInput) ||
      weft::buffersMayAlias(written, bInput) ||
      cMap.getResult(1) != getAffineDimExpr(shape.n, context) ||
      cType.getStridesAndOffset().first.back() != 1)
    return std::nullopt;
  OpOperand *bOperand = gemm.getDpsInputOperand(shape.lhsIsA ? 1 : 0);
  Value b = bOperand->get();
  AffineMap bMap = gemm.getMatchingIndexingMap(bOperand);
  for (Operation *op = gemm->getNextNode(); op; op = op->getNextNode()) {
    auto sum = dyn_cast<linalg::GenericOp>(op);
    if (!sum || sum.getNumDpsInputs() != 1 || sum.getNumDpsInits() != 1 ||
        sum.getDpsInputs()[0] != b || sum.getNumLoops() != 2 ||
        sum.getNumReductionLoops() != 1 || !sum.hasPureBufferSemantics()) {
      if (mayWrite(op, b))
        return std::nullopt;
      continue;
    }
    // sum[n] += b[k, n], the dims read as the GEMM reads them.
    unsigned reduction =
        sum.getIteratorTypesArray()[0] == utils::IteratorType::reduction ? 0
                                                                         : 1;
    unsigned parallel = 1 - reduction;
    AffineMap inputMap = sum.getMatchingIndexingMap(sum.getDpsInputOperand(0));
    AffineMap outputMap = sum.getMatchingIndexingMap(sum.getDpsInitOperand(0));
    Value vector = sum.getDpsInits()[0];
    auto vectorType = cast<MemRefType>(vector.getType());
    auto position = [&](AffineMap map,
                        unsigned loop) -> std::optional<unsigned> {
      for (auto [i, result] : llvm::enumerate(map.getResults()))
        if (result == getAffineDimExpr(loop, context))
          return i;
      return std::nullopt;
    };
    // The sum reads b's elements where the GEMM reads them: the same
    // positions of k and n, the GEMM's other results (constants) alike.
    bool sameElements = inputMap.getNumResults() == bMap.getNumResults();
    for (unsigned i = 0; sameElements && i < bMap.getNumResults(); ++i)
      if (i != position(bMap, shape.k) && i != position(bMap, shape.n))
        sameElements = isa<AffineConstantExpr>(bMap.getResult(i)) &&
                       inputMap.getResult(i) == bMap.getResult(i);
    if (!sameElements ||
        position(inputMap, reduction) != position(bMap, shape.k) ||
        position(inputMap, parallel) != position(bMap, shape.n) ||
        outputMap.getNumResults() != 1 ||
        outputMap.getResult(0) != getAffineDimExpr(parallel, context) ||
        vectorType.getRank() != 1 || !vectorType.getElementType().isF32() ||
        !vectorType.getLayout().isIdentity() || !isPlainSum(*sum.getBody()))
      return std::nullopt;
    // Zeros before the sum, and nothing else on the vector since the GEMM.
    linalg::FillOp fill = constantFillBefore(sum, vector);
    auto zero = fill ? dyn_cast<FloatAttr>(fillConstant(fill)) : FloatAttr();
    if (!zero || !zero.getValue().isZero())
      return std::nullopt;
    for (Operation *between = gemm->getNextNode(); between != sum;
         between = between->getNextNode())
      if (between != fill.getOperation() && touches(between, vector))
        return std::nullopt;
    if (roundedC && !readOnlyRounded(vector, sum))
      return std::nullopt;
    // The GEMM writes the vector while it reads its operands, whose bytes
    // the plan may have given the vector once the GEMM was done with them.
    bool throughSlot = roundedC || !canHoist(vector, gemm) ||
                       weft::buffersMayAlias(vector, written) ||
                       llvm::any_of(gemm->getOperands(), [&](Value operand) {
                         return weft::buffersMayAlias(vector, operand);
                       });
    return BiasGradient{sum, fill, vector, throughSlot};
  }
  return std::nullopt;
}

/// At `at`, `vector` (f32) written with `slot` (f32, or bf16 widened).
void widenInto(PatternRewriter &rewriter, Operation *at, Value slot,
               Value vector) {
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(at);
  AffineMap identity = rewriter.getMultiDimIdentityMap(1);
  linalg::GenericOp::create(
      rewriter, at->getLoc(), ValueRange{slot}, ValueRange{vector},
      ArrayRef<AffineMap>{identity, identity},
      ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
      [&](OpBuilder &b, Location loc, ValueRange args) {
        Value value = args[0];
        if (value.getType() != args[1].getType())
          value = arith::ExtFOp::create(b, loc, args[1].getType(), value);
        linalg::YieldOp::create(b, loc, value);
      });
}

struct ContractionToBlas : public OpRewritePattern<linalg::GenericOp> {
  ContractionToBlas(MLIRContext *context, StringRef callee,
                    bool requireUnitStrides, bool tf32)
      : OpRewritePattern(context), callee(callee.str()),
        requireUnitStrides(requireUnitStrides), tf32(tf32) {}
  std::string callee;
  bool requireUnitStrides, tf32;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics())
      return failure();
    std::optional<GemmShape> gemm = matchGemm(op);
    if (!gemm)
      return failure();
    for (Value operand : op->getOperands()) {
      auto type = dyn_cast<MemRefType>(operand.getType());
      if (!type || !type.hasStaticShape() ||
          ShapedType::isDynamic(type.getStridesAndOffset().second))
        return failure();
    }
    // f32 x f32, or bf16 x bf16 or f16 x f16 accumulated in f32.
    Type input = getElementTypeOrSelf(op.getDpsInputs()[0].getType());
    if (!getElementTypeOrSelf(op.getDpsInits()[0].getType()).isF32() ||
        getElementTypeOrSelf(op.getDpsInputs()[1].getType()) != input ||
        !(input.isF32() || input.isBF16() || input.isF16()))
      return failure();
    std::string function = callee + (input.isF32()    ? "_f32"
                                     : input.isBF16() ? "_bf16"
                                                      : "_f16");
    Value cOperand = op.getDpsInits()[0];
    std::optional<RoundedResult> rounded;
    if (input.isBF16())
      rounded = matchRoundedResult(op, cOperand, /*inPlaceOnly=*/false, callee);
    SmallVector<int64_t> loopSizes = op.getStaticLoopRanges();
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    unsigned aIndex = gemm->lhsIsA ? 0 : 1, bIndex = 1 - aIndex;
    auto loops = [&](unsigned row, unsigned col) {
      SmallVector<unsigned> l(gemm->batch);
      l.push_back(row);
      l.push_back(col);
      return l;
    };
    Value aOperand = op.getDpsInputs()[aIndex];
    Value bOperand = op.getDpsInputs()[bIndex];
    MemRefType aType = gemmViewType(aOperand, maps[aIndex],
                                    loops(gemm->m, gemm->k), loopSizes);
    MemRefType bType = gemmViewType(bOperand, maps[bIndex],
                                    loops(gemm->k, gemm->n), loopSizes);
    MemRefType cType =
        gemmViewType(cOperand, maps[2], loops(gemm->m, gemm->n), loopSizes);
    if (requireUnitStrides &&
        !llvm::all_of(ArrayRef<MemRefType>{aType, bType, cType},
                      readsAsColumnMajor))
      return failure();
    if (rounded && !rounded->inPlace) {
      // Row-major like c, the bf16 buffer is viewed as the GEMM views c.
      auto roundedType = MemRefType::get(
          cType.getShape(), getElementTypeOrSelf(rounded->rounded.getType()),
          cType.getLayout());
      if ((requireUnitStrides && !readsAsColumnMajor(roundedType)) ||
          !canHoist(rounded->rounded, rounded->producer) ||
          touchedBetween(rounded->producer, rounded->reader, rounded->rounded))
        rounded.reset();
      else
        cType = roundedType;
    }
    // The rounded buffer's bytes are busy before the reader: c's own bytes
    // hold the bf16 result, which the reader then copies.
    if (!rounded && input.isBF16())
      rounded = matchRoundedResult(op, cOperand, /*inPlaceOnly=*/true, callee);
    // c = a * b (beta = 0) where a zero fill of all of c comes right
    // before: the library writes c without reading it, and the fill goes.
    linalg::FillOp zeroFill;
    if (cType.getNumElements() ==
        cast<MemRefType>(cOperand.getType()).getNumElements())
      if (linalg::FillOp fill = constantFillBefore(op, cOperand))
        if (auto zero = dyn_cast<FloatAttr>(fillConstant(fill));
            zero && zero.getValue().isZero())
          zeroFill = fill;
    // A bias broadcast over c before the GEMM: the epilogue adds it (c =
    // a * b + bias, beta = 0) and the broadcast goes, or leaves a vector of
    // c's element type.
    std::optional<BiasBroadcast> bias;
    if (!zeroFill)
      bias = matchBiasBroadcast(op, *gemm);
    // The reader of the rounded result computes a GELU or its gradient:
    // the epilogue does, writing the reader's output.
    std::optional<GeluEpilogue> gelu;
    if (rounded && (zeroFill || (bias && !rounded->inPlace)))
      gelu = matchGeluEpilogue(op, *rounded);
    if (gelu) {
      auto strides = cType.getStridesAndOffset().first;
      int64_t geluFlags =
          gelu->gradient ? runtime::kGemmGeluGradient : runtime::kGemmGelu;
      if (runtime::geluEpilogueRefusal(
              geluFlags | (bias ? runtime::kGemmBias : 0), cType.getRank(),
              cType.getShape().back(),
              strides.back() == 1 ? strides[cType.getRank() - 2] : -1, 2) ||
          (!gelu->gradient &&
           (!canHoist(gelu->output, op) ||
            touchedBetween(rounded->producer, gelu->reader, gelu->output))))
        gelu.reset();
    }
    if (gelu)
      cType = MemRefType::get(cType.getShape(), rewriter.getBF16Type(),
                              cType.getLayout());
    auto view = cOperand.getDefiningOp<memref::ViewOp>();
    if (rounded && rounded->inPlace && !gelu && !view)
      rounded.reset();
    if (rounded && rounded->inPlace && !gelu) {
      // c's first bytes, as bf16 in c's shape.
      rewriter.setInsertionPointAfter(view);
      rounded->rounded = memref::ViewOp::create(
          rewriter, view.getLoc(),
          MemRefType::get(cast<MemRefType>(cOperand.getType()).getShape(),
                          rewriter.getBF16Type()),
          view.getSource(), view.getByteShift(), view.getSizes());
      rewriter.setInsertionPoint(op);
      cType = MemRefType::get(cType.getShape(), rewriter.getBF16Type(),
                              cType.getLayout());
    }
    Value biasVectorArg;
    // Or the sum over b's rows after it: the epilogue writes it.
    std::optional<BiasGradient> biasGradient;
    Value biasGradientSlot;
    if (!bias && !gelu)
      biasGradient =
          matchBiasGradient(op, *gemm, rounded ? rounded->rounded : cOperand,
                            rounded.has_value());
    if (biasGradient && biasGradient->throughSlot) {
      OpBuilder::InsertionGuard guard(rewriter);
      auto vectorType = cast<MemRefType>(biasGradient->vector.getType());
      biasGradientSlot =
          arenaSlot(rewriter, op,
                    MemRefType::get(vectorType.getShape(),
                                    rounded ? rewriter.getBF16Type()
                                            : rewriter.getF32Type()));
      if (!biasGradientSlot)
        biasGradient.reset();
    }
    if (bias) {
      OpBuilder::InsertionGuard guard(rewriter);
      biasVectorArg = biasVector(rewriter, *bias, cType.getElementType());
      if (!biasVectorArg)
        bias.reset();
    }
    // The forward GELU without the bias it was matched with would
    // accumulate onto c.
    if (gelu && !zeroFill && !bias)
      gelu.reset();
    Location loc = op.getLoc();
    if (rounded && !rounded->inPlace)
      rewriter.modifyOpInPlace(
          op, [&] { hoist(rounded->rounded, rounded->producer); });
    if (gelu && gelu->gradient) {
      rewriter.setInsertionPoint(gelu->at);
      rewriter.modifyOpInPlace(op, [&] {
        hoist(gelu->output, gelu->at);
        hoist(gelu->aux, gelu->at);
      });
    } else if (gelu) {
      rewriter.modifyOpInPlace(op, [&] { hoist(gelu->output, op); });
    }
    Value a = gemmView(rewriter, loc, aOperand, aType);
    Value b = gemmView(rewriter, loc, bOperand, bType);
    Value c = gemmView(rewriter, loc,
                       gelu      ? gelu->output
                       : rounded ? rounded->rounded
                                 : cOperand,
                       cType);
    if (rounded)
      function += "_bf16";
    SmallVector<Value> args;
    SmallVector<Type> argTypes;
    static_assert(
        runtime::kGemmResultOperand == 2 && runtime::kGemmBiasOperand == 3 &&
            runtime::kGemmAuxOperand == 4 && runtime::kGemmFlagsOperand == 5,
        "gemm(a, b, c, bias, aux, flags)");
    for (Value v : {a, b, c}) {
      argTypes.push_back(UnrankedMemRefType::get(getElementTypeOrSelf(v), 0));
      args.push_back(memref::CastOp::create(rewriter, loc, argTypes.back(), v));
    }
    Value cArg = args.back();
    // Without a bias or aux, c stands in for them (not touched).
    argTypes.push_back(argTypes.back());
    if (biasGradientSlot) {
      biasVectorArg = biasGradientSlot;
    } else if (biasGradient) {
      biasVectorArg = biasGradient->vector;
      // The GEMM writes it: its view is made before.
      rewriter.modifyOpInPlace(op, [&] { hoist(biasVectorArg, op); });
    }
    args.push_back(bias || biasGradient
                       ? memref::CastOp::create(rewriter, loc, argTypes.back(),
                                                biasVectorArg)
                       : cArg);
    argTypes.push_back(argTypes.back());
    args.push_back(
        gelu ? memref::CastOp::create(rewriter, loc, argTypes.back(),
                                      gemmView(rewriter, loc, gelu->aux, cType))
             : cArg);
    int64_t flags =
        (zeroFill || bias ? 0 : runtime::kGemmAccumulate) |
        (tf32 && input.isF32() ? runtime::kGemmTf32 : 0) |
        (bias ? runtime::kGemmBias : 0) |
        (biasGradient ? runtime::kGemmBiasGradient : 0) |
        (gelu ? gelu->gradient ? runtime::kGemmGeluGradient : runtime::kGemmGelu
              : 0);
    argTypes.push_back(rewriter.getI64Type());
    args.push_back(arith::ConstantIntOp::create(rewriter, loc, flags, 64));
    auto module = op->getParentOfType<ModuleOp>();
    if (!module.lookupSymbol(function)) {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(module.getBody());
      auto decl = func::FuncOp::create(rewriter, loc, function,
                                       rewriter.getFunctionType(argTypes, {}));
      decl.setPrivate();
      decl->setAttr(weft::kGemmAttrName, rewriter.getUnitAttr());
    }
    func::CallOp::create(rewriter, loc, function, TypeRange{}, args);
    rewriter.eraseOp(op);
    if (zeroFill)
      rewriter.eraseOp(zeroFill);
    if (bias)
      rewriter.eraseOp(bias->producer);
    if (biasGradient) {
      if (biasGradientSlot)
        widenInto(rewriter, biasGradient->sum, biasGradientSlot,
                  biasGradient->vector);
      rewriter.eraseOp(biasGradient->sum);
      rewriter.eraseOp(biasGradient->fill);
    }
    if (gelu) {
      rewriter.eraseOp(gelu->reader);
    } else if (rounded) {
      auto producer = dyn_cast<linalg::GenericOp>(rounded->producer);
      if (producer && !bias) {
        // The bf16 buffer in c's shape: both are row-major.
        auto shape = cast<MemRefType>(cOperand.getType()).getShape();
        rewriter.setInsertionPoint(producer);
        Value target = gemmView(
            rewriter, loc, rounded->rounded,
            MemRefType::get(shape,
                            getElementTypeOrSelf(rounded->rounded.getType())));
        writeRounded(rewriter, producer, target);
      }
      if (rounded->inPlace)
        readInPlace(rewriter, *rounded, cOperand);
      else
        readRounded(rewriter, *rounded);
    }
    return success();
  }
};

struct WeftContractionsToBlasPass
    : public weft::impl::WeftContractionsToBlasBase<
          WeftContractionsToBlasPass> {
  using WeftContractionsToBlasBase::WeftContractionsToBlasBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ContractionToBlas>(&getContext(), callee, requireUnitStrides,
                                    tf32);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

struct WeftApproximateMathPass
    : public weft::impl::WeftApproximateMathBase<WeftApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
      return name == math::ErfOp::getOperationName() ||
             name == math::TanhOp::getOperationName() ||
             name == math::ExpOp::getOperationName() ||
             name == math::LogOp::getOperationName();
    });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
