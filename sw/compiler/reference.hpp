// The graph run on the host as the chip computes it: a matmul's operands
// rounded to its format (nearest even, saturating, as the DMA engine casts
// them) and their products summed one by one into an FP32 accumulator, as
// the tensor core does; the vector unit's operations from
// engines/num/vector_ops.hpp. A compiled graph's outputs equal these bit
// for bit, however it was tiled and fused (compiler_device_test.cpp).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir.hpp"

namespace tessera::compiler {

// Every tensor's values by id (a cast's as its format holds them, an
// argmax's indices as floats). `inputs` by input name, FP32, each the
// input's element count; a missing or misshapen one throws
// std::invalid_argument naming it.
// `state`: the KV caches' values by name (BF16 values as floats, the
// cache's elements; a missing one starts at zeros), read and updated as
// the chip's attention reads and appends them, so that runs chain.
std::vector<std::vector<float>> reference(const Graph& g, const std::map<std::string, std::vector<float>>& inputs,
                                          std::map<std::string, std::vector<float>>* state = nullptr);

// A graph that every chip of a system runs (SPMD: its collectives,
// Graph::all_reduce and all_gather, combine the chips' values): chip c's
// values from its graph (graphs[c]: the same ops and shapes on every chip,
// the weights its own), inputs[c] and *states[c] (none given: each chip's
// own, from zeros), each collective as the communication engines compute
// it (ip/c2c/comm_reference.hpp). reference() is this on one chip, and
// refuses a collective of more.
std::vector<std::vector<std::vector<float>>> reference_spmd(const std::vector<const Graph*>& graphs,
                                                            const std::vector<std::map<std::string, std::vector<float>>>& inputs,
                                                            std::vector<std::map<std::string, std::vector<float>>*> states = {});

// Checks run()'s and reference()'s inputs against the graph (an
// attention's positions: whole numbers, one after another, inside its
// cache; over paged caches, attention_segments()).
void check_inputs(const Graph& g, const std::map<std::string, std::vector<float>>& inputs);

// A paged attention's rows as runs of one sequence at consecutive
// positions: `rows` rows from `row`, at positions `position` ...
struct Segment {
  unsigned sequence = 0, row = 0, rows = 0, position = 0;
};
// The segments of a paged attention `op` (Paging) for these inputs,
// checked: whole numbers; a sequence's rows together; its positions and
// the pages they need inside its page table and the cache; no page that a
// segment writes used by another. Throws std::invalid_argument naming the op.
std::vector<Segment> attention_segments(const Graph& g, const Op& op, const std::map<std::string, std::vector<float>>& inputs);

}  // namespace tessera::compiler
