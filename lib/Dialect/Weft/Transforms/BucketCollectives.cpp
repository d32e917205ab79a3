//===- BucketCollectives.cpp - Combine independent collectives ------------===//
//
// Each member is brought to a "rank-major" layout [1 or n, k] in which the
// part every rank sends or receives is one contiguous row; members are
// concatenated along the second dim, so one collective over dim 0 moves
// every member's part at once, and slices of its result are the members'.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/Layers.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include <map>

namespace weft {
#define GEN_PASS_DEF_WEFTBUCKETCOLLECTIVES
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// The dim a collective splits or gathers; 0 for an all-reduce (whose
/// rank-major layout is [1, k]).
int64_t collectiveDim(Operation *op) {
  if (auto scatter = dyn_cast<shard::ReduceScatterOp>(op))
    return scatter.getScatterAxis().getSExtValue();
  if (auto gather = dyn_cast<shard::AllGatherOp>(op))
    return gather.getGatherAxis().getSExtValue();
  return 0;
}

/// Ops that may share a bucket print the same key.
std::string bucketKey(Operation *op) {
  std::string key;
  llvm::raw_string_ostream os(key);
  os << op->getName() << " " << op->getAttr("grid") << " "
     << op->getAttr("grid_axes") << " " << op->getAttr("reduction") << " "
     << tensorTypeOf(op->getOperand(0)).getElementType();
  return key;
}

bool isBucketable(Operation *op) {
  return isa<shard::AllReduceOp, shard::ReduceScatterOp, shard::AllGatherOp>(
             op) &&
         llvm::isa<RankedTensorType>(op->getOperand(0).getType()) &&
         tensorTypeOf(op->getOperand(0)).hasStaticShape();
}

/// `dim` moved to the front (nothing to move in a scalar).
SmallVector<int64_t> toFront(int64_t rank, int64_t dim) {
  if (rank == 0)
    return {};
  SmallVector<int64_t> permutation{dim};
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim)
      permutation.push_back(d);
  return permutation;
}

/// Moves the small side-effect-free ops that read a collective's result
/// (directly or not) down to just before their first user. Such glue (the
/// running sum of the gradient norm's per-parameter partial sums) would
/// otherwise read each result at once and keep its collective out of a
/// bucket; tensors larger than this stay where they are, so the memory
/// plan does not change.
void sinkSmallConsumers(Block &block) {
  constexpr int64_t maxElements = 1024;
  llvm::DenseSet<Operation *> consumers;
  for (Operation &op : block) {
    bool reads = llvm::any_of(op.getOperands(), [&](Value operand) {
      Operation *producer = operand.getDefiningOp();
      return producer && (isBucketable(producer) || consumers.contains(producer));
    });
    bool small = op.getNumResults() > 0 &&
                 llvm::all_of(op.getResultTypes(), [](Type type) {
                   auto tensor = llvm::dyn_cast<RankedTensorType>(type);
                   return tensor && tensor.hasStaticShape() &&
                          tensor.getNumElements() <= maxElements;
                 });
    // Collectives stay: the bucketer decides where they go.
    if (reads && small && isa<WeftDialect>(op.getDialect()) &&
        isMemoryEffectFree(&op) && op.getNumRegions() == 0)
      consumers.insert(&op);
  }
  SmallVector<Operation *> order;
  for (Operation &op : block)
    if (consumers.contains(&op))
      order.push_back(&op);
  for (Operation *op : llvm::reverse(order)) {
    Operation *firstUser = nullptr;
    for (Operation *user : op->getUsers()) {
      user = block.findAncestorOpInBlock(*user);
      if (user && (!firstUser || user->isBeforeInBlock(firstUser)))
        firstUser = user;
    }
    if (firstUser)
      op->moveBefore(firstUser);
  }
}

/// The layer a parameter belongs to: its numbered layer ("h.3"), else its
/// name without the last component ("ln_f.weight" -> "ln_f").
std::string layerOf(StringRef name) {
  if (std::optional<std::string> layer = numberedLayerOf(name))
    return *layer;
  return name.contains('.') ? name.rsplit('.').first.str() : name.str();
}

class Bucketer {
public:
  Bucketer(OpBuilder &builder, int64_t capacity, func::FuncOp func)
      : builder(builder), capacity(capacity), func(func) {}

