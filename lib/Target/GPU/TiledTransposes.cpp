//===- TiledTransposes.cpp - Transposes through shared memory -------------===//

#include "weft/Target/GPU/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace weft {
#define GEN_PASS_DEF_WEFTGPUTILEDTRANSPOSES
#include "weft/Target/GPU/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// A tile is kTile x kTile elements, moved by kTile x kRows threads, each
/// thread kTile / kRows elements.
constexpr int64_t kTile = 32;
constexpr int64_t kRows = 8;

/// Replaces a transpose whose innermost dim moves by a launch of one block
/// per tile: the block reads its tile along the input's rows (neighbouring
/// threads, neighbouring addresses), writes it to shared memory, and after a
/// barrier writes it along the output's rows from the transposed tile.
void tileTranspose(linalg::TransposeOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value input = op.getInput(), output = op.getInit();
  ArrayRef<int64_t> perm = op.getPermutation();
  int64_t rank = perm.size();
  // The input dims that are fastest in the output (a) and in the input (c).
  int64_t a = perm[rank - 1], c = rank - 1;
  SmallVector<Value> sizes;
  for (int64_t d = 0; d < rank; ++d)
    sizes.push_back(memref::DimOp::create(b, loc, input, d));
  auto index = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value tile = index(kTile);
  Value tilesA = arith::CeilDivUIOp::create(b, loc, sizes[a], tile);
  Value tilesC = arith::CeilDivUIOp::create(b, loc, sizes[c], tile);
  Value blocks = arith::MulIOp::create(b, loc, tilesA, tilesC);
  for (int64_t d = 0; d < rank; ++d)
    if (d != a && d != c)
      blocks = arith::MulIOp::create(b, loc, blocks, sizes[d]);
  Value zero = index(0), one = index(1);
  Value any =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, blocks, zero);
  auto guard = scf::IfOp::create(b, loc, any, /*withElseRegion=*/false);
  b.setInsertionPointToStart(guard.thenBlock());
  Type element = cast<MemRefType>(input.getType()).getElementType();
  // One column of padding: the transposed reads hit 32 different banks.
  auto sharedType = MemRefType::get(
      {kTile, kTile + 1}, element, MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup));
  auto launch = gpu::LaunchOp::create(
      b, loc, blocks, one, one, tile, index(kRows), one,
      /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
      /*asyncDependencies=*/{}, TypeRange{sharedType});
  b.setInsertionPointToStart(&launch.getBody().front());
  Value shared = launch.getWorkgroupAttributions()[0];
  Value tx = launch.getThreadIds().x, ty = launch.getThreadIds().y;
  // The block's tile: (tile along c, tile along a, then the other dims),
  // c fastest.
  Value rest = launch.getBlockIds().x;
  Value tileC = arith::RemUIOp::create(b, loc, rest, tilesC);
  rest = arith::DivUIOp::create(b, loc, rest, tilesC);
  Value tileA = arith::RemUIOp::create(b, loc, rest, tilesA);
  rest = arith::DivUIOp::create(b, loc, rest, tilesA);
  SmallVector<Value> coordinates(rank);
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (d == a || d == c)
      continue;
    coordinates[d] = arith::RemUIOp::create(b, loc, rest, sizes[d]);
    rest = arith::DivUIOp::create(b, loc, rest, sizes[d]);
  }
  Value baseA = arith::MulIOp::create(b, loc, tileA, tile);
  Value baseC = arith::MulIOp::create(b, loc, tileC, tile);
  // Writes `element(coordinates)` where both tile indices are in range.
  auto guarded = [&](Value alongA, Value alongC,
                     function_ref<void(ArrayRef<Value>)> body) {
    Value inside = arith::AndIOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, alongA,
                              sizes[a]),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, alongC,
                              sizes[c]));
    auto ifOp = scf::IfOp::create(b, loc, inside, false);
    OpBuilder::InsertionGuard inIf(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    SmallVector<Value> at(coordinates);
    at[a] = alongA;
    at[c] = alongC;
    body(at);
  };
  // Read: thread (tx, ty) takes input rows ty, ty + 8, ... of the tile
  // (along a), column tx (along c).
  for (int64_t r = 0; r < kTile; r += kRows) {
    Value row = arith::AddIOp::create(b, loc, ty, index(r));
    Value alongA = arith::AddIOp::create(b, loc, baseA, row);
    Value alongC = arith::AddIOp::create(b, loc, baseC, tx);
    guarded(alongA, alongC, [&](ArrayRef<Value> at) {
      Value v = memref::LoadOp::create(b, loc, input, at);
      memref::StoreOp::create(b, loc, v, shared, ValueRange{row, tx});
    });
  }
  gpu::BarrierOp::create(b, loc);
  // Write: output rows ty, ty + 8, ... of the tile (along c), column tx
  // (along a), from the transposed tile.
  for (int64_t r = 0; r < kTile; r += kRows) {
    Value row = arith::AddIOp::create(b, loc, ty, index(r));
    Value alongC = arith::AddIOp::create(b, loc, baseC, row);
    Value alongA = arith::AddIOp::create(b, loc, baseA, tx);
    guarded(alongA, alongC, [&](ArrayRef<Value> at) {
      Value v = memref::LoadOp::create(b, loc, shared, ValueRange{tx, row});
      SmallVector<Value> outAt;
      for (int64_t k = 0; k < rank; ++k)
        outAt.push_back(at[perm[k]]);
      memref::StoreOp::create(b, loc, v, output, outAt);
    });
  }
  gpu::TerminatorOp::create(b, loc);
  op.erase();
}

struct WeftGpuTiledTransposesPass
    : public weft::impl::WeftGpuTiledTransposesBase<
          WeftGpuTiledTransposesPass> {
  void runOnOperation() override {
    SmallVector<linalg::TransposeOp> transposes;
    getOperation().walk([&](linalg::TransposeOp op) {
      ArrayRef<int64_t> perm = op.getPermutation();
      if (op.hasPureBufferSemantics() && !perm.empty() &&
          perm.back() != int64_t(perm.size()) - 1)
        transposes.push_back(op);
    });
    for (linalg::TransposeOp op : transposes)
      tileTranspose(op);
  }
};

} // namespace
