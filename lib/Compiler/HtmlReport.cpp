//===- HtmlReport.cpp - A compiled program as one HTML page ---------------===//

#include "weft/Compiler/HtmlReport.h"
#include "weft/Compiler/KernelReport.h"
#include "weft/runtime/ShardLayout.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>

using llvm::formatv;
using llvm::StringRef;

std::optional<weft::TraceSummary> weft::summarizeTrace(const std::string &path,
                                                       std::string &error) {
  auto file = llvm::MemoryBuffer::getFile(path);
  if (!file) {
    error = "cannot read trace '" + path + "': " + file.getError().message();
    return std::nullopt;
  }
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*file)->getBuffer());
  if (!parsed) {
    error = "trace '" + path +
            "' is not JSON: " + llvm::toString(parsed.takeError());
    return std::nullopt;
  }
  const llvm::json::Array *events = parsed->getAsArray();
  if (const llvm::json::Object *root = parsed->getAsObject())
    events = root->getArray("traceEvents");
  if (!events) {
    error = "trace '" + path + "' holds no list of trace events";
    return std::nullopt;
  }
  TraceSummary summary;
  summary.path = path;
  std::map<int64_t, TraceSummary::Track> tracks;
  for (const llvm::json::Value &value : *events) {
    const llvm::json::Object *event = value.getAsObject();
    if (!event)
      continue;
    int64_t tid = event->getInteger("tid").value_or(0);
    StringRef phase = event->getString("ph").value_or("");
    StringRef name = event->getString("name").value_or("");
    TraceSummary::Track &track = tracks[tid];
    if (phase == "M" && name == "thread_name") {
      if (const llvm::json::Object *args = event->getObject("args"))
        track.name = args->getString("name").value_or("").str();
      continue;
    }
    if (phase != "X")
      continue;
    double seconds = event->getNumber("dur").value_or(0) * 1e-6;
    StringRef category = event->getString("cat").value_or("");
    if (category == "step") {
      ++track.steps;
      track.stepSeconds += seconds;
    } else if (category == "send" || category == "recv" ||
               category == "collective") {
      track.communicationSeconds += seconds;
    }
  }
  for (auto &[tid, track] : tracks) {
    if (track.name.empty())
      track.name = "track " + std::to_string(tid);
    summary.tracks.push_back(std::move(track));
  }
  return summary;
}