  void run(Block &block) {
    for (Operation &op : llvm::make_early_inc_range(block)) {
      // A gather of a parameter shard may move up to the gathers before it:
      // its operand is an argument. Consecutive gathers of one layer's
      // parameters become one, issued where the first of them was.
      if (std::optional<std::string> layer = gatheredLayer(&op)) {
        std::string key = bucketKey(&op);
        Bucket &bucket = layerBuckets[key];
        if (!bucket.members.empty() &&
            (bucket.layer != *layer || bucket.bytes >= capacity))
          flushLayer(key);
        Bucket &open = layerBuckets[key];
        open.layer = *layer;
        // One gather per parameter: a second use in the layer shares it.
        auto same = llvm::find_if(open.members, [&](Operation *member) {
          return member->getOperand(0) == op.getOperand(0) &&
                 member->getResultTypes() == op.getResultTypes();
        });
        if (same != open.members.end()) {
          op.getResult(0).replaceAllUsesWith((*same)->getResult(0));
          op.erase();
          continue;
        }
        open.members.push_back(&op);
        open.bytes += bytesOf(&op);
        continue;
      }
      // A read of a pending result issues its bucket first, a read inside
      // a region of the op (a micro-batch loop's body) as well.
      op.walk([&](Operation *reader) {
        for (Value operand : reader->getOperands()) {
          auto it = pendingBucket.find(operand);
          if (it != pendingBucket.end()) {
            builder.setInsertionPoint(&op);
            flush(it->second);
          }
        }
      });
      if (!isBucketable(&op))
        continue;
      std::string key = bucketKey(&op);
      Bucket &bucket = buckets[key];
      bucket.members.push_back(&op);
      bucket.bytes += bytesOf(&op);
      pendingBucket[op.getResult(0)] = key;
      if (bucket.bytes >= capacity) {
        builder.setInsertionPointAfter(&op);
        flush(key);
      }
    }
    SmallVector<std::string> open;
    for (auto &entry : layerBuckets)
      open.push_back(entry.first);
    for (const std::string &key : open)
      flushLayer(key);
  }

private:
  struct Bucket {
    SmallVector<Operation *> members;
    int64_t bytes = 0;
    std::string layer; // of a parameter gather bucket
  };

  static int64_t bytesOf(Operation *op) {
    RankedTensorType type = tensorTypeOf(op->getOperand(0));
    return type.getNumElements() * type.getElementTypeBitWidth() / 8;
  }

