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

#include "mlir/IR/Value.h"

namespace weft {

/// Whether the memrefs `a` and `b` may share bytes. A public function's
/// arguments are distinct buffers (the runtime allocates each tensor on its
/// own); a private function's two arguments may alias where some call
/// passes buffers that may; distinct allocations and distinct globals do
/// not; anything else may.
bool buffersMayAlias(mlir::Value a, mlir::Value b);

} // namespace weft

#endif // WEFT_LOWERING_BUFFERALIASES_H
