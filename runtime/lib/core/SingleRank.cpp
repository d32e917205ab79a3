//===- SingleRank.cpp - Collectives of a one-rank program -----------------===//

#include "weft/runtime/Collectives.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace weft::runtime {
namespace {

class SingleRankCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allReduce(void *, size_t, weft_dtype, ReduceOp) override {}
  void allGather(const void *send, void *recv, size_t count,
                 weft_dtype dtype) override {
    copy(send, recv, count, dtype);
  }
  void reduceScatter(const void *send, void *recv, size_t count,
                     weft_dtype dtype, ReduceOp) override {
    copy(send, recv, count, dtype);
  }
  void allToAll(const void *send, void *recv, size_t count,
                weft_dtype dtype) override {
    copy(send, recv, count, dtype);
  }
  void broadcast(void *, size_t, weft_dtype, int root) override {
    if (root != 0)
      noPeer("broadcast from", root);
  }
  void send(const void *, size_t, weft_dtype, int peer, int) override {
    noPeer("send to", peer);
  }
  void recv(void *, size_t, weft_dtype, int peer, int) override {
    noPeer("recv from", peer);
  }
  std::unique_ptr<Communicator> splitByNode(int) override {
    return std::make_unique<SingleRankCommunicator>();
  }
  std::unique_ptr<Communicator> split(int, int) override {
    return std::make_unique<SingleRankCommunicator>();
  }

private:
  static void copy(const void *from, void *to, size_t count, weft_dtype dtype) {
    if (from != to)
      std::memmove(to, from, count * weft_dtype_size(dtype));
  }
  /// A one-rank program has no peer: a transfer with one is a compiler
  /// bug, reported rather than ignored.
  [[noreturn]] static void noPeer(const char *what, int peer) {
    std::fprintf(stderr, "error: %s rank %d in a one-rank program\n", what,
                 peer);
    std::exit(1);
  }
};

} // namespace

std::unique_ptr<Communicator> createSingleRankCommunicator() {
  return std::make_unique<SingleRankCommunicator>();
}

// Weak: a partitioned executable links the MPI definitions instead.
__attribute__((weak)) std::unique_ptr<World>
startWorld(int &, char **&, const MeshShape &mesh, std::string &error) {
  if (mesh.numRanks() != 1) {
    error = "the model was partitioned for mesh " + mesh.describe() +
            " but the executable has no MPI runtime";
    return nullptr;
  }
  return std::make_unique<World>(mesh, 0, [](const std::vector<int> &) {
    return createSingleRankCommunicator();
  });
}

__attribute__((weak)) std::unique_ptr<Communicator> worldCommunicator() {
  return createSingleRankCommunicator();
}

__attribute__((weak)) void stopWorld() {}

__attribute__((weak)) void abortWorld() { _exit(1); }

} // namespace weft::runtime
