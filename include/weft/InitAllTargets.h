//===- InitAllTargets.h - Every backend weftc can target --------*- C++ -*-===//

#ifndef WEFT_INITALLTARGETS_H
#define WEFT_INITALLTARGETS_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace weft {

class Target;

/// The target `weftc --target` names ("cpu"), or null.
const Target *lookupTarget(llvm::StringRef name);

/// The names lookupTarget knows, comma-separated.
std::string targetNames();

} // namespace weft

#endif // WEFT_INITALLTARGETS_H
