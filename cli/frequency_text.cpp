#include "frequency_text.hpp"

#include <algorithm>

#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"

namespace embedlab::cli {

FrequencyText FrequencyText::from_args(const Args& args, const Tokenizer& tokenizer, int64_t vocab_size,
                                       double keep_ratio)
{
    const auto file = args.get("--freq-text");
    if (!file)
        throw InputError("the lle methods need --freq-text FILE (token frequencies decide common vs rare)");
    if (keep_ratio < 0)
        keep_ratio = args.get_double("--keep-ratio", 1.0, 0, 1);
    auto f = read_frequency_text(*file, tokenizer, vocab_size, keep_ratio); // experiment.hpp
    return {f.path, f.sha256, f.split};
}

Json FrequencyText::json() const
{
    return embedlab::FrequencyText{path, sha256, split}.json();
}

} // namespace embedlab::cli
