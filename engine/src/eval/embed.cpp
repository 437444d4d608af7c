// Framing, pooling and sentence embeddings (encoder.hpp).
#include <algorithm>

#include "embedlab/encoder.hpp"
#include "embedlab/non_finite.hpp"
#include "embedlab/wordpiece.hpp"

namespace embedlab {

const char* pooling_name(Pooling pooling)
{
    switch (pooling) {
    case Pooling::Cls:
        return "cls";
    case Pooling::Max:
        return "max";
    case Pooling::Mean:
        break;
    }
    return "mean";
}

std::optional<Pooling> parse_pooling(std::string_view text)
{
    if (text == "cls")
        return Pooling::Cls;
    if (text == "mean")
        return Pooling::Mean;
    if (text == "max")
        return Pooling::Max;
    return std::nullopt;
}

Pooling default_pooling(const ModelConfig& config)
{
    if (const auto declared = parse_pooling(config.pooling))
        return *declared;
    return config.encoder_head == EncoderHead::Classification ? Pooling::Cls : Pooling::Mean;
}

namespace {

int32_t required_token(std::optional<int32_t> id, const char* what)
{
    if (!id)
        throw InputError(std::string("the tokenizer has no ") + what +
                         " token, which an encoder's input needs (a WordPiece vocabulary has it)");
    return *id;
}

// Hugging Face tokenizers' truncation with 'longest_first' (truncate_encodings, as
// sentence-transformers' tokenizer call with max_length runs it): the framing tokens
// are reserved first, then a lone text's ids are cut to what is left; of a pair, only
// the longer while the shorter fits in half, else each to half (the longer, or on a tie
// the second, taking the odd id). True when anything was cut.
bool truncate_ids(std::vector<int32_t>& a, std::vector<int32_t>* b, int64_t max_length, int64_t number)
{
    const int64_t specials = b ? 3 : 2;
    if (max_length < specials)
        throw InputError("text " + std::to_string(number) + ": the tokenizer's max length " +
                         std::to_string(max_length) + " leaves no room for a sentence pair's " +
                         std::to_string(specials) + " framing tokens");
    const auto budget = static_cast<size_t>(max_length - specials);
    if (!b) {
        if (a.size() <= budget)
            return false;
        a.resize(budget);
        return true;
    }
    size_t n1 = a.size(), n2 = b->size();
    if (n1 + n2 <= budget)
        return false;
    const bool swap = n1 > n2; // n1: the shorter
    if (swap)
        std::swap(n1, n2);
    n2 = n1 > budget ? n1 : std::max(n1, budget - n1);
    if (n1 + n2 > budget) {
        n1 = budget / 2;
        n2 = n1 + budget % 2;
    }
    if (swap)
        std::swap(n1, n2);
    a.resize(std::min(a.size(), n1));
    b->resize(std::min(b->size(), n2));
    return true;
}

} // namespace

EncoderBatch frame_texts(const Tokenizer& tokenizer, const ModelConfig& config,
                         const std::vector<std::string>& texts, const std::vector<std::string>* pairs,
                         int64_t first_number)
{
    if (pairs && pairs->size() != texts.size())
        throw InputError("sentence pairs: " + std::to_string(texts.size()) + " first sentences but " +
                         std::to_string(pairs->size()) + " second ones");
    const bool encoder = config.is_encoder();
    if (pairs && !encoder)
        throw InputError(config.type_name() + " is a decoder: sentence pairs are an encoder's input");
    std::vector<std::vector<int32_t>> ids(texts.size()), types(texts.size());
    int32_t cls = 0, sep = 0, pad = 0;
    if (encoder) {
        cls = required_token(tokenizer.cls_id(), "[CLS]");
        sep = required_token(tokenizer.sep_id(), "[SEP]");
        pad = tokenizer.pad_id().value_or(0);
    }
    const int64_t limit = config.max_positions > 0 ? config.max_positions : INT64_MAX;
    const int64_t max_length = encoder ? wordpiece_max_length(tokenizer).value_or(0) : 0; // 0: no limit
    int64_t truncated = 0;
    size_t longest = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
        auto& row = ids[i];
        auto& segment = types[i];
        auto a = tokenizer.encode(texts[i]);
        std::vector<int32_t> b;
        if (pairs)
            b = tokenizer.encode((*pairs)[i]);
        if (max_length > 0)
            truncated +=
                truncate_ids(a, pairs ? &b : nullptr, max_length, first_number + static_cast<int64_t>(i));
        if (!encoder) {
            if (a.empty())
                throw InputError("text " + std::to_string(first_number + static_cast<int64_t>(i)) +
                                 " has no tokens (empty text)");
            row = a;
        } else {
            row.push_back(cls);
            row.insert(row.end(), a.begin(), a.end());
            row.push_back(sep);
            if (pairs) {
                row.insert(row.end(), b.begin(), b.end());
                row.push_back(sep);
            }
        }
        segment.assign(row.size(), 0);
        if (pairs && config.type_vocab_size > 1) // distilbert: no segment rows, its tokenizer gives none
            std::fill(segment.begin() + static_cast<std::ptrdiff_t>(a.size() + 2), segment.end(), 1);
        if (static_cast<int64_t>(row.size()) > limit)
            throw InputError("text " + std::to_string(first_number + static_cast<int64_t>(i)) + " is " +
                             std::to_string(row.size()) + " tokens long; " + config.type_name() +
                             " reads at most " + std::to_string(limit) + " positions");
        longest = std::max(longest, row.size());
    }
    const auto B = static_cast<int64_t>(texts.size()), T = static_cast<int64_t>(longest);
    EncoderBatch batch{torch::full({B, T}, static_cast<int64_t>(pad), torch::kLong),
                       torch::zeros({B, T}, torch::kLong), torch::zeros({B, T}, torch::kLong), truncated};
    auto id = batch.ids.accessor<int64_t, 2>();
    auto ty = batch.token_types.accessor<int64_t, 2>();
    auto mask = batch.attention_mask.accessor<int64_t, 2>();
    for (int64_t b = 0; b < B; ++b)
        for (size_t t = 0; t < ids[static_cast<size_t>(b)].size(); ++t) {
            id[b][static_cast<int64_t>(t)] = ids[static_cast<size_t>(b)][t];
            ty[b][static_cast<int64_t>(t)] = types[static_cast<size_t>(b)][t];
            mask[b][static_cast<int64_t>(t)] = 1;
        }
    return batch;
}