namespace {

std::string escape(StringRef text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

std::string bytesText(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? formatv("{0} B", int64_t(bytes)).str()
                   : formatv("{0:F1} {1}", bytes, units[unit]).str();
}

std::string shapeText(llvm::ArrayRef<int64_t> shape) {
  return "[" +
         llvm::join(llvm::map_range(
                        shape, [](int64_t d) { return std::to_string(d); }),
                    ", ") +
         "]";
}

/// The layer an ONNX node belongs to: the first path component that ends
/// in a number ("/transformer/h.3/attn/MatMul" is in "h.3").
std::string layerOf(StringRef location) {
  llvm::SmallVector<StringRef> parts;
  location.split(parts, '/', -1, false);
  for (StringRef part : parts) {
    size_t cut = part.find_last_of("._");
    if (cut != StringRef::npos && cut > 0 && cut + 1 < part.size() &&
        llvm::all_of(part.drop_front(cut + 1), llvm::isDigit))
      return part.str();
  }
  return location.empty() ? "(no ONNX node)" : "outside the layers";
}

struct Category {
  const char *name, *color;
};
constexpr Category kWeights{"weights", "#4e79a7"};
constexpr Category kGradients{"gradients", "#f28e2b"};
constexpr Category kOptimizer{"optimizer state", "#e15759"};
constexpr Category kActivations{"activations", "#76b7b2"};
constexpr Category kInputsOutputs{"inputs and outputs", "#59a14f"};
constexpr Category kTemporaries{"temporaries", "#edc948"};
constexpr const char *kForwardColor = "#4e79a7";
constexpr const char *kBackwardColor = "#f28e2b";
constexpr const char *kComputeColor = "#4e79a7";
constexpr const char *kCommunicationColor = "#e15759";
constexpr const char *kCollectiveColor = "#b07aa1";

class Page {
public:
  Page(const weft::CompileResult &result, const weft::planner::Gpu &gpu)
      : result(result), meshShape{result.programs.front().meshNames,
                                  result.programs.front().meshSizes},
        ranks(meshShape.numRanks()), gpu(gpu) {}

  std::string render(const weft::TraceSummary *trace) {
    os << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
          "<title>Weft report: "
       << escape(result.options.model) << "</title>\n<style>" << kStyle
       << "</style></head><body>\n";
    header();
    mesh();
    memory();
    parameters();
    collectives();
    pipeline();
    planner();
    kernels();
    traceSection(trace);
    os << "</body></html>\n";
    return text;
  }

private:
  static constexpr const char *kStyle =
      "body{font-family:sans-serif;margin:24px;color:#222}"
      "h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px "
      "solid #ccc}table{border-collapse:collapse;font-size:13px}"
      "td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}"
      "td.n{text-align:right}svg text{font-size:12px}.note{color:#555;"
      "font-size:13px}.swatch{display:inline-block;width:12px;height:12px;"
      "margin:0 4px 0 12px;vertical-align:middle}";

  const weft::CompileResult &result;
  const weft::runtime::MeshShape meshShape;
  const int64_t ranks;
  /// The GPU the kernels are priced on.
  const weft::planner::Gpu &gpu;
  std::string text;
  llvm::raw_string_ostream os{text};

  /// The program a rank runs: its pp rank's in a pipeline.
  const weft::ProgramReport &programOfRank(int64_t rank) const {
    if (result.programs.size() == 1)
      return result.programs.front();
    std::vector<int64_t> at = meshShape.coordinates(rank);
    auto pp = llvm::find(meshShape.names, "pp");
    return result.programs[at[pp - meshShape.names.begin()]];
  }

  /// "dp 1, tp 0" for `rank`.
  std::string coordinates(int64_t rank) const {
    std::vector<int64_t> at = meshShape.coordinates(rank);
    std::vector<std::string> parts;
    for (auto [name, coordinate] : llvm::zip(meshShape.names, at))
      parts.push_back(name + " " + std::to_string(coordinate));
    return llvm::join(parts, ", ");
  }

  /// The plan compiled, among the plans priced (with --plan).
  const weft::PricedPlan *compiledPlan() const {
    if (!result.plan)
      return nullptr;
    for (const weft::PricedPlan &plan : result.topPlans)
      if (plan.plan == result.plan->plan)
        return &plan;
    return nullptr;
  }

  std::string programName(const weft::ProgramReport &program) const {
    return program.pipelineRank >= 0
               ? "pp rank " + std::to_string(program.pipelineRank)
               : std::string("every rank");
  }

  void legend(llvm::ArrayRef<std::pair<const char *, const char *>> entries) {
    os << "<p class=\"note\">";
    for (auto [name, color] : entries)
      os << "<span class=\"swatch\" style=\"background:" << color
         << "\"></span>" << name;
    os << "</p>\n";
  }

  void header() {
    const weft::CompileOptions &o = result.options;
    const char *program =
        o.program == weft::ProgramKind::Train       ? "training step"
        : o.program == weft::ProgramKind::Gradients ? "loss and gradients"
                                                    : "forward pass";
    os << "<h1>Weft report: " << escape(o.model) << "</h1>\n<p>" << program
       << " for target <b>" << escape(o.target) << "</b>, " << ranks
       << (ranks == 1 ? " rank" : " ranks");
    if (!o.mesh.empty())
      os << ", mesh <b>" << escape(o.mesh) << "</b>";
    if (!o.parallel.empty())
      os << ", strategies " << escape(llvm::join(o.parallel, ", "));
    if (o.sequenceParallel)
      os << ", sequence parallel";
    if (o.zero)
      os << ", ZeRO stage " << o.zero;
    if (o.program == weft::ProgramKind::Train)
      os << ", optimizer " << escape(o.optimizer) << ", precision "
         << escape(o.precision) << ", recompute " << escape(o.recompute);
    os << ".</p>\n";
  }

  void mesh() {
    os << "<h2 id=\"mesh\">Mesh</h2>\n";
    const weft::ProgramReport &first = result.programs.front();
    if (first.meshNames.empty()) {
      os << "<p>One rank: the program is not partitioned.</p>\n";
    } else {
      os << "<p>";
      for (size_t i = 0; i < first.meshNames.size(); ++i)
        os << (i ? " &times; " : "") << escape(first.meshNames[i]) << "="
           << first.meshSizes[i];
      os << ", ranks numbered row-major (the last axis varies fastest).</p>\n";
    }
    // One box per rank, a row per program (pp rank) when pipelined.
    constexpr int box = 96, gap = 8;
    int64_t columns = std::min<int64_t>(ranks, 8);
    int64_t rows = (ranks + columns - 1) / columns;
    os << formatv("<svg class=\"mesh\" width=\"{0}\" height=\"{1}\">\n",
                  columns * (box + gap), rows * (48 + gap));
    for (int64_t rank = 0; rank < ranks; ++rank) {
      int64_t x = (rank % columns) * (box + gap), y = (rank / columns) * 56;
      const weft::ProgramReport &program = programOfRank(rank);
      const char *fill = program.pipelineRank % 2 == 1 ? "#fde9d2" : "#dbe7f3";
      os << formatv("<g><rect class=\"mesh-rank\" x=\"{0}\" y=\"{1}\" "
                    "width=\"{2}\" height=\"48\" rx=\"4\" fill=\"{3}\" "
                    "stroke=\"#888\"/><text x=\"{4}\" y=\"{5}\">rank "
                    "{6}</text><text x=\"{4}\" y=\"{7}\">{8}</text></g>\n",
                    x, y, box, fill, x + 6, y + 18, rank, y + 36,
                    escape(coordinates(rank)));
    }
    os << "</svg>\n";
  }

  void memory() {
    os << "<h2 id=\"memory\">Memory per rank</h2>\n<p class=\"note\">What "
          "each rank's compiled program allocates: its parameter shards, "
          "optimizer state, inputs and outputs, and the peak of its "
          "temporaries (the static memory plan), where a training step's "
          "activations and gradients live.";
    if (compiledPlan())
      os << " The last bar is the planner's prediction for the busiest "
            "rank, by category.";
    os << "</p>\n";
    struct Bar {
      std::string label;
      std::string kind;
      std::vector<std::pair<Category, double>> segments;
    };
    std::vector<Bar> bars;
    for (int64_t rank = 0; rank < ranks; ++rank) {
      const weft::ProgramReport &p = programOfRank(rank);
      bars.push_back(
          {"rank " + std::to_string(rank),
           "memory-bar",
           {{kWeights, double(p.parameterBytes)},
            {kOptimizer, double(p.optimizerStateBytes)},
            {kInputsOutputs, double(p.inputBytes + p.outputBytes)},
            {kTemporaries, double(p.temporaryPeakBytes.value_or(0))}}});
    }
    if (const weft::PricedPlan *compiled = compiledPlan()) {
      bars.push_back({"predicted",
                      "memory-bar-predicted",
                      {{kWeights, compiled->weightsBytes},
                       {kGradients, compiled->gradientsBytes},
                       {kOptimizer, compiled->optimizerBytes},
                       {kActivations, compiled->activationsBytes}}});
    }
    double most = 1;
    for (const Bar &bar : bars) {
      double total = 0;
      for (auto &segment : bar.segments)
        total += segment.second;
      most = std::max(most, total);
    }
    constexpr int width = 56, height = 260, top = 20;
    os << formatv("<svg class=\"memory\" width=\"{0}\" height=\"{1}\">\n",
                  bars.size() * (width + 16) + 16, height + top + 40);
    for (auto [i, bar] : llvm::enumerate(bars)) {
      int64_t x = 16 + i * (width + 16);
      double y = top + height, total = 0;
      os << "<g class=\"" << bar.kind << "\">";
      for (auto &[category, bytes] : bar.segments) {
        double h = bytes / most * height;
        y -= h;
        total += bytes;
        os << formatv(
            "<rect class=\"segment\" x=\"{0}\" y=\"{1:F1}\" "
            "width=\"{2}\" height=\"{3:F1}\" fill=\"{4}\"><title>{5}: "
            "{6}</title></rect>",
            x, y, width, h, category.color, category.name, bytesText(bytes));
      }
      os << formatv("<text x=\"{0}\" y=\"{1}\">{2}</text><text x=\"{0}\" "
                    "y=\"{3:F0}\">{4}</text></g>\n",
                    x, top + height + 16, escape(bar.label), y - 4,
                    bytesText(total));
    }
    os << "</svg>\n";
    legend({{kWeights.name, kWeights.color},
            {kGradients.name, kGradients.color},
            {kOptimizer.name, kOptimizer.color},
            {kActivations.name, kActivations.color},
            {kInputsOutputs.name, kInputsOutputs.color},
            {kTemporaries.name, kTemporaries.color}});
  }

  void parameters() {
    os << "<h2 id=\"parameters\">Parameters</h2>\n<p class=\"note\">Sharding: "
          "the mesh axis splitting each dimension, '-' where the dimension "
          "is whole on every rank.</p>\n<table><tr><th>program</th>"
          "<th>parameter</th><th>shape</th><th>per rank</th><th>sharding</th>"
          "<th>bytes per rank</th><th>trains</th></tr>\n";
    for (const weft::ProgramReport &program : result.programs)
      for (const weft::ProgramReport::Buffer &buffer : program.buffers) {
        if (buffer.role != "param")
          continue;
        os << "<tr class=\"param-row\"><td>" << programName(program)
           << "</td><td>" << escape(buffer.name) << "</td><td>"
           << shapeText(buffer.shape) << "</td><td>"
           << shapeText(buffer.localShape) << "</td><td>"
           << escape(buffer.sharding.empty() ? "replicated" : buffer.sharding)
           << "</td><td class=\"n\">" << bytesText(buffer.localBytes)
           << "</td><td>"
           << (buffer.trains                                        ? "yes"
               : result.options.program != weft::ProgramKind::Train ? "-"
                                                                    : "frozen")
           << "</td></tr>\n";
      }
    os << "</table>\n";
  }

  void collectives() {
    os << "<h2 id=\"collectives\">Collectives per layer</h2>\n";
    struct Row {
      std::string program, layer;
      int64_t count = 0;
      double bytes = 0; // moved per rank per step
      std::map<std::string, int64_t> kinds;
    };
    std::vector<Row> rows;
    for (const weft::ProgramReport &program : result.programs) {
      llvm::StringMap<size_t> index;
      for (const weft::CollectiveReport &c : program.collectives) {
        std::string layer = layerOf(c.location);
        auto [it, inserted] = index.try_emplace(layer, rows.size());
        if (inserted)
          rows.push_back({programName(program), layer});
        Row &row = rows[it->second];
        row.count += c.runs;
        row.bytes += double(c.bytesMovedPerRank) * c.runs;
        row.kinds[c.kind + " over " + c.axes] += c.runs;
      }
    }
    if (rows.empty()) {
      os << "<p>No collectives: the program runs on one rank or its ranks "
            "never communicate.</p>\n";
      return;
    }
    os << "<p class=\"note\">Bytes a rank sends per step (ring algorithms; "
          "a pipeline message whole), by the layer of the ONNX node each "
          "collective comes from.</p>\n";
    double most = 1;
    for (const Row &row : rows)
      most = std::max(most, row.bytes);
    constexpr int label = 260, width = 520, height = 18;
    os << formatv("<svg class=\"collectives\" width=\"{0}\" height=\"{1}\">\n",
                  label + width + 100, rows.size() * (height + 4) + 4);
    for (auto [i, row] : llvm::enumerate(rows)) {
      int64_t y = 4 + i * (height + 4);
      os << formatv("<g><text x=\"0\" y=\"{0}\">{1}: {2}</text><rect "
                    "class=\"collective-bar\" x=\"{3}\" y=\"{4}\" "
                    "width=\"{5:F1}\" height=\"{6}\" fill=\"{7}\"/><text "
                    "x=\"{8:F1}\" y=\"{0}\">{9}</text></g>\n",
                    y + 13, escape(row.program), escape(row.layer), label, y,
                    std::max(1.0, row.bytes / most * width), height,
                    kCollectiveColor, label + row.bytes / most * width + 6,
                    bytesText(row.bytes));
    }
    os << "</svg>\n<table><tr><th>program</th><th>layer</th><th>collectives "
          "per step</th><th>bytes sent per rank per step</th></tr>\n";
    for (const Row &row : rows) {
      std::vector<std::string> kinds;
      for (auto &[kind, count] : row.kinds)
        kinds.push_back(std::to_string(count) + "&times; " + escape(kind));
      os << "<tr class=\"collective-row\"><td>" << escape(row.program)
         << "</td><td>" << escape(row.layer) << "</td><td>"
         << llvm::join(kinds, ", ") << "</td><td class=\"n\">"
         << bytesText(row.bytes) << "</td></tr>\n";
    }
    os << "</table>\n";
  }

  void pipeline() {
    os << "<h2 id=\"pipeline\">Pipeline schedule</h2>\n";
    if (!result.pipeline) {
      os << "<p>No pipeline: the mesh has no pp axis.</p>\n";
      return;
    }
    const weft::PipelineReport &p = *result.pipeline;
    os << formatv(
        "<p class=\"note\">{0} schedule, {1} stages, {2} "
        "micro-batches{3}; simulated with a forward pass of a "
        "micro-batch 1 unit, its backward pass 2, communication "
        "free.</p>\n",
        escape(p.schedule), p.stages, p.microbatches,
        p.virtualStages > 1
            ? formatv(", {0} model chunks per rank", p.virtualStages).str()
            : std::string());
    size_t length = 1;
    for (const std::string &row : p.timeline)
      length = std::max(length, row.size());
    constexpr int label = 90, width = 720, height = 22;
    double unit = double(width) / length;
    os << formatv("<svg class=\"timeline\" width=\"{0}\" height=\"{1}\">\n",
                  label + width + 120, p.timeline.size() * (height + 6) + 6);
    for (auto [rank, row] : llvm::enumerate(p.timeline)) {
      int64_t y = 6 + rank * (height + 6);
      os << formatv("<g class=\"timeline-row\"><text x=\"0\" y=\"{0}\">pp "
                    "rank {1}</text><rect x=\"{2}\" y=\"{3}\" width=\"{4}\" "
                    "height=\"{5}\" fill=\"#f4f4f4\"/>",
                    y + 15, rank, label, y, width, height);
      for (size_t start = 0; start < row.size();) {
        size_t end = start;
        while (end < row.size() && row[end] == row[start])
          ++end;
        if (row[start] != '.')
          os << formatv("<rect class=\"slot\" x=\"{0:F1}\" y=\"{1}\" "
                        "width=\"{2:F1}\" height=\"{3}\" fill=\"{4}\" "
                        "stroke=\"#fff\" stroke-width=\"0.5\"/>",
                        label + start * unit, y, (end - start) * unit, height,
                        row[start] == 'F' ? kForwardColor : kBackwardColor);
        start = end;
      }
      os << formatv("<text x=\"{0}\" y=\"{1}\">{2:F0}% idle</text></g>\n",
                    label + width + 8, y + 15, 100 * p.idleFraction[rank]);
    }
    os << "</svg>\n";
    legend({{"forward", kForwardColor}, {"backward", kBackwardColor}});
  }

  void planner() {
    os << "<h2 id=\"planner\">Planner</h2>\n";
    if (result.topPlans.empty()) {
      os << "<p>The parallel plan was given, not searched (compile with a "
            "plan, <code>--plan auto</code> or pinned choices, for the "
            "planner's ranking).</p>\n";
      return;
    }
    os << "<p>Plans for <b>" << escape(result.plan->cluster) << "</b> ("
       << result.plan->ranks
       << " ranks), fastest first.</p>\n"
          "<table><tr><th>plan</th><th>step (s)</th><th>tokens/s</th>"
          "<th>MFU</th><th>memory per rank</th></tr>\n";
    for (const weft::PricedPlan &plan : result.topPlans)
      os << "<tr class=\"plan-row\"><td>" << escape(plan.plan)
         << (&plan == compiledPlan() ? " <b>(compiled)</b>" : "")
         << "</td><td class=\"n\">" << formatv("{0:F4}", plan.stepSeconds)
         << "</td><td class=\"n\">" << formatv("{0:F0}", plan.tokensPerSecond)
         << "</td><td class=\"n\">" << formatv("{0:P1}", plan.mfu)
         << "</td><td class=\"n\">"
         << bytesText(plan.weightsBytes + plan.gradientsBytes +
                      plan.optimizerBytes + plan.activationsBytes)
         << "</td></tr>\n";
    os << "</table>\n";
    if (result.planExplanation.empty())
      return;
    os << "<p>Why the best plan of each other choice lost:</p>\n<ul>\n";
    for (const std::string &line : result.planExplanation)
      os << "<li class=\"plan-why\">" << escape(line) << "</li>\n";
    os << "</ul>\n";
  }

  void kernels() {
    os << "<h2 id=\"kernels\">Kernels</h2>\n";
    const weft::ProgramReport &program = result.programs.front();
    if (program.launches.empty()) {
      os << "<p>No kernels: the program is not compiled for the cuda "
            "target (<code>--target=cuda</code> lists each kernel launch "
            "and library call, priced on a GPU).</p>\n";
      return;
    }
    weft::KernelPrediction prediction =
        weft::predictKernels(program, gpu, weft::KernelCeilings{});
    os << formatv("<p>Predicted on <b>{0}</b> by a roofline with achievable "
                  "ceilings (docs/cuda-backend.md): {1} launches per step, "
                  "{2} of HBM traffic, {3:F2} ms",
                  escape(prediction.gpu), prediction.launchesPerStep,
                  bytesText(prediction.hbmBytesPerStep),
                  prediction.stepSeconds * 1e3);
    if (prediction.tokensPerSecond > 0)
      os << formatv(", {0:F0} tokens/s, MFU {1:F1}%",
                    prediction.tokensPerSecond, prediction.mfu * 100);
    os << formatv("; {0:F1}% of the matmul FLOPs on tensor cores; {1} "
                  "launches of more than 64 K elements on fewer blocks than "
                  "the GPU's {2} multiprocessors.</p>\n",
                  prediction.matmulFlopsOnTensorCores * 100,
                  prediction.undersizedLaunches, gpu.multiprocessors);
    std::vector<size_t> order(program.launches.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    auto total = [&](size_t i) {
      return prediction.launches[i].seconds * double(program.launches[i].runs);
    };
    llvm::stable_sort(order,
                      [&](size_t a, size_t b) { return total(a) > total(b); });
    os << "<table class=\"kernels\"><tr><th>#</th><th>what</th><th>ONNX "
          "node</th><th>grid or GEMM</th><th>runs</th><th>GFLOP</th><th>"
          "bytes</th><th>tensor cores</th><th>bound</th><th>µs per "
          "run</th><th>share</th></tr>\n";
    for (size_t i : llvm::ArrayRef(order).take_front(20)) {
      const weft::ProgramReport::Launch &launch = program.launches[i];
      std::string shape =
          launch.kind != "kernel"
              ? escape(launch.library) + " " + shapeText(launch.shape) +
                    (launch.epilogue.empty()
                         ? ""
                         : " (" + escape(launch.epilogue) + ")")
              : shapeText(launch.grid) + " x " + shapeText(launch.block);
      os << formatv("<tr><td class=\"n\">{0}</td><td>{1} in {2}</td><td>"
                    "{3}</td><td>{4}</td><td class=\"n\">{5}</td><td "
                    "class=\"n\">{6:F3}</td><td class=\"n\">{7}</td><td>{8}"
                    "</td><td>{9}</td><td class=\"n\">{10:F1}</td><td "
                    "class=\"n\">{11:F1}%</td></tr>\n",
                    launch.id, escape(launch.kind), escape(launch.function),
                    escape(launch.node), shape, launch.runs,
                    double(launch.flops) / 1e9,
                    bytesText(double(launch.bytesRead + launch.bytesWritten)),
                    launch.tensorCores ? "yes" : "no",
                    escape(prediction.launches[i].bound),
                    prediction.launches[i].seconds * 1e6,
                    100 * total(i) / prediction.stepSeconds);
    }
    os << "</table>\n<p class=\"note\">The 20 launches that take the most "
          "time over a step, of "
       << program.launches.size()
       << "; <code>weftc --report=kernels --report-file F.json</code> lists "
          "them all.</p>\n";
  }

  void traceSection(const weft::TraceSummary *trace) {
    os << "<h2 id=\"trace\">Trace</h2>\n";
    if (!trace) {
      os << "<p>No trace given: run with <code>weft-run --trace "
            "FILE</code> and pass it to the report for each rank's compute "
            "and communication.</p>\n";
      return;
    }
    os << "<p>The Chrome trace of a run: <a href=\"" << escape(trace->path)
       << "\">" << escape(trace->path)
       << "</a> (open it in Perfetto or chrome://tracing). Time inside the "
          "traced steps: communication is the sends, receives and "
          "collectives; compute the rest.</p>\n";
    double most = 1e-9;
    for (const weft::TraceSummary::Track &track : trace->tracks)
      most = std::max(most, track.stepSeconds);
    constexpr int label = 170, width = 560, height = 18;
    os << formatv("<svg class=\"trace\" width=\"{0}\" height=\"{1}\">\n",
                  label + width + 200, trace->tracks.size() * (height + 4) + 4);
    for (auto [i, track] : llvm::enumerate(trace->tracks)) {
      int64_t y = 4 + i * (height + 4);
      double communication =
          std::min(track.communicationSeconds, track.stepSeconds);
      double compute = track.stepSeconds - communication;
      os << formatv("<g class=\"trace-bar\"><text x=\"0\" y=\"{0}\">{1}</text>"
                    "<rect x=\"{2}\" y=\"{3}\" width=\"{4:F1}\" height=\"{5}\" "
                    "fill=\"{6}\"/><rect x=\"{7:F1}\" y=\"{3}\" "
                    "width=\"{8:F1}\" height=\"{5}\" fill=\"{9}\"/><text "
                    "x=\"{10:F1}\" y=\"{0}\">{11:F3} s compute, {12:F3} s "
                    "communication ({13} steps)</text></g>\n",
                    y + 13, escape(track.name), label, y,
                    compute / most * width, height, kComputeColor,
                    label + compute / most * width,
                    communication / most * width, kCommunicationColor,
                    label + track.stepSeconds / most * width + 6, compute,
                    communication, track.steps);
    }
    os << "</svg>\n";
    legend(
        {{"compute", kComputeColor}, {"communication", kCommunicationColor}});
  }
};

} // namespace

std::string weft::renderHtmlReport(const CompileResult &result,
                                   const TraceSummary *trace,
                                   const planner::Gpu *gpu) {
  if (result.programs.empty())
    return "<!DOCTYPE html>\n<html><body><p>Nothing was compiled.</p></body>"
           "</html>\n";
  planner::Gpu h200 = *gpuByName("h200");
  return Page(result, gpu ? *gpu : h200).render(trace);
}
