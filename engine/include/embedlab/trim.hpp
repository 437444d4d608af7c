// Vocabulary trimming (issue 60): a Hugging Face model directory cut to the tokens a
// domain uses, written as a plain model directory every tool that reads the original
// reads.
//
//   embedlab::TrimOptions o;
//   o.freq_text = "domain.txt";
//   o.coverage = 0.999;                 // or o.keep = 8000
//   o.eval_text = "heldout.txt";        // optional: the honest evaluation below
//   auto report = embedlab::trim_model("models/tinygpt2-f16", "out/trimmed", o, progress);
//   // report.kept (old ids, ascending), report.record (what out/trimmed/trim.json holds)
//
// The kept set: the budget's most frequent ids of the frequency text (as the model's
// tokenizer encodes it; ties by the smaller id), always the required tokens (special
// tokens, the ids config.json names, the tokens needed to encode any text: byte-level
// BPE's 256 byte tokens, WordPiece's unk and single characters plain and "##",
// SentencePiece's byte pieces, unk and control pieces) and the user's list, and
// every token a kept token is merged from (byte-level BPE: the parts of each merge
// that makes it; SentencePiece BPE: both halves of each split into two pieces), so
// the merges that build a kept token stay. Budgets:
// - keep N: the size of the kept set. The most frequent ids are taken in order, each
//   with its parts, while the set stays within N; it is the required tokens plus a
//   prefix of the frequency order (plus parts), N at most.
// - coverage C: the shortest prefix of the frequency order whose occurrences cover at
//   least C of the text's token occurrences, plus the required tokens and parts.
//
// Output: the weights' per-token tensors (the embedding, an untied output head, a
// masked-LM bias: every tensor whose first dimension is the vocabulary size, position
// tables excepted) cut to the kept rows at their stored dtype, every other tensor as
// stored, config.json with the new vocab_size and renumbered token ids, the tokenizer
// rewritten in the files the input had (ids renumbered 0..K-1 in the old order; BPE
// merges whose result or either part was dropped are removed), the other files
// copied, and trim.json (the record). The output distribution is over the kept
// tokens only: logits of the trimmed model are the original's at the kept ids.
//
// Guarantees: a text whose original tokens are all kept encodes into the same tokens
// (ids renumbered). A text with dropped tokens still encodes, into kept pieces: the
// words (pre-tokens) that held a dropped token are split into smaller kept tokens
// (byte-level BPE down to its byte tokens at worst; SentencePiece down to characters
// or byte pieces) and decode to the same text; WordPiece splits such a word into
// shorter kept pieces, down to single characters, and gives [UNK] only for a word
// with a character that has no single-character piece in its position. Other words
// are unchanged.
//
// Refused before any work, naming the field: both or neither budget, coverage outside
// (0, 1], keep below the required tokens or above the vocabulary, a frequency text
// that tokenizes to nothing, a tokenizer family other than the three above, a model
// that is not a Hugging Face directory with safetensors weights.
//
// Thread safety: reentrant; the progress callback runs on the calling thread and may
// cancel (Cancelled); an interrupted or refused run leaves no output directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"

namespace embedlab {

struct TrimOptions {
    std::filesystem::path freq_text; // the domain corpus whose token counts decide
    std::optional<int64_t> keep;     // the kept set's size
    std::optional<double> coverage;  // in (0, 1]
    // Optional: tokens always kept, one per line as the vocabulary spells them
    // (byte-level BPE's "Ġthe", WordPiece's "##ing", SentencePiece's "▁the").
    std::filesystem::path keep_tokens;
    // Optional: a held-out text for the record's evaluation (decoders: perplexity and
    // bits per byte of both models, the probability mass on dropped tokens; every
    // model: the share of the text's tokens that changed).
    std::filesystem::path eval_text;
    int64_t ctx = 0; // evaluation window; 0: min(128, the model's context)
    bool overwrite = false;
};

struct TrimReport {
    std::filesystem::path out;
    std::string family;            // "byte-level BPE", "WordPiece", "SentencePiece BPE"
    int64_t vocab_before = 0;      // the model's vocabulary size
    std::vector<int32_t> kept;     // old ids, ascending; new id = index
    int64_t required = 0;          // kept whatever the budget (with their parts)
    nlohmann::ordered_json record; // trim.json
};

// Checks `options` alone (the budgets' ranges, the files named); InputError naming
// the field. trim_model calls it first.
void check_trim_options(const TrimOptions& options);

TrimReport trim_model(const std::filesystem::path& model, const std::filesystem::path& out,
                      const TrimOptions& options, const ProgressFn& progress = {});

} // namespace embedlab
