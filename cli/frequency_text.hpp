// The frequency text of the lle methods: tokenized with the model's tokenizer,
// split into common and rare tokens, and recorded with its sha256 (METHODS 2).
#pragma once

#include <filesystem>
#include <memory>

#include "common.hpp"
#include "embedlab/partial_sparse.hpp"

namespace embedlab::cli {

// lle: a warning on stderr when --freq-text is also --eval-text (tokens rare in
// it are rare in what is evaluated, so the rebuilt rows are hardly measured).
void warn_if_frequency_text_is_evaluated(const Args& args);

// lle: --knn exact|ivf [--nlist N] [--nprobe P], the neighbour search
// (partial_sparse.hpp; 0: automatic). InputError "<command>: --nlist ..." for an
// unknown kind, a value below 1, or --nlist/--nprobe without --knn ivf; the
// engine checks nlist <= |V_C| and nprobe <= nlist.
struct KnnFlags {
    std::string knn = "exact";
    int64_t nlist = 0, nprobe = 0;
};
KnnFlags knn_flags(const Args& args, const std::string& command);
// The names knn_flags reads, for Args' option lists.
inline const std::vector<std::string> kKnnOptions{"--knn", "--nlist", "--nprobe"};

struct FrequencyText {
    std::filesystem::path path;
    std::string sha256;
    std::shared_ptr<const FrequencySplit> split;

    // --freq-text FILE and --keep-ratio R (default 1.0 for `keep_ratio` < 0).
    static FrequencyText from_args(const Args& args, const Tokenizer& tokenizer, int64_t vocab_size,
                                   double keep_ratio = -1);
    Json json() const; // {path, sha256, tokens, distinct_seen, keep_ratio, common, rare}
};

} // namespace embedlab::cli
