//===- CompilerTest.cpp - The compiler library, driven directly -----------===//

#include "weft/Compiler/Compiler.h"
#include "weft/Compiler/FrontEnd.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace weft;

namespace {

/// x[2,4] -> Gemm(8) -> Relu -> Gemm(4) -> y[2,4], as text-format ONNX.
constexpr const char *kMlp = R"(<ir_version: 8, opset_import: ["" : 17]>
mlp (float[2, 4] x) => (float[2, 4] y)
<float[8, 4] w1 = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1,
                   1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1},
 float[8] b1 = {0, 0, 0, 0, 0, 0, 0, 0},
 float[4, 8] w2 = {1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0,
                   0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0},
 float[4] b2 = {1, 2, 3, 4}>
{
  h = Gemm<transB = 1>(x, w1, b1)
  r = Relu(h)
  y = Gemm<transB = 1>(r, w2, b2)
}
)";

constexpr const char *kUnsupported = R"(<ir_version: 8, opset_import: ["" : 17]>
bad (float[2, 4] x) => (float[2, 4] y) { y = Hardmax(x) }
)";

/// A scratch directory, removed with what is in it.
class CompilerTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(
        llvm::sys::fs::createUniqueDirectory("weft-compiler-test", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string path(llvm::StringRef name) {
    llvm::SmallString<256> p(dir);
    llvm::sys::path::append(p, name);
    return p.str().str();
  }
  std::string write(llvm::StringRef name, llvm::StringRef text) {
    std::string p = path(name);
    std::error_code ec;
    llvm::raw_fd_ostream out(p, ec);
    out << text;
    return p;
  }
  /// Compiles, recording what the compiler says.
  std::optional<CompileResult> compileRecording(const CompileOptions &options) {
    errors.clear();
    remarks.clear();
    return compile(options, [this](mlir::DiagnosticSeverity severity,
                                   const std::string &text) {
      (severity == mlir::DiagnosticSeverity::Error ? errors : remarks)
          .push_back(text);
    });
  }

  llvm::SmallString<128> dir;
  std::vector<std::string> errors, remarks;
};

TEST_F(CompilerTest, CompilesAnExecutableAndItsWeights) {
  CompileOptions options;
  options.model = write("mlp.onnxtxt", kMlp);
  options.output = path("mlp");
  options.runtimeDirectory = WEFT_RUNTIME_DIR;
  std::optional<CompileResult> result = compileRecording(options);
  ASSERT_TRUE(result) << (errors.empty() ? "" : errors.front());
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(result->files.size(), 2u);
  EXPECT_EQ(result->files[0], path("mlp"));
  EXPECT_EQ(result->files[1], path("mlp.weights"));
  EXPECT_TRUE(llvm::sys::fs::can_execute(result->files[0]));
  ASSERT_EQ(result->programs.size(), 1u);
  const ProgramReport &report = result->programs.front();
  // 32 + 8 + 32 + 4 floats, on the only rank.
  EXPECT_EQ(report.parameterBytes, 76u * 4);
  EXPECT_EQ(report.wholeModelParameterBytes, 76u * 4);
  EXPECT_EQ(report.inputBytes, 8u * 4);
  EXPECT_EQ(report.outputBytes, 8u * 4);
  EXPECT_TRUE(report.meshNames.empty());
  EXPECT_TRUE(report.collectives.empty());
  // Only what is left beside the inputs: the executable and its weights.
  std::error_code ec;
  int entries = 0;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec))
    ++entries;
  EXPECT_EQ(entries, 3);
}

