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

#include "weft/runtime/CApi.h"
#include "weft/runtime/Contract.h"
#include "weft/runtime/ShardLayout.h"

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

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
  /// Buffered: returns at once, the data copied; messages to one peer with
  /// one tag arrive in order, and a receive matches the peer and the tag.
  virtual void send(const void *data, size_t count, weft_dtype dtype, int peer,
                    int tag) = 0;
  virtual void recv(void *data, size_t count, weft_dtype dtype, int peer,
                    int tag) = 0;
  /// The ranks of this communicator on this rank's node, ordered by rank:
  /// with `ranksPerNode` > 0, runs of that many consecutive ranks; else the
  /// ranks that share memory with this one. Collective over all ranks.
  virtual std::unique_ptr<Communicator> splitByNode(int ranksPerNode) = 0;
  /// The ranks that pass the same `color`, ordered by `key`. Collective.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
};

/// The gradients' all-reduces by the algorithm the compiler chose
/// (GradSync, weftc --grad-sync), built from a communicator's sends and
/// receives; every rank ends with the same sums, added in an order fixed by
/// the algorithm. Hierarchical reads WEFT_RANKS_PER_NODE (tests: several
/// "nodes" on one machine), else MPI's nodes.
class GradientSync {
public:
  GradientSync();
  ~GradientSync();
  /// The manifest's choice: `algorithm` for the axes in `axes`.
  void choose(GradSync algorithm, int64_t axes);
  /// Whether an all-reduce over the axes in `mask` is one of its.
  bool appliesTo(int64_t mask) const {
    return algorithm != GradSync::Library && (mask & axes);
  }
  /// Sums `data` over `group` in place.
  void allReduce(Communicator &group, void *data, size_t count,
                 weft_dtype dtype);

private:
  struct Hierarchy;
  Hierarchy &hierarchyOf(Communicator &group);
  GradSync algorithm = GradSync::Library;
  int64_t axes = 0;
  std::map<Communicator *, std::unique_ptr<Hierarchy>> hierarchies;
  std::vector<char> received; // the pieces other ranks send, to add
};

/// The ranks of a partitioned model: its mesh, this rank's place in it, and
/// a communicator per group of mesh axes, created once (at start-up for
/// every group the manifest lists).
class World {
public:
  /// Creates the communicator over the given mesh axes (major first) that
  /// contains this rank.
  using GroupFactory =
      std::function<std::unique_ptr<Communicator>(const std::vector<int> &)>;

  World(MeshShape mesh, int rank, GroupFactory factory);
  /// The communicator of the axes in `mask` (bit a for mesh axis a).
  Communicator &group(int64_t mask);
  void createGroups(const std::vector<int64_t> &masks);

  const MeshShape mesh;
  const int rank;
  const std::vector<int64_t> coordinates;
  GradientSync gradientSync;

private:
  GroupFactory factory;
  std::map<int64_t, std::unique_ptr<Communicator>> groups;
};

/// The world that compiled collectives use.
void setCurrentWorld(World *world);

/// The watchdog: how long a rank waits for one collective or receive before
/// it gives up on its peers (a rank stopped, wedged or gone), reports
/// itself, the collective, its mesh axes and the step, and stops the world.
/// The runner's --collective-timeout or WEFT_COLLECTIVE_TIMEOUT (seconds).
constexpr double kDefaultCollectiveTimeout = 600;
void setCollectiveTimeout(double seconds);
double collectiveTimeout();
/// The training step running (-1: none), for the watchdog's message.
void setCurrentStep(int64_t step);
int64_t currentStep();

/// Starts the ranks of `mesh`. Partitioned executables link the MPI
/// implementation; the default one runs a one-rank mesh only. Returns null
/// with `error` set when the launched world does not match the mesh.
std::unique_ptr<World> startWorld(int &argc, char **&argv,
                                  const MeshShape &mesh, std::string &error);
/// A communicator over every rank (for the runner's input and output
/// handling, outside the model).
std::unique_ptr<Communicator> worldCommunicator();
/// Finalizes MPI once the run is over. A rank whose MPI_Finalize does not
/// return within WEFT_FINALIZE_TIMEOUT seconds (a transport's hang at
/// shutdown) warns and exits with status 0; with 0 seconds, the ranks meet
/// in a barrier and return without finalizing.
constexpr double kDefaultFinalizeTimeout = 30;
void stopWorld();
/// Stops every rank at once, after this one has reported why.
[[noreturn]] void abortWorld();

/// Prints `line` (one line, no newline) on stderr and, under weft-run
/// (WEFT_RUN_DIR), appends it to the run directory's rank<worldRank>.error:
/// a launcher that tears the job down as a rank aborts can lose the rank's
/// last output, and weft-run shows what it did not forward.
void reportRankError(int worldRank, const std::string &line);

/// The communicator of a program that runs as one rank: every collective
/// is the identity (a copy where send and receive buffers differ).
std::unique_ptr<Communicator> createSingleRankCommunicator();

} // namespace weft::runtime

#endif // WEFT_RUNTIME_COLLECTIVES_H
