//===- NewBufferBufferization.h - Ops whose result is a new buffer -*- C++
//-*-===//
//
// The bufferization every op of the weft runtime calls shares (the
// collectives, the embedding gradient's scatter-add): the operands are
// read, never written or aliased, and the result is a buffer of its own.
// A model derives from it and supplies `bufferize`.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_CONVERSION_NEWBUFFERBUFFERIZATION_H
#define WEFT_CONVERSION_NEWBUFFERBUFFERIZATION_H

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"

namespace weft {

template <typename ConcreteModel, typename OpTy>
struct NewBufferBufferization
    : public mlir::bufferization::BufferizableOpInterface::ExternalModel<
          ConcreteModel, OpTy> {
  bool
  bufferizesToMemoryRead(mlir::Operation *, mlir::OpOperand &,
                         const mlir::bufferization::AnalysisState &) const {
    return true;
  }
  bool
  bufferizesToMemoryWrite(mlir::Operation *, mlir::OpOperand &,
                          const mlir::bufferization::AnalysisState &) const {
    return false;
  }
  bool bufferizesToAllocation(mlir::Operation *, mlir::Value) const {
    return true;
  }
  mlir::bufferization::AliasingValueList
  getAliasingValues(mlir::Operation *, mlir::OpOperand &,
                    const mlir::bufferization::AnalysisState &) const {
    return {};
  }
};

} // namespace weft

#endif // WEFT_CONVERSION_NEWBUFFERBUFFERIZATION_H
