// The Fourier token map (METHODS.md 4) of a range of ids: the features T, and for a
// fitted fourier model MLP(T) and E = T + MLP(T) (normed with RMSNorm), the original
// rows, and the cosine of each pair of neighbouring ids (p, p+1) in each. What
// `embedlab-cli fourier-map` prints and the workbench's token-map view draws.
//
//   auto lm = embedlab::load_model("out/tinygpt2-fourier", {.need_tokenizer = false});
//   auto map = embedlab::fourier_token_map(lm, "out/tinygpt2-fourier", "", 0, 256);
//   map.embedding;                        // E [256, d]; undefined without a fourier model
//   embedlab::neighbour_cosines(map.features);
//
// Thread safety: reentrant; reads the model only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "embedlab/fourier_embedding.hpp"
#include "embedlab/model.hpp"

namespace embedlab {

struct FourierTokenMap {
    int64_t vocab = 0, dim = 0, first = 0, end = 0;
    std::vector<double> x;           // the normalised ids 2p/(V-1) - 1
    std::vector<std::string> tokens; // the ids' texts (empty without a tokenizer)
    torch::Tensor features;          // T [end - first, d]
    // The fitted model, its MLP(T) and E (all empty without one), and where it came from.
    std::shared_ptr<const FourierTokenEmbedding> fourier;
    torch::Tensor mlp, embedding;
    std::string fourier_from;
    // The original rows (undefined when not found, with original_note saying why),
    // from the dense model or the fourier directory's recorded source.
    torch::Tensor original;
    std::string original_from, original_note;
    std::vector<double> cosine_to_original; // E against the original, per id (both present)
};

// `model` was loaded from `path`: a dense model (then `fourier_dir`, if given, is a
// --method fourier directory of the same V and d) or a fourier directory (its source
// in embedlab.json gives the original rows). Ids [first, end), 0 <= first < end <= V.
// InputError naming the file for anything else.
FourierTokenMap fourier_token_map(const LoadedModel& model, const std::string& path,
                                  const std::string& fourier_dir, int64_t first, int64_t end);

// Cosine of rows i and i+1 ([n, d] -> n - 1 values); a zero row against a zero row counts 1.
std::vector<double> neighbour_cosines(const torch::Tensor& rows);

} // namespace embedlab
