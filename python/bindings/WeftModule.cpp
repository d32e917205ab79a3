//===- WeftModule.cpp - weft._weft, the compiler library in Python --------===//
//
// The C++ side of the `weft` package: weft::compile and weft::planTraining
// with their results as Python data, the HTML report, the runtime's shard
// layout (for checkpoints), and a compiled one-rank model loaded in-process
// (its shared library exports the runtime's C API). The Python modules shape
// these into the package's classes; nothing here shells out to a tool.
//
//===----------------------------------------------------------------------===//

#include "weft/Compiler/Compiler.h"
#include "weft/Compiler/FrontEnd.h"
#include "weft/Compiler/HtmlReport.h"
#include "weft/Planner/Report.h"
#include "weft/runtime/CApi.h"
#include "weft/runtime/Contract.h"
#include "weft/runtime/ShardLayout.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <dlfcn.h>

namespace py = pybind11;

namespace {

/// Raised with the one-line message of whatever failed; the package turns
/// it into its own exception classes.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Reads CompileOptions from a dict of the package's keyword names; a key
/// it does not know is an error (a misspelt option must not be ignored).
class OptionReader {
public:
  explicit OptionReader(const py::dict &dict) : dict(dict) {}

  template <typename T> void read(const char *key, T &value) {
    if (!dict.contains(key))
      return;
    ++used;
    py::object item = dict[key];
    if (item.is_none())
      return;
    try {
      value = item.cast<T>();
    } catch (const py::cast_error &) {
      throw Error(std::string("option '") + key + "' has the wrong type (" +
                  std::string(py::str(item.get_type().attr("__name__"))) + ")");
    }
  }

