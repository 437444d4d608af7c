#include "embedlab/model.hpp"
#include "model/row_products.hpp"

namespace embedlab {

DenseTokenEmbedding::DenseTokenEmbedding(torch::Tensor table) : table_(std::move(table)) {}

torch::Tensor DenseTokenEmbedding::lookup(const torch::Tensor& ids) const
{
    return torch::embedding(table_, ids);
}

torch::Tensor DenseTokenEmbedding::project(const torch::Tensor& hidden) const
{
    return detail::times_transposed(hidden, table_);
}

} // namespace embedlab
