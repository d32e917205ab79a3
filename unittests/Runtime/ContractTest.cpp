//===- ContractTest.cpp - The manifest and weights header both sides read -===//

#include "weft/runtime/Contract.h"

#include <gtest/gtest.h>

using namespace weft::runtime;

namespace {

Manifest trainingManifest() {
  Manifest manifest;
  manifest.device = kEmulatedCudaDevice;
  manifest.mesh.names = {"dp", "tp"};
  manifest.mesh.sizes = {2, 2};
  manifest.groups = {1, 2};
  manifest.gradSync = GradSync::Hierarchical;
  manifest.gradSyncAxes = 1;
  manifest.training =
      ManifestTraining{"adamw", 0.9, 0.95, 50257, 1.5e15, "input \"ids\""};
  manifest.buffers.push_back(
      {WEFT_INPUT, "input_ids", WEFT_I64, {8, 128}, "0,-", 0, 0, 50257});
  manifest.buffers.push_back({WEFT_PARAM,
                              "h.0.attn.c_attn.weight",
                              WEFT_F32,
                              {768, 2304},
                              "-,1x3",
                              64,
                              3538944});
  manifest.buffers.push_back({WEFT_STATE, "m/h.0", WEFT_BF16, {}, "", 0, 0});
  manifest.buffers.push_back({WEFT_OUTPUT, "loss", WEFT_F32, {}, "", 0, 0});
  return manifest;
}

TEST(ContractTest, ManifestRoundTripsThroughJson) {
  Manifest written = trainingManifest();
  std::string error;
  std::optional<Manifest> read = Manifest::parse(written.toJson(), error);
  ASSERT_TRUE(read) << error;
  EXPECT_EQ(read->device, "cuda-emulation");
  EXPECT_EQ(read->mesh.names, written.mesh.names);
  EXPECT_EQ(read->mesh.sizes, written.mesh.sizes);
  EXPECT_EQ(read->groups, written.groups);
  EXPECT_EQ(read->gradSync, GradSync::Hierarchical);
  EXPECT_EQ(read->gradSyncAxes, 1);
  ASSERT_TRUE(read->training);
  EXPECT_EQ(read->training->optimizer, "adamw");
  EXPECT_EQ(read->training->beta2, 0.95);
  EXPECT_EQ(read->training->vocab, 50257);
  EXPECT_EQ(read->training->stepFlops, 1.5e15);
  EXPECT_EQ(read->training->tokenInput, "input \"ids\"");
  ASSERT_EQ(read->buffers.size(), written.buffers.size());
  for (size_t i = 0; i < written.buffers.size(); ++i) {
    const ManifestBuffer &a = written.buffers[i], &b = read->buffers[i];
    EXPECT_EQ(a.role, b.role);
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.dtype, b.dtype);
    EXPECT_EQ(a.shape, b.shape);
    EXPECT_EQ(a.sharding, b.sharding);
    EXPECT_EQ(a.weightsOffset, b.weightsOffset);
    EXPECT_EQ(a.shardStride, b.shardStride);
    EXPECT_EQ(a.indexBound, b.indexBound);
  }
  // The writer is deterministic: the weights header's hash depends on it.
  EXPECT_EQ(read->toJson(), written.toJson());
}

TEST(ContractTest, AnotherVersionIsNamed) {
  std::string json = trainingManifest().toJson();
  size_t at = json.find("\"version\": 6");
  ASSERT_NE(at, std::string::npos);
  json.replace(at, 12, "\"version\": 3");
  std::string error;
  EXPECT_FALSE(Manifest::parse(json, error));
  EXPECT_EQ(error, "is version 3 and this runtime reads version 6: compile "
                   "the model with this Weft");

  EXPECT_FALSE(
      Manifest::parse("weft-manifest 2\nbuffer input x f32 1 4 -\n", error));
  EXPECT_EQ(error.rfind("is not a JSON object", 0), 0u) << error;
}