  void finish() const {
    if (used == dict.size())
      return;
    std::vector<std::string> keys;
    for (auto item : dict)
      keys.push_back(py::str(item.first));
    throw Error("unknown compile option among: " + llvm::join(keys, ", "));
  }

private:
  const py::dict &dict;
  size_t used = 0;
};

weft::CompileOptions readOptions(const py::dict &dict) {
  weft::CompileOptions o;
  OptionReader r(dict);
  std::string program = "forward", emit = "exe";
  r.read("model", o.model);
  r.read("dims", o.dims);
  r.read("program", program);
  r.read("optimizer", o.optimizer);
  r.read("token_input", o.tokenInput);
  r.read("weight_decay", o.weightDecay);
  r.read("clip_norm", o.clipNorm);
  r.read("freeze", o.freeze);
  r.read("train_only", o.trainOnly);
  r.read("precision", o.precision);
  r.read("allow_tf32", o.allowTf32);
  r.read("profile_launches", o.profileLaunches);
  r.read("recompute", o.recompute);
  r.read("grad_accum", o.gradAccum);
  r.read("zero", o.zero);
  r.read("mesh", o.mesh);
  r.read("parallel", o.parallel);
  r.read("sequence_parallel", o.sequenceParallel);
  r.read("pad_uneven", o.padUneven);
  r.read("bucket_mb", o.bucketMb);
  r.read("grad_sync", o.gradSync);
  r.read("dp_sync_every", o.dpSyncEvery);
  r.read("cp_attention", o.cpAttention);
  r.read("microbatches", o.microbatches);
  r.read("schedule", o.schedule);
  r.read("virtual_stages", o.virtualStages);
  r.read("stage_boundaries", o.stageBoundaries);
  r.read("plan", o.plan);
  r.read("cluster", o.cluster);
  r.read("nodes", o.nodes);
  r.read("target", o.target);
  r.read("opt_level", o.optLevel);
  r.read("emit", emit);
  r.read("output", o.output);
  r.read("runtime_directory", o.runtimeDirectory);
  r.read("shared_library", o.sharedLibrary);
  r.finish();
  if (program == "forward")
    o.program = weft::ProgramKind::Forward;
  else if (program == "train")
    o.program = weft::ProgramKind::Train;
  else if (program == "gradients")
    o.program = weft::ProgramKind::Gradients;
  else
    throw Error("program must be forward, train or gradients, not '" + program +
                "'");
  static const std::pair<const char *, weft::EmitKind> emits[] = {
      {"exe", weft::EmitKind::Executable},
      {"obj", weft::EmitKind::Object},
      {"llvm", weft::EmitKind::LLVM},
      {"mlir", weft::EmitKind::MLIR},
      {"passes", weft::EmitKind::Passes},
      {"schedule", weft::EmitKind::Schedule}};
  auto kind = llvm::find_if(emits, [&](auto &e) { return emit == e.first; });
  if (kind == std::end(emits))
    throw Error("emit must be exe, obj, llvm, mlir, passes or schedule, not '" +
                emit + "'");
  o.emit = kind->second;
  return o;
}

const char *programName(weft::ProgramKind kind) {
  switch (kind) {
  case weft::ProgramKind::Forward:
    return "forward";
  case weft::ProgramKind::Train:
    return "train";
  case weft::ProgramKind::Gradients:
    return "gradients";
  }
  return "forward";
}

py::dict optionsDict(const weft::CompileOptions &o) {
  py::dict d;
  d["model"] = o.model;
  d["dims"] = o.dims;
  d["program"] = programName(o.program);
  d["optimizer"] = o.optimizer;
  d["token_input"] = o.tokenInput;
  d["weight_decay"] = o.weightDecay;
  d["clip_norm"] = o.clipNorm;
  d["freeze"] = o.freeze;
  d["train_only"] = o.trainOnly;
  d["precision"] = o.precision;
  d["allow_tf32"] = o.allowTf32;
  d["profile_launches"] = o.profileLaunches;
  d["recompute"] = o.recompute;
  d["grad_accum"] = o.gradAccum;
  d["zero"] = o.zero;
  d["mesh"] = o.mesh;
  d["parallel"] = o.parallel;
  d["sequence_parallel"] = o.sequenceParallel;
  d["pad_uneven"] = o.padUneven;
  d["bucket_mb"] = o.bucketMb;
  d["grad_sync"] = o.gradSync;
  d["dp_sync_every"] = o.dpSyncEvery;
  d["cp_attention"] = o.cpAttention;
  d["microbatches"] = o.microbatches;
  d["schedule"] = o.schedule;
  d["virtual_stages"] = o.virtualStages;
  d["stage_boundaries"] = o.stageBoundaries;
  d["plan"] = o.plan;
  d["cluster"] = o.cluster;
  d["nodes"] = o.nodes;
  d["target"] = o.target;
  d["output"] = o.output;
  return d;
}

py::dict programDict(const weft::ProgramReport &p) {
  py::dict d;
  d["pipeline_rank"] = p.pipelineRank;
  d["mesh_names"] = p.meshNames;
  d["mesh_sizes"] = p.meshSizes;
  d["parameter_bytes"] = p.parameterBytes;
  d["whole_model_parameter_bytes"] = p.wholeModelParameterBytes;
  d["split_parameter_bytes"] = p.splitParameterBytes;
  d["optimizer_state_bytes"] = p.optimizerStateBytes;
  d["weights_file_bytes"] = p.weightsFileBytes;
  d["input_bytes"] = p.inputBytes;
  d["output_bytes"] = p.outputBytes;
  d["temporary_peak_bytes"] =
      p.temporaryPeakBytes ? py::cast(*p.temporaryPeakBytes) : py::none();
  d["microbatches_in_flight"] = p.microbatchesInFlight;
  py::list buffers;
  for (const weft::ProgramReport::Buffer &b : p.buffers) {
    py::dict buffer;
    buffer["role"] = b.role;
    buffer["name"] = b.name;
    buffer["shape"] = b.shape;
    buffer["local_shape"] = b.localShape;
    buffer["sharding"] = b.sharding;
    buffer["local_bytes"] = b.localBytes;
    buffer["trains"] = b.trains;
    buffers.append(buffer);
  }
  d["buffers"] = buffers;
  py::list collectives;
  for (const weft::CollectiveReport &c : p.collectives) {
    py::dict collective;
    collective["kind"] = c.kind;
    collective["axes"] = c.axes;
    collective["input_type"] = c.inputType;
    collective["result_type"] = c.resultType;
    collective["bytes_in"] = c.bytesIn;
    collective["bytes_moved_per_rank"] = c.bytesMovedPerRank;
    collective["location"] = c.location;
    collective["runs"] = c.runs;
    collectives.append(collective);
  }
  d["collectives"] = collectives;
  return d;
}

/// What the package's Report is made of.
py::dict resultDict(const weft::CompileResult &r) {
  py::dict d;
  d["options"] = optionsDict(r.options);
  d["files"] = r.files;
  d["text"] = r.text;
  if (r.plan) {
    py::dict plan;
    plan["cluster"] = r.plan->cluster;
    plan["ranks"] = r.plan->ranks;
    plan["plan"] = r.plan->plan;
    plan["predicted_step_seconds"] = r.plan->predictedStepSeconds;
    plan["predicted_bytes_per_rank"] = r.plan->predictedBytesPerRank;
    d["plan"] = plan;
  } else {
    d["plan"] = py::none();
  }
  py::list plans;
  for (const weft::PricedPlan &p : r.topPlans) {
    py::dict plan;
    plan["plan"] = p.plan;
    plan["step_seconds"] = p.stepSeconds;
    plan["tokens_per_second"] = p.tokensPerSecond;
    plan["mfu"] = p.mfu;
    plan["memory_bytes"] =
        py::dict(py::arg("weights") = p.weightsBytes,
                 py::arg("gradients") = p.gradientsBytes,
                 py::arg("optimizer") = p.optimizerBytes,
                 py::arg("activations") = p.activationsBytes);
    plans.append(plan);
  }
  d["top_plans"] = plans;
  d["plan_explanation"] = r.planExplanation;
  if (r.pipeline) {
    py::dict pipeline;
    pipeline["schedule"] = r.pipeline->schedule;
    pipeline["stages"] = r.pipeline->stages;
    pipeline["microbatches"] = r.pipeline->microbatches;
    pipeline["virtual_stages"] = r.pipeline->virtualStages;
    pipeline["timeline"] = r.pipeline->timeline;
    pipeline["idle_fraction"] = r.pipeline->idleFraction;
    d["pipeline"] = pipeline;
  } else {
    d["pipeline"] = py::none();
  }
  py::list programs;
  for (const weft::ProgramReport &p : r.programs)
    programs.append(programDict(p));
  d["programs"] = programs;
  py::list stages;
  for (const weft::StageTime &t : r.stageTimes)
    stages.append(py::make_tuple(t.stage, t.seconds));
  d["stage_times"] = stages;
  return d;
}

/// Compiles; returns the result (kept for its HTML report) and the
/// warnings and remarks, or raises Error with the first error.
std::pair<weft::CompileResult, std::vector<std::string>>
compile(const py::dict &dict) {
  weft::CompileOptions options = readOptions(dict);
  std::vector<std::string> messages;
  std::string firstError;
  std::optional<weft::CompileResult> result;
  {
    py::gil_scoped_release release;
    result = weft::compile(options, [&](mlir::DiagnosticSeverity severity,
                                        const std::string &text) {
      if (severity == mlir::DiagnosticSeverity::Error) {
        if (firstError.empty())
          firstError = text;
      } else {
        messages.push_back(
            (severity == mlir::DiagnosticSeverity::Warning ? "warning: " : "") +
            text);
      }
    });
  }
  if (!result)
    throw Error(firstError.empty() ? "compilation failed" : firstError);
  return {std::move(*result), std::move(messages)};
}

/// The planner's search as the JSON `weft-plan --json` prints (every plan
/// that fits), with each plan's placement and the reasons the others lost.
py::tuple plan(const py::dict &dict) {
  weft::PlanOptions options;
  std::string fix, precision = "mixed";
  OptionReader r(dict);
  r.read("model", options.model);
  r.read("dims", options.dims);
  r.read("synthetic", options.synthetic);
  r.read("cluster", options.cluster);
  r.read("nodes", options.nodes);
  r.read("global_batch", options.globalBatch);
  r.read("precision", precision);
  r.read("fix", fix);
  r.read("selective_recompute", options.constraints.selectiveRecompute);
  r.finish();
  if (options.model.empty() == options.synthetic.empty())
    throw Error("give a model or a synthetic model, not both or neither");
  if (options.cluster.empty())
    throw Error("cluster is required (a preset or a cluster file)");
  if (precision != "mixed" && precision != "f32")
    throw Error("precision must be mixed or f32, not '" + precision + "'");
  options.mixedPrecision = precision == "mixed";
  std::string error;
  bool selective = options.constraints.selectiveRecompute;
  std::optional<weft::planner::PlanConstraints> constraints =
      weft::planner::PlanConstraints::parse(fix, error);
  if (!constraints)
    throw Error("fix: " + error);
  options.constraints = *constraints;
  options.constraints.selectiveRecompute = selective;
  std::optional<weft::PlanResult> planned;
  {
    py::gil_scoped_release release;
    planned = weft::planTraining(options, error);
  }
  if (!planned)
    throw Error(error);
  const weft::planner::SearchResult &search = planned->search;
  if (search.fitting.empty())
    throw Error(weft::planner::noPlanMessage(search, planned->cluster));
  std::string json;
  llvm::raw_string_ostream os(json);
  weft::planner::printJSON(planned->model, planned->cluster, planned->setup,
                           search, /*top=*/0, os);
  std::vector<std::string> placements;
  for (const weft::planner::Prediction &p : search.fitting)
    placements.push_back(weft::planner::placement(p.plan, planned->cluster));
  return py::make_tuple(json, placements,
                        weft::planner::explain(search, planned->cluster));
}

/// The report of `result`; `plans` and `explanation`, when given, are the
/// planner's search the plan compiled came from (weft.plan's), in place of
/// the compiler's own.
std::string
htmlReport(const weft::CompileResult &compiled,
           const std::optional<std::string> &tracePath,
           const std::optional<py::list> &plans,
           const std::optional<std::vector<std::string>> &explanation) {
  weft::CompileResult result = compiled;
  if (plans) {
    result.topPlans.clear();
    for (py::handle item : *plans) {
      py::dict plan = py::reinterpret_borrow<py::dict>(item);
      py::dict memory = plan["memory_bytes"].cast<py::dict>();
      result.topPlans.push_back(
          {plan["plan"].cast<std::string>(),
           plan["step_seconds"].cast<double>(),
           plan["tokens_per_second"].cast<double>(), plan["mfu"].cast<double>(),
           memory["weights"].cast<double>(), memory["gradients"].cast<double>(),
           memory["optimizer"].cast<double>(),
           memory["activations"].cast<double>()});
    }
  }
  if (explanation)
    result.planExplanation = *explanation;
  std::optional<weft::TraceSummary> trace;
  if (tracePath) {
    std::string error;
    trace = weft::summarizeTrace(*tracePath, error);
    if (!trace)
      throw Error(error);
  }
  return weft::renderHtmlReport(result, trace ? &*trace : nullptr);
}

py::dict traceSummary(const std::string &path) {
  std::string error;
  std::optional<weft::TraceSummary> trace = weft::summarizeTrace(path, error);
  if (!trace)
    throw Error(error);
  py::list tracks;
  for (const weft::TraceSummary::Track &t : trace->tracks)
    tracks.append(
        py::dict(py::arg("name") = t.name, py::arg("steps") = t.steps,
                 py::arg("step_seconds") = t.stepSeconds,
                 py::arg("communication_seconds") = t.communicationSeconds));
  return py::dict(py::arg("path") = trace->path, py::arg("tracks") = tracks);
}

/// NumPy's name of a runtime dtype; bf16 has none.
const char *numpyDtype(weft_dtype dtype) {
  switch (dtype) {
  case WEFT_F32:
    return "float32";
  case WEFT_F64:
    return "float64";
  case WEFT_F16:
    return "float16";
  case WEFT_I64:
    return "int64";
  case WEFT_I32:
    return "int32";
  case WEFT_BOOL:
    return "bool";
  case WEFT_BF16:
    return nullptr;
  }
  return nullptr;
}

std::string shapeText(const int64_t *shape, int rank) {
  std::string s = "[";
  for (int d = 0; d < rank; ++d)
    s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

/// A NumPy array seen through the buffer protocol, dense and row-major.
/// pybind11's NumPy layer is not used: it reads NumPy's C structs, whose
/// layout NumPy 2 changed.
struct DenseArray {
  py::object array;
  std::string dtype; // NumPy's name: float32, int64, bool, ...
  std::vector<int64_t> shape;
  py::buffer_info buffer;
};

/// `value` as a DenseArray: converted (a list, a strided view) unless it
/// must be written in place, when it must already be a dense NumPy array.
DenseArray denseArray(py::handle value, bool inPlace, const std::string &what) {
  py::module_ numpy = py::module_::import("numpy");
  DenseArray dense;
  try {
    dense.array = inPlace ? py::reinterpret_borrow<py::object>(value)
                          : numpy.attr("ascontiguousarray")(value);
    if (!py::isinstance(dense.array, numpy.attr("ndarray")))
      throw Error(what + " is not a NumPy array");
    if (inPlace &&
        !(dense.array.attr("flags").attr("c_contiguous").cast<bool>() &&
          dense.array.attr("flags").attr("writeable").cast<bool>()))
      throw Error(what + " must be a writable C-contiguous array");
    dense.dtype = py::str(dense.array.attr("dtype"));
    dense.shape = dense.array.attr("shape").cast<std::vector<int64_t>>();
    dense.buffer =
        py::reinterpret_borrow<py::buffer>(dense.array).request(inPlace);
  } catch (py::error_already_set &error) {
    throw Error(what + ": " + error.what());
  }
  return dense;
}

/// Writes `local`, shard `shard` of a tensor split as `sharding` over
/// `mesh` (ShardLayout.h's texts; the shard's padding included), into its
/// place in `whole`: how the runtime lays out shards, for checkpoints and
/// outputs read in Python.
void insertShard(py::handle wholeArray, py::handle localArray,
                 const std::string &sharding, const std::string &meshText,
                 int64_t shard) {
  DenseArray whole = denseArray(wholeArray, /*inPlace=*/true, "the tensor");
  DenseArray local = denseArray(localArray, /*inPlace=*/false, "the shard");
  weft::runtime::MeshShape mesh;
  if (!weft::runtime::MeshShape::parse(meshText, mesh))
    throw Error("malformed mesh '" + meshText + "'");
  weft::runtime::ShardSpec spec;
  if (!weft::runtime::ShardSpec::parse(sharding, whole.shape.size(), spec))
    throw Error("malformed sharding '" + sharding + "' for a tensor of " +
                std::to_string(whole.shape.size()) + " dims");
  if (whole.dtype != local.dtype)
    throw Error("the shard is " + local.dtype + " and the tensor " +
                whole.dtype);
  const std::vector<int64_t> &globalShape = whole.shape;
  const std::vector<int64_t> &localShape = local.shape;
  std::vector<int64_t> expected = spec.localShape(globalShape, mesh);
  if (localShape != expected)
    throw Error("shard of shape " +
                shapeText(localShape.data(), int(localShape.size())) +
                ", but sharding '" + sharding + "' over " + meshText +
                " makes shards of " +
                shapeText(expected.data(), int(expected.size())));
  if (shard < 0 || shard >= spec.numShards(mesh))
    throw Error("shard " + std::to_string(shard) + " of " +
                std::to_string(spec.numShards(mesh)));
  spec.insert(local.buffer.ptr, whole.buffer.ptr, globalShape,
              size_t(whole.buffer.itemsize), shard, mesh);
}

/// A one-rank program's shared library (CompileOptions::sharedLibrary),
/// loaded into this process: the model runs here, on NumPy arrays.
class LoadedModel {
public:
  LoadedModel(const std::string &library, const std::string &weights) {
    handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      throw Error("cannot load '" + library + "': " + dlerror());
    auto symbol = [&](const char *name) {
      void *address = dlsym(handle, name);
      if (!address)
        throw Error("'" + library + "' is not a Weft model library: no '" +
                    name + "'");
      return address;
    };
    auto manifest =
        static_cast<const char *>(symbol(weft::runtime::kManifestSymbol));
    entry = reinterpret_cast<Entry>(symbol(weft::runtime::kEntrySymbol));
#define WEFT_BIND(name)                                                        \
  name = reinterpret_cast<decltype(&::name)>(symbol(#name))
    WEFT_BIND(weft_model_open);
    WEFT_BIND(weft_model_close);
    WEFT_BIND(weft_model_num_buffers);
    WEFT_BIND(weft_model_buffer);
    WEFT_BIND(weft_model_set_input);
    WEFT_BIND(weft_model_check_indices);
    WEFT_BIND(weft_model_output);
    WEFT_BIND(weft_model_run);
#undef WEFT_BIND
    // As in the executables (RunnerMain.cpp): every thread is OpenMP's,
    // the GEMM wrapper splits the work itself.
    if (auto setThreads = reinterpret_cast<void (*)(int)>(
            dlsym(handle, "openblas_set_num_threads")))
      setThreads(1);
    char error[1024] = "";
    model = weft_model_open(manifest, weights.c_str(), error, sizeof(error));
    if (!model)
      throw Error(error);
  }
  ~LoadedModel() {
    if (model)
      weft_model_close(model);
    // The library stays loaded: OpenMP's worker threads may still run its
    // code after a model is closed.
  }
  LoadedModel(const LoadedModel &) = delete;
  LoadedModel &operator=(const LoadedModel &) = delete;

  /// Runs once on `inputs` (name -> array, every input given, exact dtype
  /// and shape); returns every output, copied.
  py::dict run(const py::dict &inputs) {
    std::vector<DenseArray> held;
    size_t given = 0;
    char error[1024] = "";
    for (size_t i = 0; i < weft_model_num_buffers(model); ++i) {
      const weft_buffer_info *b = weft_model_buffer(model, i);
      if (b->role != WEFT_INPUT)
        continue;
      std::string name = b->name;
      if (!inputs.contains(name))
        throw Error("input '" + name + "' is missing");
      ++given;
      const char *dtype = numpyDtype(b->dtype);
      if (!dtype)
        throw Error("input '" + name + "' is " + weft_dtype_name(b->dtype) +
                    ", which NumPy has no type for");
      // The runtime reads dense row-major data.
      DenseArray array = denseArray(inputs[name.c_str()], /*inPlace=*/false,
                                    "input '" + name + "'");
      std::vector<int64_t> expected(b->shape, b->shape + b->rank);
      if (array.dtype != dtype || array.shape != expected)
        throw Error("input '" + name + "': expected " + dtype + " " +
                    shapeText(b->shape, b->rank) + ", got " + array.dtype +
                    " " +
                    shapeText(array.shape.data(), int(array.shape.size())));
      if (weft_model_check_indices(model, i, array.buffer.ptr, error,
                                   sizeof(error)) != 0)
        throw Error(error);
      weft_model_set_input(model, i, array.buffer.ptr);
      held.push_back(std::move(array));
    }
    if (given != inputs.size())
      for (auto item : inputs) {
        std::string name = py::str(item.first);
        bool known = false;
        for (size_t i = 0; i < weft_model_num_buffers(model); ++i) {
          const weft_buffer_info *b = weft_model_buffer(model, i);
          known |= b->role == WEFT_INPUT && name == b->name;
        }
        if (!known)
          throw Error("the model has no input '" + name + "'");
      }
    double seconds;
    {
      py::gil_scoped_release release;
      seconds = weft_model_run(model, entry, error, sizeof(error));
    }
    if (seconds < 0)
      throw Error(error);
    py::dict outputs;
    py::module_ numpy = py::module_::import("numpy");
    for (size_t i = 0; i < weft_model_num_buffers(model); ++i) {
      const weft_buffer_info *b = weft_model_buffer(model, i);
      if (b->role != WEFT_OUTPUT)
        continue;
      const char *dtype = numpyDtype(b->dtype);
      if (!dtype)
        throw Error("output '" + std::string(b->name) + "' is " +
                    weft_dtype_name(b->dtype) +
                    ", which NumPy has no type for");
      std::vector<int64_t> shape(b->shape, b->shape + b->rank);
      DenseArray out =
          denseArray(numpy.attr("empty")(py::tuple(py::cast(shape)), dtype),
                     /*inPlace=*/true, "output");
      std::memcpy(out.buffer.ptr, weft_model_output(model, i), b->bytes);
      outputs[b->name] = out.array;
    }
    return outputs;
  }

private:
  using Entry = void (*)(void **);
  void *handle = nullptr;
  weft_model *model = nullptr;
  Entry entry = nullptr;
  decltype(&::weft_model_open) weft_model_open = nullptr;
  decltype(&::weft_model_close) weft_model_close = nullptr;
  decltype(&::weft_model_num_buffers) weft_model_num_buffers = nullptr;
  decltype(&::weft_model_buffer) weft_model_buffer = nullptr;
  decltype(&::weft_model_set_input) weft_model_set_input = nullptr;
  decltype(&::weft_model_check_indices) weft_model_check_indices = nullptr;
  decltype(&::weft_model_output) weft_model_output = nullptr;
  decltype(&::weft_model_run) weft_model_run = nullptr;
};

} // namespace

PYBIND11_MODULE(_weft, m) {
  m.doc() = "The Weft compiler library (the weft package's C++ side)";
  py::register_exception<Error>(m, "Error");

  py::class_<weft::CompileResult>(m, "CompileResult")
      .def("to_dict", &resultDict)
      .def("html", &htmlReport, py::arg("trace") = py::none(),
           py::arg("plans") = py::none(), py::arg("explanation") = py::none());
  m.def("compile", &compile, py::arg("options"));
  m.def("plan", &plan, py::arg("options"));
  m.def("trace_summary", &traceSummary, py::arg("path"));
  m.def("insert_shard", &insertShard, py::arg("whole"), py::arg("local"),
        py::arg("sharding"), py::arg("mesh"), py::arg("shard"));
  py::class_<LoadedModel>(m, "LoadedModel")
      .def(py::init<const std::string &, const std::string &>(),
           py::arg("library"), py::arg("weights"))
      .def("run", &LoadedModel::run, py::arg("inputs"));
}
