// PETE's MLP choice and its sizes (METHODS 4), free of libtorch so the manifest
// reader's checks (and their fuzzer) can use them. The embedding itself is in
// fourier_embedding.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace embedlab {

enum class FourierMlp { Linear, GeGLU };
const char* fourier_mlp_name(FourierMlp mlp); // "linear", "geglu"
// "linear" or "geglu"; InputError otherwise.
FourierMlp parse_fourier_mlp(const std::string& name);
// A Fourier table as `train --embedding` names it: "fourier" (linear) or "fourier:<mlp>";
// nullopt for any other name.
std::optional<FourierMlp> parse_fourier_embedding(const std::string& name);
std::string fourier_embedding_name(FourierMlp mlp); // "fourier:geglu"
// The geglu hidden size for a ratio: max(1, round(ratio d)).
int64_t fourier_hidden_size(int64_t dim, double hidden_ratio);
// The largest hidden_ratio the CLI accepts and a manifest may record.
constexpr double kMaxFourierHiddenRatio = 64;

} // namespace embedlab
