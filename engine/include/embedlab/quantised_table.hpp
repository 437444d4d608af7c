// quant (issue 38): the token table itself in one of ggml's block formats, quantised
// bit-identically to ggml's reference quantizer (what llama-quantize writes for
// --token-embedding-type without an importance matrix). Lookups dequantise the
// looked-up rows and the tied head multiplies with the dequantised rows, as llama.cpp
// does, so a quantised baseline's perplexity is the one llama.cpp would measure.
//
//   auto e = embedlab::quantise_table(table, "q4_k");  // InputError: unknown type, or
//                                                      // d not a multiple of its block
//   e->lookup(ids);                                    // dequantised rows [.., d]
//   e->blocks();                                       // uint8 [V, row bytes]: what is stored
//
// Thread safety: const after construction; quantise_table is reentrant.
#pragma once

#include <memory>
#include <string>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

class QuantisedTokenEmbedding final : public TokenEmbedding {
public:
    // blocks uint8 [V, the type's bytes for a row of dim values]; InputError naming
    // what disagrees (an unknown type, a width its blocks do not divide, the shape).
    QuantisedTokenEmbedding(const std::string& type, int64_t dim, torch::Tensor blocks);

    int64_t vocab_size() const override { return blocks_.size(0); }
    int64_t dim() const override { return dim_; }
    torch::Tensor lookup(const torch::Tensor& ids) const override;
    torch::Tensor project(const torch::Tensor& hidden) const override;
    // Every row dequantised, [V, d] float32 (a head over frozen weights builds it once).
    torch::Tensor rebuilt_rows() const override;
    std::string onnx_lookup(onnx::Graph& graph, const std::string& ids) const override; // onnx_export.hpp
    // V d: every value is stored (at bits_per_value bits each).
    int64_t parameter_count() const override { return vocab_size() * dim_; }
    std::string kind() const override { return "quant"; }
    std::vector<std::pair<std::string, torch::Tensor>> stored_tensors() const override; // quant.blocks
    std::string stored_row_type() const override { return type(); }
    // q8_0 and q4_0 rows (d a multiple of 32): the head from the blocks as stored
    // (quantised_block_head.cpp), each block's sum scaled by its half-precision scale.
    bool has_block_head() const override;
    torch::Tensor block_head(const torch::Tensor& hidden) const override;

    const std::string& type() const { return type_; } // "q4_k"
    const torch::Tensor& blocks() const { return blocks_; }
    double bits_per_value() const; // block scales included: q4_k 4.5

private:
    std::string type_;
    uint32_t ggml_type_ = 0;
    int64_t dim_ = 0;
    torch::Tensor blocks_;
};

// table [V, d] float32 in `type` (any case: "Q4_K" is "q4_k"), row by row on every core.
std::shared_ptr<QuantisedTokenEmbedding> quantise_table(const torch::Tensor& table, const std::string& type,
                                                        const ProgressFn& progress = {});

} // namespace embedlab
