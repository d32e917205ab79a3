//===- StandaloneMain.cpp - Replays fuzz inputs without libFuzzer ---------===//
//
// A fuzz target built without libFuzzer (the default build) runs each file
// named on its command line once, so `make check` replays the regression
// corpus (test/Fuzz) with the compiler the project is built with.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s INPUT...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    if (!file) {
      fprintf(stderr, "error: cannot read '%s'\n", argv[i]);
      return 1;
    }
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)),
                               std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  printf("%d inputs replayed\n", argc - 1);
  return 0;
}
