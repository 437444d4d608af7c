#include "embedlab/error.hpp"
#include "embedlab/model.hpp"
#include "model/row_products.hpp"

namespace embedlab {

std::shared_ptr<const TokenEmbedding> TokenEmbedding::with_low_rank_factors(const LowRankFactors&) const
{
    throw InputError("embedding kind '" + kind() + "' has no low-rank factors to replace");
}

DenseTokenEmbedding::DenseTokenEmbedding(torch::Tensor table) : table_(std::move(table)) {}

torch::Tensor DenseTokenEmbedding::lookup(const torch::Tensor& ids) const
{
    auto rows = torch::embedding(table_, ids);
    // A half table (generation's f16/bf16 weights as stored): float32 rows, as the model computes.
    return rows.scalar_type() == torch::kFloat32 ? rows : rows.to(torch::kFloat32);
}

torch::Tensor DenseTokenEmbedding::project(const torch::Tensor& hidden) const
{
    return detail::times_transposed(hidden, table_);
}

} // namespace embedlab
