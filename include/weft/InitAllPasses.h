//===- InitAllPasses.h - Every pass a Weft tool knows -----------*- C++ -*-===//

#ifndef WEFT_INITALLPASSES_H
#define WEFT_INITALLPASSES_H

namespace weft {

/// Registers Weft's passes and pipelines and the upstream passes Weft uses
/// (once: later calls do nothing).
void registerAllPasses();

/// Registers the passes that exist only for tests (test/lib), such as
/// `weft-test-crash`; weftc and weft-opt call it.
void registerTestPasses();

} // namespace weft

#endif // WEFT_INITALLPASSES_H
