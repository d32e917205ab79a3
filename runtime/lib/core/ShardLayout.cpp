//===- ShardLayout.cpp - Which part of a tensor a rank holds --------------===//

#include "weft/runtime/ShardLayout.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace weft::runtime {

int64_t MeshShape::numRanks() const {
  int64_t n = 1;
  for (int64_t size : sizes)
    n *= size;
  return n;
}

std::vector<int64_t> MeshShape::coordinates(int64_t rank) const {
  std::vector<int64_t> coords(sizes.size());
  for (size_t axis = sizes.size(); axis-- > 0;) {
    coords[axis] = rank % sizes[axis];
    rank /= sizes[axis];
  }
  return coords;
}

std::string MeshShape::describe() const {
  std::string text;
  for (size_t axis = 0; axis < sizes.size(); ++axis)
    text += (axis ? "," : "") + names[axis] + "=" + std::to_string(sizes[axis]);
  return text;
}

bool MeshShape::parse(const std::string &text, MeshShape &mesh,
                      std::string *error) {
  mesh = MeshShape();
  auto fail = [&](std::string why) {
    if (error)
      *error = std::move(why);
    return false;
  };
  auto trim = [](const std::string &s) {
    size_t first = s.find_first_not_of(" \t");
    if (first == std::string::npos)
      return std::string();
    return s.substr(first, s.find_last_not_of(" \t") - first + 1);
  };
  if (trim(text).empty())
    return true;
  std::stringstream items(text);
  std::string raw;
  while (std::getline(items, raw, ',')) {
    std::string item = trim(raw);
    size_t eq = item.find('=');
    std::string name = trim(item.substr(0, eq));
    std::string sizeText =
        eq == std::string::npos ? std::string() : trim(item.substr(eq + 1));
    char *end = nullptr;
    errno = 0;
    long long size = strtoll(sizeText.c_str(), &end, 10);
    if (name.empty() || sizeText.empty() || *end || errno || size < 1)
      return fail("bad mesh axis '" + item +
                  "' (expected NAME=SIZE with SIZE >= 1)");
    for (const std::string &seen : mesh.names)
      if (seen == name)
        return fail("mesh axis '" + name + "' appears twice");
    mesh.names.push_back(name);
    mesh.sizes.push_back(size);
  }
  if (!text.empty() && text.back() == ',')
    return fail("bad mesh axis '' (expected NAME=SIZE with SIZE >= 1)");
  return true;
}

bool ShardSpec::parse(const std::string &text, size_t rank, ShardSpec &spec) {
  spec.dims.clear();
  std::stringstream tokens(text);
  std::string token;
  while (std::getline(tokens, token, ',')) {
    DimSplit dim;
    if (token != "-") {
      if (token.size() > 1 && token.back() == 'z') {
        dim.zigzag = true;
        token.pop_back();
      }
      size_t times = token.find('x');
      std::string axes = token.substr(0, times);
      if (times != std::string::npos) {
        std::string count = token.substr(times + 1);
        char *end = nullptr;
        errno = 0;
        dim.blocks = strtoll(count.c_str(), &end, 10);
        if (count.empty() || *end || errno || dim.blocks < 1)
          return false;
      }
      std::stringstream axisTokens(axes);
      std::string axis;
      while (std::getline(axisTokens, axis, '.')) {
        // A mesh has a few axes: more than two digits is not one.
        if (axis.empty() || axis.size() > 2 ||
            axis.find_first_not_of("0123456789") != std::string::npos)
          return false;
        dim.axes.push_back(std::stoi(axis));
      }
      if (dim.axes.empty() ||
          (dim.zigzag && (dim.axes.size() > 1 || dim.blocks > 1)))
        return false;
    }
    spec.dims.push_back(dim);
  }
  return spec.dims.size() == rank;
}

bool ShardSpec::fits(const MeshShape &mesh) const {
  std::vector<bool> used(mesh.sizes.size(), false);
  for (const DimSplit &dim : dims)
    for (int axis : dim.axes) {
      if (axis >= int(mesh.sizes.size()) || used[axis])
        return false;
      used[axis] = true;
    }
  return true;
}