TEST_F(CompilerTest, MegatronSplitsBothLinearsWithOneAllReduce) {
  CompileOptions options;
  options.model = write("mlp.onnxtxt", kMlp);
  options.mesh = "tp=2";
  options.parallel = {"megatron"};
  options.emit = EmitKind::Object;
  options.output = path("mlp.o");
  std::optional<CompileResult> result = compileRecording(options);
  ASSERT_TRUE(result) << (errors.empty() ? "" : errors.front());
  ASSERT_EQ(result->programs.size(), 1u);
  const ProgramReport &report = result->programs.front();
  EXPECT_EQ(report.meshNames, std::vector<std::string>{"tp"});
  EXPECT_EQ(report.meshSizes, std::vector<int64_t>{2});
  // Column-parallel w1 and b1, row-parallel w2: all split in half. The
  // second bias is added once, after the reduction.
  EXPECT_EQ(report.splitWholeParameterBytes, 72u * 4);
  EXPECT_EQ(report.splitParameterBytes, 36u * 4);
  ASSERT_EQ(report.replicatedParameters.size(), 1u);
  EXPECT_EQ(report.replicatedParameters.front().name, "b2");
  ASSERT_EQ(report.collectives.size(), 1u);
  EXPECT_EQ(report.collectives.front().kind, "all_reduce");
  EXPECT_EQ(report.collectives.front().axes, "tp");
  // The ring all-reduce of 2x4 floats over 2 ranks sends half of it twice.
  EXPECT_EQ(report.collectives.front().bytesIn, 32);
  EXPECT_EQ(report.collectives.front().bytesMovedPerRank, 32);
  EXPECT_EQ(result->files,
            (std::vector<std::string>{path("mlp.o"), path("mlp.o.weights")}));
}

TEST_F(CompilerTest, ErrorsComeOnceThroughTheCallbackAndLeaveNoFiles) {
  CompileOptions options;
  options.model = write("bad.onnxtxt", kUnsupported);
  options.output = path("bad");
  options.runtimeDirectory = WEFT_RUNTIME_DIR;
  EXPECT_FALSE(compileRecording(options));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors.front().rfind("node 'Hardmax_0' (Hardmax, opset 17): "
                                 "unsupported op 'Hardmax'",
                                 0),
            0u)
      << errors.front();
  EXPECT_FALSE(llvm::sys::fs::exists(path("bad")));
  EXPECT_FALSE(llvm::sys::fs::exists(path("bad.weights")));

  options.model = write("mlp.onnxtxt", kMlp);
  options.mesh = "tp=3";
  options.parallel = {"megatron"};
  EXPECT_FALSE(compileRecording(options));
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors.front().find("tp"), std::string::npos) << errors.front();
  EXPECT_FALSE(llvm::sys::fs::exists(path("bad")));

  options.mesh = "tp=2";
  options.target = "tpu";
  EXPECT_FALSE(compileRecording(options));
  EXPECT_EQ(
      errors,
      std::vector<std::string>{
          "--target must be one of cpu, cuda, cuda-emulation, not 'tpu'"});

  options.target = "cpu";
  options.plan = "auto";
  EXPECT_FALSE(compileRecording(options));
  EXPECT_EQ(errors,
            std::vector<std::string>{
                "--plan chooses how a training step runs: add --train"});
}

TEST_F(CompilerTest, PassesNameEveryStage) {
  CompileOptions options;
  options.model = path("never-read.onnx");
  options.program = ProgramKind::Train;
  options.mesh = "dp=2";
  options.parallel = {"dp"};
  options.emit = EmitKind::Passes;
  std::optional<CompileResult> result = compileRecording(options);
  ASSERT_TRUE(result) << (errors.empty() ? "" : errors.front());
  for (const char *pass :
       {"weft-fuse-attention", "weft-derive-train-step", "weft-shard-presets",
        "weft-partition", "weft-bucket-collectives", "convert-weft-to-linalg",
        "one-shot-bufferize"})
    EXPECT_NE(result->text.find(pass), std::string::npos) << pass;
  EXPECT_TRUE(result->files.empty());
}

TEST_F(CompilerTest, PlansTrainingOnACluster) {
  PlanOptions options;
  options.synthetic = "gpt:layers=4,hidden=64,heads=4,vocab=256,seq=32,batch=8";
  options.cluster = "dgx-h100";
  options.nodes = 2;
  std::string error;
  std::optional<PlanResult> planned = planTraining(options, error);
  ASSERT_TRUE(planned) << error;
  EXPECT_EQ(planned->cluster.gpus(), 16);
  EXPECT_EQ(planned->model.layers, 4);
  ASSERT_FALSE(planned->search.fitting.empty());
  const planner::Plan &best = planned->search.fitting.front().plan;
  EXPECT_EQ(best.dp * best.tp * best.pp, 16);

  options.cluster = "no-such-cluster";
  EXPECT_FALSE(planTraining(options, error));
  EXPECT_EQ(error.rfind("--cluster: 'no-such-cluster' is neither a preset", 0),
            0u)
      << error;
}

} // namespace
