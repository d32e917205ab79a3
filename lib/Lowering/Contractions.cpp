//===- Contractions.cpp - GEMM-shaped linalg ops --------------------------===//

#include "weft/Lowering/Contractions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace weft;

std::optional<GemmShape> weft::matchGemm(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return std::nullopt;
  SmallVector<utils::IteratorType> its = op.getIteratorTypesArray();
  if (llvm::count(its, utils::IteratorType::reduction) != 1)
    return std::nullopt;
  // Body: yield(addf(out, mulf(in0, in1))) in either operand order, each
  // input widened to the accumulator's type first where it is narrower
  // (a bf16 product accumulated in f32).
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return std::nullopt;
  Value out = body.getArgument(2);
  Value product = add.getLhs() == out ? add.getRhs() : add.getLhs();
  if (add.getLhs() != out && add.getRhs() != out)
    return std::nullopt;
  auto mul = product.getDefiningOp<arith::MulFOp>();
  if (!mul)
    return std::nullopt;
  unsigned widened = 0;
  auto input = [&](Value v) {
    if (auto extend = v.getDefiningOp<arith::ExtFOp>()) {
      ++widened;
      return extend.getIn();
    }
    return v;
  };
  Value lhs = input(mul.getLhs()), rhs = input(mul.getRhs());
  if (!((lhs == body.getArgument(0) && rhs == body.getArgument(1)) ||
        (lhs == body.getArgument(1) && rhs == body.getArgument(0))) ||
      body.getOperations().size() != 3 + widened)
    return std::nullopt;
  // Every operand dim must be a loop or the constant 0.
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  auto loopsOf =
      [](AffineMap map) -> std::optional<llvm::SmallSet<unsigned, 4>> {
    llvm::SmallSet<unsigned, 4> loops;
    for (AffineExpr e : map.getResults()) {
      if (auto d = dyn_cast<AffineDimExpr>(e))
        loops.insert(d.getPosition());
      else if (auto c = dyn_cast<AffineConstantExpr>(e);
               !c || c.getValue() != 0)
        return std::nullopt;
    }
    return loops;
  };
  auto a = loopsOf(maps[0]), b = loopsOf(maps[1]), c = loopsOf(maps[2]);
  if (!a || !b || !c)
    return std::nullopt;
  AffineMap outMap = maps[2];
  if (!outMap.isProjectedPermutation() || outMap.getNumResults() < 2)
    return std::nullopt;
  unsigned k = llvm::find(its, utils::IteratorType::reduction) - its.begin();
  GemmShape shape;
  shape.k = k;
  shape.m = cast<AffineDimExpr>(outMap.getResult(outMap.getNumResults() - 2))
                .getPosition();
  shape.n = cast<AffineDimExpr>(outMap.getResult(outMap.getNumResults() - 1))
                .getPosition();
  for (unsigned i = 0; i + 2 < outMap.getNumResults(); ++i)
    shape.batch.push_back(
        cast<AffineDimExpr>(outMap.getResult(i)).getPosition());
  if (!a->count(k) || !b->count(k) || c->count(k))
    return std::nullopt;
  bool aHasM = a->count(shape.m), aHasN = a->count(shape.n);
  bool bHasM = b->count(shape.m), bHasN = b->count(shape.n);
  if (aHasM && !aHasN && bHasN && !bHasM)
    shape.lhsIsA = true;
  else if (bHasM && !bHasN && aHasN && !aHasM)
    shape.lhsIsA = false;
  else
    return std::nullopt;
  // Inputs may use only batch loops besides their two GEMM loops.
  for (auto *loops : {&*a, &*b})
    for (unsigned l : *loops)
      if (l != k && l != shape.m && l != shape.n &&
          !llvm::is_contained(shape.batch, l))
        return std::nullopt;
  return shape;
}