std::string ShardSpec::str() const {
  std::string text;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d)
      text += ",";
    if (dims[d].axes.empty()) {
      text += "-";
      continue;
    }
    for (size_t i = 0; i < dims[d].axes.size(); ++i)
      text += (i ? "." : "") + std::to_string(dims[d].axes[i]);
    if (dims[d].blocks > 1)
      text += "x" + std::to_string(dims[d].blocks);
    if (dims[d].zigzag)
      text += "z";
  }
  return text;
}

std::string ShardSpec::describe(const MeshShape &mesh) const {
  if (isReplicated())
    return "replicated";
  std::string text;
  for (size_t d = 0; d < dims.size(); ++d) {
    text += d ? ", " : "";
    if (dims[d].axes.empty()) {
      text += "-";
      continue;
    }
    for (size_t i = 0; i < dims[d].axes.size(); ++i) {
      int axis = dims[d].axes[i];
      text += (i ? "+" : "") + (size_t(axis) < mesh.names.size()
                                    ? mesh.names[axis]
                                    : std::to_string(axis));
    }
    if (dims[d].blocks > 1)
      text += " (" + std::to_string(dims[d].blocks) + " blocks)";
    if (dims[d].zigzag)
      text += " (head/tail pairs)";
  }
  return text;
}

bool ShardSpec::isReplicated() const {
  for (const DimSplit &dim : dims)
    if (!dim.axes.empty())
      return false;
  return true;
}

/// A zigzag dim is two blocks whose second one takes its pieces in reverse.
static int64_t blocksOf(const DimSplit &dim) {
  return dim.zigzag ? 2 : dim.blocks;
}

static int64_t partsOf(const DimSplit &dim, const MeshShape &mesh) {
  int64_t parts = 1;
  for (int axis : dim.axes)
    parts *= mesh.sizes[axis];
  return parts;
}

std::vector<int64_t> ShardSpec::localShape(const std::vector<int64_t> &global,
                                           const MeshShape &mesh) const {
  // An uneven split rounds up: the last shards end in padding.
  std::vector<int64_t> local(global);
  for (size_t d = 0; d < dims.size(); ++d) {
    int64_t blocks = blocksOf(dims[d]), parts = partsOf(dims[d], mesh);
    local[d] = blocks * ((global[d] / blocks + parts - 1) / parts);
  }
  return local;
}

int64_t ShardSpec::numShards(const MeshShape &mesh) const {
  int64_t n = 1;
  for (const DimSplit &dim : dims)
    n *= partsOf(dim, mesh);
  return n;
}

int64_t ShardSpec::shardIndex(const std::vector<int64_t> &coordinates,
                              const MeshShape &mesh) const {
  int64_t index = 0;
  for (const DimSplit &dim : dims)
    for (int axis : dim.axes)
      index = index * mesh.sizes[axis] + coordinates[axis];
  return index;
}

ShardSpec bufferSpec(const weft_buffer_info *info) {
  ShardSpec spec;
  ShardSpec::parse(info->sharding, info->rank, spec);
  return spec;
}

void copyStrided(const char *source, const int64_t *sourceStrides, char *dest,
                 const int64_t *destStrides, const int64_t *sizes, int rank,
                 size_t elementSize) {
  // Collectives and checkpoints copy boxes of millions of elements whose
  // dims mostly fold together: drop unit dims and merge a dim into the one
  // outside it wherever both arrays lay them out contiguously, so that the
  // copy becomes few long memcpys (or one strided loop) instead of one
  // call per element.
  struct Dim {
    int64_t size, source, dest;
  };
  std::vector<Dim> dims;
  for (int d = 0; d < rank; ++d) {
    if (sizes[d] == 0)
      return;
    if (sizes[d] == 1)
      continue;
    Dim dim{sizes[d], sourceStrides[d], destStrides[d]};
    if (!dims.empty()) {
      Dim &outer = dims.back();
      if (outer.source == dim.source * dim.size &&
          outer.dest == dim.dest * dim.size) {
        outer = {outer.size * dim.size, dim.source, dim.dest};
        continue;
      }
    }
    dims.push_back(dim);
  }
  if (dims.empty()) {
    memcpy(dest, source, elementSize);
    return;
  }
  Dim inner = dims.back();
  dims.pop_back();
  auto copyInner = [&](const char *from, char *to) {
    if (inner.source == 1 && inner.dest == 1) {
      memcpy(to, from, inner.size * elementSize);
      return;
    }
    for (int64_t i = 0; i < inner.size; ++i)
      memcpy(to + i * inner.dest * elementSize,
             from + i * inner.source * elementSize, elementSize);
  };
  // The outer dims as an odometer.
  std::vector<int64_t> index(dims.size(), 0);
  const char *from = source;
  char *to = dest;
  while (true) {
    copyInner(from, to);
    size_t d = dims.size();
    for (; d-- > 0;) {
      from += dims[d].source * elementSize;
      to += dims[d].dest * elementSize;
      if (++index[d] < dims[d].size)
        break;
      from -= dims[d].size * dims[d].source * elementSize;
      to -= dims[d].size * dims[d].dest * elementSize;
      index[d] = 0;
    }
    if (d == size_t(-1))
      return;
  }
}

