//===- FuzzInput.h - Helpers shared by the fuzz targets ---------*- C++ -*-===//
//
// The readers under test take files: an input is written to a private
// file (in /dev/shm when there is one, so no disk is touched) and read
// from there. Inputs that carry several files separate them with
// kFileSeparator.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TOOLS_WEFT_FUZZ_FUZZINPUT_H
#define WEFT_TOOLS_WEFT_FUZZ_FUZZINPUT_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::fuzz {

/// Separates the files of a multi-file input.
constexpr const char *kFileSeparator = "\n--weft-fuzz-file--\n";

/// A scratch directory private to this process, created once and removed
/// at exit.
const std::string &scratchDirectory();

/// Writes `size` bytes to `<scratch>/<name>` and returns its path.
std::string writeScratchFile(const std::string &name, const void *data,
                             size_t size);

/// With WEFT_FUZZ_VERBOSE=1, prints how the reader took an input ("ok" or
/// its error), to check that seeds get past the first checks.
void report(const std::string &error);

/// `data` split at each kFileSeparator.
std::vector<std::string> splitFiles(const uint8_t *data, size_t size);

} // namespace weft::fuzz

#endif // WEFT_TOOLS_WEFT_FUZZ_FUZZINPUT_H
