// Encoder inputs and sentence embeddings: framing texts as BERT reads them,
// pooling hidden states, and one pooled embedding per text (`embedlab-cli embed`).
//
//   auto lm = embedlab::load_model("minilm-st");
//   auto batch = embedlab::frame_texts(*lm.tokenizer, lm.model->config(), {"A man", "A dog"});
//   embedlab::EmbedOptions opt;                         // the model's own pooling
//   auto e = embedlab::embed_texts(*lm.model, *lm.tokenizer, {"A man", "A dog"}, opt);
//   e.values;                                           // [2, d] float32
//
// Decoders embed too: the mean of their final hidden states over the text's ids
// (no framing tokens).
//
// Thread safety: free functions over const models and tokenizers; safe to call
// from several threads (one call at a time is fastest, see model.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "embedlab/error.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

enum class Pooling { Cls, Mean, Max };

const char* pooling_name(Pooling pooling);
// "cls", "mean", "max"; nullopt for anything else ("model" is the caller's default).
std::optional<Pooling> parse_pooling(std::string_view text);
// The model's own: its sentence-transformers pooling, else CLS for a classifier,
// else mean (decoders too).
Pooling default_pooling(const ModelConfig& config);

// Padded model inputs: ids, segment ids and attention mask, each [B, T] int64.
struct EncoderBatch {
    torch::Tensor ids, token_types, attention_mask;
    int64_t truncated = 0; // inputs cut to the tokenizer's max length (below)
};

// Encoders: [CLS] a [SEP] (with `pairs`: [CLS] a [SEP] b [SEP], segment 1 on b and
// its [SEP] when the model has segment rows; distilbert's are all 0), padded with [PAD] to the longest.
// A tokenizer with a max length (sentence-transformers' max_seq_length, wordpiece.hpp) truncates as
// sentence-transformers' tokenizer call does (truncation 'longest_first'): a text's ids are cut to
// max length - 2, a pair's to max length - 3 together (only the longer is cut while that suffices,
// else each to half, the longer taking the odd one), framing tokens added after.
// Decoders: the text's ids as they are, padded with 0 (masked). InputError naming the text's index when an
// input is longer than the model's positions, or a decoder's text has no ids (texts are numbered from
// first_number in messages).
EncoderBatch frame_texts(const Tokenizer& tokenizer, const ModelConfig& config,
                         const std::vector<std::string>& texts,
                         const std::vector<std::string>* pairs = nullptr, int64_t first_number = 1);

// hidden [B, T, d], attention_mask [B, T] -> [B, d]: position 0, the mean over
// the mask, or the elementwise max over it.
torch::Tensor pool_hidden(const torch::Tensor& hidden, const torch::Tensor& attention_mask, Pooling pooling);

// Final hidden states of a framed batch, encoder or decoder (a decoder's
// padding sits after its tokens, so causal attention never reads it).
torch::Tensor batch_hidden_states(const LanguageModel& model, const EncoderBatch& batch);

struct EmbedOptions {
    std::optional<Pooling> pooling; // nullopt: default_pooling (and the model's Normalize)
    bool normalize = false;         // L2-normalise every embedding
    int64_t batch_size = 32;        // texts per forward pass
};

struct Embeddings {
    Pooling pooling = Pooling::Mean;
    bool normalized = false;
    int64_t truncated = 0; // texts cut to the tokenizer's max length (frame_texts)
    torch::Tensor values;  // [N, d] float32
};

// One embedding per text; progress(done texts, total). InputError for an empty list.
Embeddings embed_texts(const LanguageModel& model, const Tokenizer& tokenizer,
                       const std::vector<std::string>& texts, const EmbedOptions& options,
                       const ProgressFn& progress = {});

} // namespace embedlab
