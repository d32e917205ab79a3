//===- BufferAliases.h - Which buffers of host code may share bytes -*- C++
//-*-===//
//
// After bufferization and weft-plan-buffers, a function's temporaries are
// views of one arena at static byte offsets, and its arguments are the
// runtime's tensors. Reordering or retargeting a write needs to know which
// buffers may share bytes: views are followed to the value they start from
// (an allocation, a global, a function argument) and static views are
// compared by their byte ranges.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LOWERING_BUFFERALIASES_H
#define WEFT_LOWERING_BUFFERALIASES_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

#include <memory>

namespace weft {

/// Whether the memrefs `a` and `b` may share bytes. A public function's
/// arguments are distinct buffers (the runtime allocates each tensor on its
/// own); a private function's two arguments may alias where some call
/// passes buffers that may; distinct allocations and distinct globals do
/// not; anything else may.
bool buffersMayAlias(mlir::Value a, mlir::Value b);

/// The value the views of `memref` start from: buffersMayAlias compares
/// byte ranges of views of one root, and roots by rootsMayAlias.
mlir::Value aliasRoot(mlir::Value memref);
/// Whether views of the roots `a` and `b` may share bytes (any views of
/// one root may).
bool rootsMayAlias(mlir::Value a, mlir::Value b);

/// The largest power of two that the first byte of `memref`'s view is
/// known to be a multiple of (1 where nothing is known): the aligned
/// pointer of its root (an allocation at a multiple of `bufferAlignment`,
/// the runtime's promise; a function's argument as aligned as every call's
/// operand, a public function's, the entry's, also as the runtime's
/// buffers) moved by static views.
int64_t knownAlignment(mlir::Value memref, int64_t bufferAlignment);

/// While one lives, the questions above asked on this thread find the calls
/// of a private function (whose arguments alias where its calls' operands
/// do) once: for a pass that asks many of a module whose calls it does not
/// change meanwhile.
class CallSitesCache {
public:
  CallSitesCache();
  ~CallSitesCache();
  CallSitesCache(const CallSitesCache &) = delete;
  CallSitesCache &operator=(const CallSitesCache &) = delete;

private:
  struct Found;
  std::unique_ptr<Found> found;
  void *outer; // the cache this one hides, if any
};

/// Whether the memref operand `operand` (a call's unranked argument is the
/// memref it casts) may share bytes with `buffer`; an operand of unknown
/// origin may.
bool operandMayAlias(mlir::Value operand, mlir::Value buffer);

/// The ranked memref a call's unranked argument casts (else `operand`).
mlir::Value rankedArgument(mlir::Value operand);

/// Whether `op` (or an op in it) reads or writes bytes of `buffer`. After
/// weft-plan-buffers, buffers whose lives do not overlap share bytes, and
/// equal views of the arena are one value: bytes, not values, say which
/// ops touch a buffer.
bool touches(mlir::Operation *op, mlir::Value buffer);

/// Whether `op` (or an op in it) may write or free bytes of `buffer`:
/// by its memory effects, a fused attention or GEMM call by the operands it
/// writes (weft/runtime/Contract.h), any other call or op of unknown
/// effects by every buffer it is given.
bool mayWrite(mlir::Operation *op, mlir::Value buffer);

/// Whether `call` is a fused attention kernel (weft/runtime/Contract.h);
/// `backward` tells which.
bool isFusedAttentionCall(mlir::Operation *call, bool &backward);

/// Whether `call` is a GEMM library call (weft/runtime/Contract.h).
bool isGemmCall(mlir::Operation *call);

/// Whether the GEMM or fused attention call `call` writes its operand
/// `index` (weft/runtime/Contract.h); it reads the others.
bool libraryCallWrites(mlir::Operation *call, unsigned index);

/// Whether the ops computing `value` after `before` in its block are pure
/// (views, index arithmetic) or allocations, so they can move above it.
bool canHoist(mlir::Value value, mlir::Operation *before);
/// Moves them there, in order.
void hoist(mlir::Value value, mlir::Operation *before);

} // namespace weft

#endif // WEFT_LOWERING_BUFFERALIASES_H
