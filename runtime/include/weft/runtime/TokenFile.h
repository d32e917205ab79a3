//===- TokenFile.h - The training corpus, read a window at a time -*- C++
//-*-===//
//
// A token file is little-endian uint16 token ids, nothing else
// (utils/tokenize_bytes.py writes one). The trainer reads only the windows
// of its own rows, with pread: a file that shrinks under the run is a short
// read and an error, where a mapping would be SIGBUS.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_TOKENFILE_H
#define WEFT_RUNTIME_TOKENFILE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::runtime {

class TokenFile {
public:
  TokenFile() = default;
  TokenFile(const TokenFile &) = delete;
  TokenFile &operator=(const TokenFile &) = delete;
  ~TokenFile();

  /// Opens `path`; false with `error` set when it cannot be read.
  bool open(const std::string &path, std::string &error);
  /// The number of tokens when it was opened.
  size_t count() const { return tokens; }
  /// Tokens [first, first + window.size()), each below `vocab` (0: any);
  /// false with `error` set when the file no longer holds them or one is
  /// outside the vocabulary.
  bool read(size_t first, std::vector<uint16_t> &window, int64_t vocab,
            std::string &error) const;

private:
  std::string path;
  int fd = -1;
  size_t tokens = 0;
};

} // namespace weft::runtime

#endif // WEFT_RUNTIME_TOKENFILE_H
