//===- Sharding.cpp - Meshes, shardings and annotations -------------------===//

#include "weft/Dialect/Weft/Transforms/Sharding.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/runtime/ShardLayout.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace weft;

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

int64_t Mesh::size(ArrayRef<MeshAxis> axes) const {
  int64_t product = 1;
  for (MeshAxis axis : axes)
    product *= sizes[axis];
  return product;
}

std::optional<MeshAxis> Mesh::axisNamed(StringRef name) const {
  for (auto [index, axisName] : llvm::enumerate(names))
    if (axisName == name)
      return static_cast<MeshAxis>(index);
  return std::nullopt;
}

std::string Mesh::describe(ArrayRef<MeshAxis> axes) const {
  SmallVector<StringRef> parts;
  for (MeshAxis axis : axes)
    parts.push_back(names[axis]);
  return llvm::join(parts, ",");
}

std::optional<Mesh> Mesh::parse(StringRef text, std::string &error) {
  runtime::MeshShape shape;
  if (!runtime::MeshShape::parse(text.str(), shape, &error))
    return std::nullopt;
  if (shape.names.empty()) {
    error = "empty mesh (expected e.g. 'dp=2,tp=2')";
    return std::nullopt;
  }
  Mesh mesh;
  mesh.symbol = "mesh";
  mesh.names.assign(shape.names.begin(), shape.names.end());
  mesh.sizes.assign(shape.sizes.begin(), shape.sizes.end());
  return mesh;
}

std::optional<Mesh> Mesh::find(ModuleOp module) {
  for (auto grid : module.getOps<shard::GridOp>()) {
    Mesh mesh;
    mesh.symbol = grid.getSymName().str();
    mesh.sizes.assign(grid.getShape().begin(), grid.getShape().end());
    auto names = grid->getAttrOfType<ArrayAttr>("weft.axis_names");
    for (int64_t axis = 0; axis < grid.getRank(); ++axis) {
      StringAttr name = names && axis < static_cast<int64_t>(names.size())
                            ? llvm::dyn_cast<StringAttr>(names[axis])
                            : StringAttr();
      mesh.names.push_back(name ? name.str() : "axis" + std::to_string(axis));
    }
    if (auto context =
            grid->getAttrOfType<StringAttr>(WeftDialect::kContextAxisAttrName))
      mesh.contextAxis = mesh.axisNamed(context.getValue());
    auto attention =
        grid->getAttrOfType<StringAttr>(WeftDialect::kContextAttentionAttrName);
    mesh.contextZigzag = attention && attention.getValue() == "ring";
    mesh.contextRing = mesh.contextZigzag ||
                       (attention && attention.getValue() == "ring-contiguous");
    return mesh;
  }
  return std::nullopt;
}

void Mesh::materialize(ModuleOp module) const {
  OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
  auto grid = shard::GridOp::create(builder, module.getLoc(), symbol, sizes);
  SmallVector<Attribute> nameAttrs;
  for (const std::string &name : names)
    nameAttrs.push_back(builder.getStringAttr(name));
  grid->setAttr("weft.axis_names", builder.getArrayAttr(nameAttrs));
}

//===----------------------------------------------------------------------===//
// TensorSharding
//===----------------------------------------------------------------------===//

bool TensorSharding::isReplicated() const {
  return partial.empty() &&
         llvm::none_of(dims, [](const DimSharding &d) { return d.isSplit(); });
}

bool TensorSharding::usesAxis(MeshAxis axis) const {
  return llvm::is_contained(partial, axis) ||
         llvm::any_of(dims, [&](const DimSharding &d) {
           return llvm::is_contained(d.axes, axis);
         });
}

std::string TensorSharding::describe(const Mesh &mesh) const {
  SmallVector<std::string> parts;
  for (const DimSharding &dim : dims) {
    std::string part = "[" + mesh.describe(dim.axes) + "]";
    if (dim.isSplit() && dim.blocks > 1)
      part += "x" + std::to_string(dim.blocks);
    parts.push_back(part);
  }
  std::string text = llvm::join(parts, ", ");
  if (!partial.empty())
    text += " partial(" + mesh.describe(partial) + ")";
  return text;
}

std::optional<TensorSharding> TensorSharding::parse(StringRef text,
                                                    const Mesh &mesh) {
  TensorSharding sharding;
  text = text.trim();
  while (!text.empty()) {
    if (!text.consume_front("["))
      return std::nullopt;
    auto [inside, rest] = text.split(']');
    DimSharding dim;
    SmallVector<StringRef> names;
    inside.split(names, ',', -1, false);
    for (StringRef name : names) {
      std::optional<MeshAxis> axis = mesh.axisNamed(name.trim());
      if (!axis)
        return std::nullopt;
      dim.axes.push_back(*axis);
    }
    text = rest;
    if (text.consume_front("x")) {
      size_t digits = text.find_first_not_of("0123456789");
      if (text.take_front(digits).getAsInteger(10, dim.blocks))
        return std::nullopt;
      text = text.drop_front(digits);
    }
    sharding.dims.push_back(dim);
    text = text.ltrim();
    if (!text.empty() && !text.consume_front(","))
      return std::nullopt;
    text = text.ltrim();
  }
  return sharding;
}

std::string TensorSharding::runtimeSpec(const Mesh &mesh) const {
  SmallVector<std::string> parts;
  for (const DimSharding &dim : dims) {
    if (!dim.isSplit()) {
      parts.push_back("-");
      continue;
    }
    SmallVector<std::string> axes;
    for (MeshAxis axis : dim.axes)
      axes.push_back(std::to_string(axis));
    std::string part = llvm::join(axes, ".");
    if (dim.blocks > 1)
      part += "x" + std::to_string(dim.blocks);
    if (mesh.isZigzag(dim.axes))
      part += "z";
    parts.push_back(part);
  }
  return llvm::join(parts, ",");
}