torch::Tensor pool_hidden(const torch::Tensor& hidden, const torch::Tensor& attention_mask, Pooling pooling)
{
    if (pooling == Pooling::Cls)
        return hidden.select(1, 0);
    const auto mask = attention_mask.to(torch::kFloat32).unsqueeze(-1); // [B, T, 1]
    if (pooling == Pooling::Max) // sentence-transformers: padding set to -1e9 first
        return hidden.masked_fill(mask.eq(0), -1e9).amax(1);
    return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9);
}

torch::Tensor batch_hidden_states(const LanguageModel& model, const EncoderBatch& batch)
{
    if (model.config().is_encoder())
        return model.encoder_hidden_states(batch.ids, batch.token_types, batch.attention_mask);
    return model.hidden_states(batch.ids); // causal: padding after the tokens is never read
}

Embeddings embed_texts(const LanguageModel& model, const Tokenizer& tokenizer,
                       const std::vector<std::string>& texts, const EmbedOptions& options,
                       const ProgressFn& progress)
{
    if (texts.empty())
        throw InputError("no texts to embed");
    if (options.batch_size < 1)
        throw InputError("batch size must be at least 1");
    Embeddings out;
    out.pooling = options.pooling.value_or(default_pooling(model.config()));
    out.normalized = options.normalize || (!options.pooling && model.config().normalize_embeddings);
    std::vector<torch::Tensor> parts;
    const auto n = static_cast<int64_t>(texts.size());
    for (int64_t start = 0; start < n; start += options.batch_size) {
        report_progress(progress, start, n);
        const int64_t count = std::min(options.batch_size, n - start);
        const std::vector<std::string> chunk(texts.begin() + start, texts.begin() + start + count);
        const auto batch = frame_texts(tokenizer, model.config(), chunk, nullptr, start + 1);
        out.truncated += batch.truncated;
        c10::InferenceMode guard;
        auto pooled = pool_hidden(batch_hidden_states(model, batch), batch.attention_mask, out.pooling);
        if (out.normalized) // sentence-transformers' Normalize: x / max(|x|, 1e-12)
            pooled = pooled / pooled.norm(2, -1, true).clamp_min(1e-12);
        require_finite_rows(pooled, start + 1, "the model", "a non-finite embedding of text",
                            "no embedding is reported");
        parts.push_back(pooled);
    }
    report_progress(progress, n, n);
    out.values = torch::cat(parts, 0);
    return out;
}

} // namespace embedlab
