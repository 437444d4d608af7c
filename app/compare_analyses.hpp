// The Compare tab's engine work (no libtorch, no Qt in this header): a results
// row's compressed model beside its original, generating from one prompt, reading
// one text, or (an encoder) embedding its sentences. Runs on the engine thread;
// tokens go to a callback as they come.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "embedlab/error.hpp"
#include "embedlab/experiment_request.hpp"

namespace embedlab::app {

struct ComparedToken {
    int32_t id = 0;
    std::string text;                                     // what the token adds to the text
    std::string piece;                                    // its vocabulary text
    double kl = std::numeric_limits<double>::quiet_NaN(); // KL(P_original || P_compressed), nats
    struct Alternative {
        std::string piece;
        double probability = 0;
    };
    // The model's own top-N where it chose this token, and the original's there
    // (empty in the original's column: nothing is compared there).
    std::vector<Alternative> top, original_top;
};

struct CompareGenerationOptions {
    std::string prompt;
    int64_t max_tokens = 48;
    double temperature = 0; // 0: greedy
    uint64_t seed = 0;
};

enum class CompareColumn { Original, Compressed };
// Called on an engine thread (the two columns on two threads): pass the token on, do not draw.
using ComparedTokenFn = std::function<void(CompareColumn column, const ComparedToken& token)>;

// Continues the prompt (BOS first where the tokenizer has one, as generate does)
// with the compressed model of `run` (a results row's request, run locally) and,
// at the same time on a second thread, with its original, same options and seed.
// The compressed model's tokens carry the KL to the original at each step. The run
// in memory is used when the workbench still keeps it, else it is fitted again
// (seeded: the same model). Cancelled (both stopped) when progress returns false.
struct CompareGenerationSummary {
    int64_t original_tokens = 0, compressed_tokens = 0;
    double mean_kl = 0;            // over the compressed model's tokens
    int64_t first_difference = -1; // the first generated token where the two differ (-1: none)
};
CompareGenerationSummary compare_generate(const CompressionRequest& run,
                                          const CompareGenerationOptions& options,
                                          const ComparedTokenFn& on_token, const ProgressFn& progress);

// Every token of `text` (its first max_tokens, no BOS, as perplexity reads it) with
// the KL of the prediction that reads it (NaN for the first token) and both top-5,
// and the worst positions, largest KL first.
struct ComparedText {
    std::vector<ComparedToken> tokens;
    std::vector<int64_t> worst;
    int64_t total_tokens = 0; // in the whole text
    double mean_kl = 0;       // over the predicted tokens
};
ComparedText compare_text(const CompressionRequest& run, const std::string& text, const ProgressFn& progress,
                          int64_t max_tokens = 4096, int64_t worst = 20);

// An encoder's run (it cannot generate): the sentences of `text` (split at line ends and
// after '.', '!' or '?' followed by a space) embedded by the original and the compressed
// model (encoder.hpp's embed_texts, the model's own pooling, as `embedlab-cli embed`),
// each sentence's cosine between its two embeddings, and its `k` nearest other sentences
// by cosine under each model, nearest first.
struct ComparedSentence {
    std::string text;
    double cosine = 0; // cos(original embedding, compressed embedding)
    std::vector<int64_t> neighbours_original, neighbours_compressed;
    std::vector<double> similarity_original, similarity_compressed; // their cosines
};
struct ComparedEmbeddings {
    std::vector<ComparedSentence> sentences;
    std::string pooling;            // "cls", "mean" or "max"
    double mean_cosine = 0;         // over sentences
    double neighbour_agreement = 0; // retrieval_agreement at k (tasks.hpp): 1, the same neighbours
    int64_t k = 0;
};
// InputError for fewer than 2 sentences (nothing to be a neighbour).
ComparedEmbeddings compare_embeddings(const CompressionRequest& run, const std::string& text,
                                      const ProgressFn& progress, int64_t k = 3);
// The sentences compare_embeddings reads, trimmed, empty ones dropped.
std::vector<std::string> split_sentences(const std::string& text);

} // namespace embedlab::app
