// The refusal of a model that computes NaN or infinity (issue 57 item 3): every
// evaluation that reports a number (perplexity, divergence, generation, embeddings,
// tasks, masked-LM scoring) checks the model's values are finite and throws
// NonFiniteError, with the likely cause, instead of reporting NaN.
//
//   try { auto r = embedlab::evaluate_task(model, tokenizer, data); }
//   catch (const embedlab::NonFiniteError& e) { /* the model overflows, not the input */ }
//
// Thread safety: plain functions, no shared state.
#pragma once

#include <cstdint>
#include <string>

#include "embedlab/error.hpp"

namespace at {
class Tensor;
}

namespace embedlab {

// An InputError (the CLI's exit 2) about the model itself, not the data it was given:
// its forward pass gave NaN or infinity.
class NonFiniteError : public InputError {
public:
    using InputError::InputError;
};

// Throws NonFiniteError: "<who>'s forward pass gave <gave>: its weights or config values
// (...) overflow; <refusal> for a model that computes NaN or infinity".
// who: "the model", "the reference model"; gave: "a non-finite loss (NLL per token nan)";
// refusal: "perplexity is not reported".
[[noreturn]] void throw_non_finite(const std::string& who, const std::string& gave,
                                   const std::string& refusal);

// True when every value of `values` is finite (no NaN, no infinity).
bool all_finite(const at::Tensor& values);

// Throws NonFiniteError unless all_finite(values); `gave` names the values ("non-finite
// logits for generated token 3"), the first bad value is added in parentheses.
void require_finite(const at::Tensor& values, const std::string& who, const std::string& gave,
                    const std::string& refusal);

// The same for one number.
void require_finite(double value, const std::string& who, const std::string& gave,
                    const std::string& refusal);

// require_finite for rows [N, ...] numbered first_number.. (texts, examples): `gave`
// is completed with the first bad row's number ("a non-finite embedding of text" -> "...
// of text 7").
void require_finite_rows(const at::Tensor& rows, int64_t first_number, const std::string& who,
                         const std::string& gave, const std::string& refusal);

} // namespace embedlab
