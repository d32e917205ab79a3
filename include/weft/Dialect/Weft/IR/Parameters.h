//===- Parameters.h - Which arguments a training step updates ---*- C++ -*-===//
//
// Every `weft.param` argument is a weight of the model, but only the float
// ones not marked `weft.frozen` train: autodiff, the training step and the
// pipeline's tied-weight bookkeeping all ask here.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_PARAMETERS_H
#define WEFT_DIALECT_WEFT_IR_PARAMETERS_H

#include "mlir/Interfaces/FunctionInterfaces.h"

namespace weft {

/// Whether argument `index` of `function` is a parameter that trains: a
/// float `weft.param` without `weft.frozen`.
bool isTrainedParameter(mlir::FunctionOpInterface function, unsigned index);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_PARAMETERS_H
