//===- Collectives.h - Communication between the ranks of a model ---------===//
//
// Partitioned programs call these from their compiled code (through the
// runtime), so MPI on CPUs and NCCL on GPUs are two implementations of one
// interface. A communicator spans the ranks of one mesh axis (or axis
// group) and is created once at start-up. Buffers are device pointers of
// the Device the communicator was created for; element counts are per rank.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_COLLECTIVES_H
#define WEFT_RUNTIME_COLLECTIVES_H

#include "weft/runtime.h"

#include <cstddef>
#include <memory>
#include <string>

namespace weft::runtime {

enum class ReduceOp { Sum, Max, Min };

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// In place: every rank ends with the reduction of all ranks' `data`.
  virtual void allReduce(void *data, size_t count, weft_dtype dtype,
                         ReduceOp op) = 0;
  /// `recv` holds size() blocks of `count` elements, block r from rank r.
  virtual void allGather(const void *send, void *recv, size_t count,
                         weft_dtype dtype) = 0;
  /// `send` holds size() blocks of `count` elements; rank r receives the
  /// reduction of block r over all ranks.
  virtual void reduceScatter(const void *send, void *recv, size_t count,
                             weft_dtype dtype, ReduceOp op) = 0;
  /// `send` holds size() blocks; rank r receives block `rank()` of rank r.
  virtual void allToAll(const void *send, void *recv, size_t count,
                        weft_dtype dtype) = 0;
  virtual void broadcast(void *data, size_t count, weft_dtype dtype,
                         int root) = 0;
  virtual void send(const void *data, size_t count, weft_dtype dtype,
                    int peer) = 0;
  virtual void recv(void *data, size_t count, weft_dtype dtype, int peer) = 0;
};

/// The communicator of a program that runs as one rank: every collective
/// is the identity (a copy where send and receive buffers differ).
std::unique_ptr<Communicator> createSingleRankCommunicator();

} // namespace weft::runtime

#endif // WEFT_RUNTIME_COLLECTIVES_H