void ShardSpec::copy(const void *global, void *local,
                     const std::vector<int64_t> &globalShape,
                     size_t elementSize, int64_t shard, const MeshShape &mesh,
                     bool toLocal) const {
  // The shard's chunk index along each dim, from its linear index.
  std::vector<int64_t> chunk(dims.size(), 0);
  for (size_t d = dims.size(); d-- > 0;) {
    int64_t parts = partsOf(dims[d], mesh);
    chunk[d] = shard % parts;
    shard /= parts;
  }
  // View every dim d as [blocks, size / blocks]: the shard holds, in each
  // block, the chunk-th of `parts` pieces of ceil(block / parts) elements;
  // the last pieces may be cut short (their rest is padding). So the copy
  // is a box over dims (blocks_0, piece_0, blocks_1, piece_1, ...). A
  // zigzag dim's second block holds piece parts-1-chunk: the box's block
  // stride spans the distance between its two pieces.
  std::vector<int64_t> localShape = this->localShape(globalShape, mesh);
  std::vector<int64_t> gStrides(dims.size()), lStrides(dims.size());
  int64_t globalStride = 1, localStride = 1, localCount = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    gStrides[d] = globalStride;
    lStrides[d] = localStride;
    globalStride *= globalShape[d];
    localStride *= localShape[d];
    localCount *= localShape[d];
  }
  std::vector<int64_t> sizes, globalStrides, localStrides;
  int64_t globalOffset = 0;
  bool padded = false;
  for (size_t d = 0; d < dims.size(); ++d) {
    int64_t blocks = blocksOf(dims[d]);
    int64_t blockSize = globalShape[d] / blocks;
    int64_t piece = localShape[d] / blocks;
    int64_t valid =
        std::max<int64_t>(0, std::min(piece, blockSize - chunk[d] * piece));
    padded |= valid < piece;
    int64_t blockStride = blockSize;
    if (dims[d].zigzag) {
      int64_t parts = partsOf(dims[d], mesh);
      blockStride =
          (zigzagChunk(chunk[d], 1, parts) - zigzagChunk(chunk[d], 0, parts)) *
          piece;
    }
    sizes.push_back(blocks);
    globalStrides.push_back(blockStride * gStrides[d]);
    localStrides.push_back(piece * lStrides[d]);
    sizes.push_back(valid);
    globalStrides.push_back(gStrides[d]);
    localStrides.push_back(lStrides[d]);
    globalOffset += chunk[d] * piece * gStrides[d];
  }
  if (padded && toLocal)
    memset(local, 0, localCount * elementSize);
  for (int64_t size : sizes)
    if (size == 0)
      return; // this shard is all padding
  const char *globalBase =
      static_cast<const char *>(global) + globalOffset * elementSize;
  int rank = static_cast<int>(sizes.size());
  if (toLocal)
    copyStrided(globalBase, globalStrides.data(), static_cast<char *>(local),
                localStrides.data(), sizes.data(), rank, elementSize);
  else
    copyStrided(static_cast<const char *>(local), localStrides.data(),
                const_cast<char *>(globalBase), globalStrides.data(),
                sizes.data(), rank, elementSize);
}

void ShardSpec::extract(const void *global, void *local,
                        const std::vector<int64_t> &globalShape,
                        size_t elementSize, int64_t shard,
                        const MeshShape &mesh) const {
  copy(global, local, globalShape, elementSize, shard, mesh, true);
}

void ShardSpec::insert(const void *local, void *global,
                       const std::vector<int64_t> &globalShape,
                       size_t elementSize, int64_t shard,
                       const MeshShape &mesh) const {
  copy(const_cast<void *>(global), const_cast<void *>(local), globalShape,
       elementSize, shard, mesh, false);
}

} // namespace weft::runtime
