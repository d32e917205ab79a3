//===- Trace.h - A timeline of a rank's training steps ----------*- C++ -*-===//
//
// With `--trace FILE` every rank records when its steps run, when each
// pipeline instruction starts (the compiled code calls weft_pipeline_mark)
// and how long each send, receive and collective takes. Rank 0 writes all
// ranks' timelines as one Chrome trace (JSON), one track per rank, that
// Perfetto and chrome://tracing show.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_TRACE_H
#define WEFT_RUNTIME_TRACE_H

#include "weft/runtime/Collectives.h"

#include <cstdint>
#include <string>

namespace weft::runtime::trace {

/// What a recorded interval or instant is.
enum class Kind : int64_t {
  Step = 0,       // a training step, entry call to return
  Forward = 1,    // a pipeline instruction starts (instant)
  Backward = 2,   // (instant)
  Optimizer = 3,  // (instant)
  Send = 4,       // a send: copying the message out
  Recv = 5,       // a receive: waiting for it and copying it in
  Collective = 6, // an all-reduce, all-gather, reduce-scatter or all-to-all
};

bool enabled();
void enable();
/// Seconds since the process started tracing.
double now();
/// An interval [start, end]; `a` and `b` are the kind's numbers (step;
/// chunk and micro-batch; peer and bytes; collective kind and bytes).
void record(Kind kind, double start, double end, int64_t a, int64_t b);

/// Gathers every rank's records on rank 0, which writes `path`;
/// `trackName` labels this rank's track ("rank 3 (pp 1, dp 1)"). Returns false with `error`
/// set when the file cannot be written (on rank 0).
bool write(const std::string &path, Communicator &everyone,
           const std::string &trackName, std::string &error);

} // namespace weft::runtime::trace

#endif // WEFT_RUNTIME_TRACE_H