SmallVector<int64_t> TensorSharding::localShape(ArrayRef<int64_t> shape,
                                                const Mesh &mesh) const {
  // Uneven splits (pad-uneven) round up: the last shards end in padding.
  SmallVector<int64_t> local(shape);
  for (auto [index, dim] : llvm::enumerate(dims))
    local[index] = llvm::divideCeil(local[index], mesh.size(dim.axes));
  return local;
}

TensorSharding weft::readSharding(shard::ShardingOp op, int64_t rank) {
  TensorSharding sharding = TensorSharding::replicated(rank);
  auto blocks = op->getAttrOfType<DenseI64ArrayAttr>("weft.blocks");
  for (auto [index, axes] : llvm::enumerate(op.getSplitAxes().getAxes())) {
    if (static_cast<int64_t>(index) >= rank)
      break;
    sharding.dims[index].axes.assign(axes.asArrayRef().begin(),
                                     axes.asArrayRef().end());
    if (blocks && static_cast<int64_t>(index) < blocks.size())
      sharding.dims[index].blocks = blocks[index];
  }
  return sharding;
}

shard::ShardingOp weft::createShardingOp(OpBuilder &builder, Location loc,
                                         const TensorSharding &sharding,
                                         const Mesh &mesh) {
  SmallVector<shard::GridAxesAttr> splitAxes;
  SmallVector<int64_t> blocks;
  bool blocked = false;
  for (const DimSharding &dim : sharding.dims) {
    splitAxes.push_back(builder.getDenseI16ArrayAttr(dim.axes));
    blocks.push_back(dim.isSplit() ? dim.blocks : 1);
    blocked |= dim.isSplit() && dim.blocks > 1;
  }
  // Trailing unsplit dims are left out, as upstream prints them; at least
  // one (possibly empty) entry must remain.
  while (splitAxes.size() > 1 && splitAxes.back().empty())
    splitAxes.pop_back();
  if (splitAxes.empty())
    splitAxes.push_back(builder.getDenseI16ArrayAttr({}));
  auto op = shard::ShardingOp::create(builder, loc, mesh.symbol, splitAxes);
  if (blocked)
    op->setAttr("weft.blocks", builder.getDenseI64ArrayAttr(blocks));
  return op;
}

std::string weft::describeTensor(Value value) {
  if (auto arg = llvm::dyn_cast<BlockArgument>(value)) {
    if (auto func = llvm::dyn_cast<FunctionOpInterface>(
            arg.getOwner()->getParentOp())) {
      if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        "weft.param"))
        return ("parameter '" + name.getValue() + "'").str();
      if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        "weft.input"))
        return ("input '" + name.getValue() + "'").str();
    }
    return "argument " + std::to_string(arg.getArgNumber());
  }
  auto result = llvm::cast<OpResult>(value);
  return "result " + std::to_string(result.getResultNumber()) + " of '" +
         result.getOwner()->getName().getStringRef().str() + "'";
}

FailureOr<SmallVector<Annotation>> weft::readAnnotations(Operation *function,
                                                         const Mesh &mesh) {
  SmallVector<Annotation> annotations;
  SmallVector<shard::ShardOp> ops;
  function->walk([&](shard::ShardOp op) { ops.push_back(op); });
  for (shard::ShardOp op : ops) {
    auto shardingOp = op.getSharding().getDefiningOp<shard::ShardingOp>();
    if (!shardingOp)
      return op.emitError(
          "the sharding of a shard.shard must come from shard.sharding");
    if (shardingOp.getGrid() != mesh.symbol)
      return op.emitError()
             << "annotation on grid '" << shardingOp.getGrid()
             << "', but the module's mesh is '" << mesh.symbol << "'";
    Annotation annotation;
    annotation.op = op;
    annotation.sharding = readSharding(shardingOp, op.getType().getRank());
    for (const DimSharding &dim : annotation.sharding.dims)
      for (MeshAxis axis : dim.axes)
        if (axis < 0 || axis >= static_cast<int64_t>(mesh.sizes.size()))
          return op.emitError() << "mesh axis " << axis
                                << " does not exist in '" << mesh.symbol << "'";
    annotation.value = op.getSrc();
    while (auto inner = annotation.value.getDefiningOp<shard::ShardOp>())
      annotation.value = inner.getSrc();
    if (auto priority =
            op->getAttrOfType<IntegerAttr>(WeftDialect::kPriorityAttrName))
      annotation.priority = priority.getInt();
    if (auto pinned = op->getAttrOfType<DenseI64ArrayAttr>(
            WeftDialect::kPinnedDimsAttrName))
      llvm::append_range(annotation.pinnedDims, pinned.asArrayRef());
    annotations.push_back(std::move(annotation));
  }
  return annotations;
}

void weft::dropAnnotations(ArrayRef<Annotation> annotations) {
  for (const Annotation &annotation : annotations) {
    shard::ShardOp op = annotation.op;
    op.getResult().replaceAllUsesWith(op.getSrc());
    Value sharding = op.getSharding();
    op.erase();
    if (sharding.use_empty())
      sharding.getDefiningOp()->erase();
  }
}

std::optional<OpShardingRule> weft::getShardingRule(Operation *op) {
  if (auto ruled = dyn_cast<ShardingRuleOpInterface>(op))
    return ruled.getShardingRule();
  return std::nullopt;
}
