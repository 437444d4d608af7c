// LanguageModel's head from stored blocks: whatever table provides the capability
// (TokenEmbedding::block_head; today quant's q8_0 / q4_0 rows, quantised_block_head.cpp).
#include "embedlab/error.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

bool LanguageModel::has_block_head() const
{
    return config_.tied_embeddings && !config_.is_encoder() && embedding_->has_block_head();
}

torch::Tensor LanguageModel::block_head(const torch::Tensor& hidden) const
{
    if (!has_block_head())
        throw InputError("block_head: the model's head is not a tied quant table of q8_0 or q4_0 blocks (" +
                         embedding_->kind() + ")");
    c10::InferenceMode guard;
    auto logits = embedding_->block_head(hidden);
    if (config_.final_softcap > 0) // as unguarded_head does
        logits = torch::tanh(logits / config_.final_softcap) * config_.final_softcap;
    return logits;
}

} // namespace embedlab
