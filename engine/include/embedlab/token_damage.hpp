// Which tokens suffer from a compressed table: per vocabulary token, how well its
// row was rebuilt and how far the model's predictions moved where it appears, with
// a summary by frequency bucket (rare against common, the LLE method's promise).
//
//   auto d = embedlab::evaluate_divergence(*compressed.model, *original.model, ids, {.ctx = 128});
//   auto damage = embedlab::token_damage(*compressed.model, *original.model, d.positions);
//   write_file_atomic("tokens.csv", embedlab::token_damage_csv(damage, original.tokenizer.get()));
//
// Frequency: how often a token is a scored target of the evaluation text. Buckets are
// log2-spaced counts, 0 | 1 | 2-3 | 4-7 | 8-15 | ..., so rare and common tokens fall
// in different buckets whatever the text's length.
// Thread safety: reentrant (the models' lookups are const).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/eval.hpp"
#include "embedlab/tokenizer.hpp"

namespace embedlab {

struct TokenDamageBucket {
    int64_t min_count = 0, max_count = 0; // target counts in the bucket, inclusive
    int64_t tokens = 0;                   // vocabulary tokens in it
    int64_t positions = 0;                // scored positions whose target is in it
    double mean_cosine = 0;               // over its tokens
    double kl_as_target = 0;              // mean KL over positions whose target is in it (NaN: none)
    double kl_as_input = 0;               // mean KL over positions whose last input is in it (NaN: none)
    double top1_as_target = 0;            // top-1 agreement over the target positions (NaN: none)
    std::string label() const;            // "0", "1", "2-3", ...
};

struct TokenDamage {
    // Per token id (vocabulary size each).
    std::vector<double> cosine;        // compressed row . original row / norms, float64 (1 when both are 0)
    std::vector<int64_t> target_count; // times the id is a scored target
    std::vector<double> kl_as_target;  // mean KL at those positions (NaN when never a target)
    std::vector<int64_t> input_count;  // times the id is the last input of a scored position
    std::vector<double> kl_as_input;   // mean KL at those positions: where its own row was read last
    std::vector<int32_t> bucket;       // index into buckets
    std::vector<TokenDamageBucket> buckets;
};

// The bucket of a target count: 0 for 0, else 1 + floor(log2(count)).
int32_t frequency_bucket(int64_t count);

// InputError when the models' vocabularies or the positions' ids disagree.
TokenDamage token_damage(const LanguageModel& model, const LanguageModel& reference,
                         const ScoredPositions& positions);

// [{bucket, min_count, max_count, tokens, positions, mean_cosine, kl_as_target, kl_as_input,
// top1_as_target}, ...]: eval --reference's damage_by_frequency.
nlohmann::ordered_json token_damage_buckets_json(const TokenDamage& damage);

// One header line and one line per token id:
// id,piece,bucket,target_count,cosine,kl_as_target,input_count,kl_as_input
// (piece: the token's text by `tokenizer`, CSV-quoted, empty without one; bucket: the index,
// counts 2^(b-1) .. 2^b - 1; an empty KL where the token never appears).
std::string token_damage_csv(const TokenDamage& damage, const Tokenizer* tokenizer);

} // namespace embedlab
