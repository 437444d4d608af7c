// The ONNX lookups of the dense table, the low-rank factors and LoRA-wrapped tables,
// and TokenEmbedding's default tied head (every row rebuilt in the graph). The other
// methods write theirs beside their own lookup.
#include "embedlab/lora.hpp"
#include "embedlab/low_rank.hpp"
#include "embedlab/model.hpp"
#include "io/onnx_graph.hpp"

namespace embedlab {

namespace {

// hidden [N, d] times rows [V, d] transposed: Gemm reads B transposed in place, so
// no transposed copy of the rows is stored or folded.
std::string times_rows(onnx::Graph& g, const std::string& hidden, const std::string& rows)
{
    return g.op("Gemm", {hidden, rows}, {{"transB", int64_t{1}}});
}

} // namespace

std::string TokenEmbedding::onnx_lookup(onnx::Graph&, const std::string&) const
{
    return {};
}

std::string TokenEmbedding::onnx_project(onnx::Graph& g, const std::string& hidden) const
{
    const auto all =
        g.op("Range", {g.int_scalar(0), g.int_scalar(vocab_size()), g.int_scalar(1)}, {}, "all_ids");
    const auto rows = onnx_lookup(g, all);
    return rows.empty() ? std::string() : times_rows(g, hidden, rows);
}

std::string DenseTokenEmbedding::onnx_lookup(onnx::Graph& g, const std::string& ids) const
{
    return g.gather(g.initializer("embed.table", table_), ids);
}

std::string DenseTokenEmbedding::onnx_project(onnx::Graph& g, const std::string& hidden) const
{
    return times_rows(g, hidden, g.initializer("embed.table", table_)); // the lookup's, stored once
}

std::string LowRankTokenEmbedding::onnx_lookup(onnx::Graph& g, const std::string& ids) const
{
    const auto rows = g.matmul(g.gather(g.initializer("embed.Z", Z_), ids), g.initializer("embed.P", P_));
    return kind_ == LowRankKind::PCA ? g.add(rows, g.initializer("embed.mu", mu_)) : rows;
}

std::string LowRankTokenEmbedding::onnx_project(onnx::Graph& g, const std::string& hidden) const
{
    // logits = (h P^T) Z^T + (h . mu) 1^T, as project() computes them, never forming Z P.
    const auto hp = g.op("Gemm", {hidden, g.initializer("embed.P", P_)}, {{"transB", int64_t{1}}});
    auto logits = times_rows(g, hp, g.initializer("embed.Z", Z_));
    if (kind_ == LowRankKind::PCA)
        logits = g.add(logits, g.matmul(hidden, g.unsqueeze(g.initializer("embed.mu", mu_), {1})));
    return logits;
}

// The adapters merged into the factors (pca/svd/lrf; InputError otherwise), once per
// export: lookup and head then share the merged tensors.
std::string LoraTokenEmbedding::onnx_lookup(onnx::Graph& g, const std::string& ids) const
{
    if (!onnx_merged_)
        onnx_merged_ = merged();
    return onnx_merged_->onnx_lookup(g, ids);
}

std::string LoraTokenEmbedding::onnx_project(onnx::Graph& g, const std::string& hidden) const
{
    if (!onnx_merged_)
        onnx_merged_ = merged();
    return onnx_merged_->onnx_project(g, hidden);
}

} // namespace embedlab