TEST(ContractTest, MalformedManifestsSayWhat) {
  auto parse = [](const std::string &json) {
    std::string error;
    EXPECT_FALSE(Manifest::parse(json, error)) << json;
    return error;
  };
  std::string head = "{\"format\": \"weft-manifest\", \"version\": 6, "
                     "\"device\": \"cpu\", ";
  EXPECT_EQ(parse(head + "\"mesh\": [], \"groups\": []}"),
            "is malformed: no 'buffers'");
  EXPECT_EQ(parse(head + "\"mesh\": [], \"groups\": [], \"buffers\": "
                         "[{\"role\": \"input\", \"name\": \"ids\", \"dtype\": "
                         "\"i64\", \"shape\": [2], \"sharding\": \"-\", "
                         "\"index_bound\": 0}]}"),
            "is malformed: buffer 'ids' has a bad 'index_bound'");
  EXPECT_EQ(parse(head + "\"mesh\": [{\"name\": \"dp\", \"size\": 0}], "
                         "\"groups\": [], \"buffers\": []}"),
            "is malformed: mesh axis 'dp' has size 0");
  EXPECT_EQ(parse(head + "\"mesh\": [], \"groups\": [], \"buffers\": "
                         "[{\"role\": \"input\", \"name\": \"x\", \"dtype\": "
                         "\"f8\", \"shape\": [2], \"sharding\": \"-\"}]}"),
            "is malformed: buffer 'x' has the unknown dtype 'f8'");
  EXPECT_EQ(parse(head + "\"mesh\": [], \"groups\": [], \"buffers\": "
                         "[{\"role\": \"input\", \"name\": \"x\", \"dtype\": "
                         "\"f32\", \"shape\": [2, 3], \"sharding\": \"-\"}]}"),
            "is malformed: buffer 'x' has the bad sharding '-'");
  EXPECT_EQ(parse(head + "\"mesh\": [], \"groups\": [], \"buffers\": "
                         "[{\"role\": \"param\", \"name\": \"w\", \"dtype\": "
                         "\"f32\", \"shape\": [2], \"sharding\": \"-\"}]}"),
            "is malformed: no 'weights_offset'");
  EXPECT_EQ(parse(head + "\"mesh\": 3, \"groups\": [], \"buffers\": []}"),
            "is malformed: 'mesh' has the wrong type");
  EXPECT_EQ(parse("{\"format\": \"weft-manifest\", \"version\": 6, "
                  "\"device\": \"tpu\", \"mesh\": [], \"groups\": [], "
                  "\"buffers\": []}"),
            "is malformed: its device is 'tpu', not cpu, cuda or "
            "cuda-emulation");
}

TEST(ContractTest, WeightsHeaderNamesItsManifest) {
  std::string json = trainingManifest().toJson();
  char header[kWeightsHeaderBytes];
  WeightsHeader{manifestHash(json), 4096}.write(header);
  EXPECT_EQ(std::string(header, 8), "WEFTWGT1");
  WeightsHeader read;
  ASSERT_TRUE(WeightsHeader::read(header, sizeof(header), read));
  EXPECT_EQ(read.manifestHash, manifestHash(json));
  EXPECT_EQ(read.fileBytes, 4096u);
  EXPECT_NE(manifestHash(json), manifestHash(json + " "));
  EXPECT_FALSE(WeightsHeader::read(header, 63, read));
  header[0] = 'X';
  EXPECT_FALSE(WeightsHeader::read(header, sizeof(header), read));
}

TEST(ContractTest, DtypeNamesRoundTrip) {
  for (int d = WEFT_F32; d <= WEFT_BOOL; ++d) {
    std::optional<weft_dtype> parsed =
        parseDtype(weft_dtype_name(weft_dtype(d)));
    ASSERT_TRUE(parsed);
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_FALSE(parseDtype("f8"));
}

} // namespace

TEST(ContractTest, GradSyncNamesRoundTrip) {
  for (GradSync sync : {GradSync::Library, GradSync::Ring, GradSync::Tree,
                        GradSync::ParameterServer, GradSync::Hierarchical})
    EXPECT_EQ(parseGradSync(gradSyncName(sync)), sync);
  EXPECT_EQ(parseGradSync("ps"), GradSync::ParameterServer);
  EXPECT_FALSE(parseGradSync("star"));
}

TEST(ContractTest, FusedAttentionRefusesWhatCudnnRefuses) {
  // GPT-2 small's attention, forward and backward.
  EXPECT_EQ(
      fusedAttentionRefusal(12, 12, 1024, 1024, 64, 64, kAttentionCausal, true),
      nullptr);
  // Grouped heads, a bias, a decode step (S < T, bottom-right causal).
  EXPECT_EQ(
      fusedAttentionRefusal(32, 8, 128, 128, 128, 128, kAttentionBias, true),
      nullptr);
  EXPECT_EQ(fusedAttentionRefusal(8, 8, 1, 64, 64, 64, kAttentionCausal, false),
            nullptr);
  EXPECT_NE(fusedAttentionRefusal(12, 12, 64, 64, 12, 12, 0, false), nullptr);
  EXPECT_NE(fusedAttentionRefusal(12, 8, 64, 64, 64, 64, 0, false), nullptr);
  EXPECT_NE(fusedAttentionRefusal(4, 4, 64, 64, 256, 256, 0, true), nullptr);
  EXPECT_EQ(fusedAttentionRefusal(4, 4, 64, 64, 256, 256, 0, false), nullptr);
  EXPECT_NE(
      fusedAttentionRefusal(4, 4, 64, 32, 64, 64, kAttentionCausal, false),
      nullptr);
  EXPECT_NE(fusedAttentionRefusal(4, 4, 32, 64, 64, 64,
                                  kAttentionCausal | kAttentionBias, false),
            nullptr);
  EXPECT_NE(fusedAttentionRefusal(4, 4, 1, 1, 64, 64, 0, true), nullptr);
  EXPECT_EQ(fusedAttentionRefusal(4, 4, 1, 1, 64, 64, 0, false), nullptr);
  EXPECT_NE(fusedAttentionRefusal(4, 4, -1, 64, 64, 64, 0, false), nullptr);
}