  /// The layer of the parameter an all-gather gathers, if it does.
  std::optional<std::string> gatheredLayer(Operation *op) {
    if (!isa<shard::AllGatherOp>(op) || !isBucketable(op))
      return std::nullopt;
    auto arg = llvm::dyn_cast<BlockArgument>(op->getOperand(0));
    if (!arg)
      return std::nullopt;
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  WeftDialect::kParamAttrName);
    if (!name)
      return std::nullopt;
    return layerOf(name.getValue());
  }

  void flushLayer(const std::string &key) {
    auto it = layerBuckets.find(key);
    if (it == layerBuckets.end())
      return;
    Bucket bucket = it->second;
    layerBuckets.erase(it);
    builder.setInsertionPoint(bucket.members.front());
    combine(bucket.members, bucket.layer + " parameters");
  }

  /// `value` in rank-major layout: `dim` first, then [rows, rest].
  Value toRankMajor(Value value, int64_t dim, int64_t rows, Location loc) {
    RankedTensorType type = tensorTypeOf(value);
    if (dim != 0)
      value = TransposeOp::create(
          builder, loc, value,
          builder.getDenseI64ArrayAttr(toFront(type.getRank(), dim)));
    return ReshapeOp::create(
        builder, loc,
        RankedTensorType::get({rows, type.getNumElements() / rows},
                              type.getElementType()),
        value);
  }

  /// The inverse of toRankMajor, for a result of type `type`.
  Value fromRankMajor(Value value, RankedTensorType type, int64_t dim,
                      Location loc) {
    SmallVector<int64_t> permutation = toFront(type.getRank(), dim);
    SmallVector<int64_t> permuted;
    for (int64_t d : permutation)
      permuted.push_back(type.getDimSize(d));
    value = ReshapeOp::create(
        builder, loc, RankedTensorType::get(permuted, type.getElementType()),
        value);
    if (dim == 0)
      return value;
    SmallVector<int64_t> inverse(permutation.size());
    for (auto [i, d] : llvm::enumerate(permutation))
      inverse[d] = i;
    return TransposeOp::create(builder, loc, value,
                               builder.getDenseI64ArrayAttr(inverse));
  }

  void flush(std::string key) {
    Bucket bucket = buckets[key];
    buckets.erase(key);
    for (Operation *member : bucket.members)
      pendingBucket.erase(member->getResult(0));
    combine(bucket.members);
  }

  /// Replaces `members` by one collective at the builder's insertion point,
  /// named `name` when given.
  void combine(ArrayRef<Operation *> members, StringRef name = "") {
    if (members.size() < 2)
      return;
    Operation *first = members.front();
    SmallVector<Location> locations;
    for (Operation *member : members)
      locations.push_back(member->getLoc());
    Location loc = builder.getFusedLoc(locations);
    if (!name.empty())
      loc = NameLoc::get(builder.getStringAttr(name), loc);

    // Rows of the operand and of the result in rank-major layout.
    int64_t parts = 1;
    if (!isa<shard::AllReduceOp>(first)) {
      RankedTensorType in = tensorTypeOf(first->getOperand(0));
      RankedTensorType out = tensorTypeOf(first->getResult(0));
      int64_t dim = collectiveDim(first);
      parts = std::max(in.getDimSize(dim), out.getDimSize(dim)) /
              std::min(in.getDimSize(dim), out.getDimSize(dim));
    }
    int64_t operandRows = isa<shard::ReduceScatterOp>(first) ? parts : 1;
    int64_t resultRows = isa<shard::AllGatherOp>(first) ? parts : 1;

    SmallVector<Value> pieces;
    SmallVector<int64_t> widths;
    for (Operation *member : members) {
      pieces.push_back(toRankMajor(member->getOperand(0), collectiveDim(member),
                                   operandRows, member->getLoc()));
      widths.push_back(tensorTypeOf(pieces.back()).getDimSize(1));
    }
    Value combined =
        ConcatOp::create(builder, loc, pieces, builder.getI64IntegerAttr(1));
    RankedTensorType combinedType = tensorTypeOf(combined);
    // Each rank's row keeps its width: only the number of rows changes.
    int64_t width = combinedType.getDimSize(1);
    OperationState state(loc, first->getName());
    state.addOperands(combined);
    state.addAttributes(first->getAttrs());
    state.addTypes(RankedTensorType::get({resultRows, width},
                                         combinedType.getElementType()));
    // The combined collective works on dim 0 of the rank-major layout.
    if (isa<shard::ReduceScatterOp>(first))
      state.attributes.set("scatter_axis", builder.getIndexAttr(0));
    if (isa<shard::AllGatherOp>(first))
      state.attributes.set("gather_axis", builder.getIndexAttr(0));
    Value reduced = builder.create(state)->getResult(0);

    int64_t offset = 0;
    for (auto [member, pieceWidth] : llvm::zip(members, widths)) {
      Value piece = SliceOp::create(
          builder, member->getLoc(), reduced, ArrayRef<int64_t>{0, offset},
          ArrayRef<int64_t>{resultRows, pieceWidth}, ArrayRef<int64_t>{1, 1});
      offset += pieceWidth;
      Value result =
          fromRankMajor(piece, tensorTypeOf(member->getResult(0)),
                        collectiveDim(member), member->getLoc());
      member->getResult(0).replaceAllUsesWith(result);
    }
    // Only now: the insertion point may be a member.
    for (Operation *member : members)
      member->erase();
  }

  OpBuilder &builder;
  int64_t capacity;
  func::FuncOp func;
  std::map<std::string, Bucket> buckets;
  std::map<std::string, Bucket> layerBuckets;
  llvm::DenseMap<Value, std::string> pendingBucket;
};

struct WeftBucketCollectivesPass
    : public weft::impl::WeftBucketCollectivesBase<WeftBucketCollectivesPass> {
  using WeftBucketCollectivesBase::WeftBucketCollectivesBase;

  void runOnOperation() override {
    if (bucketMb <= 0)
      return;
    OpBuilder builder(&getContext());
    auto capacity = static_cast<int64_t>(bucketMb * 1024 * 1024);
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal()) {
        sinkSmallConsumers(func.getBody().front());
        Bucketer(builder, capacity, func).run(func.getBody().front());
      }
  }
};

} // namespace
