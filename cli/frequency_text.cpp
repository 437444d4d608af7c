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

void warn_if_frequency_text_is_evaluated(const Args& args)
{
    namespace fs = std::filesystem;
    const auto freq = args.get("--freq-text"), eval = args.get("--eval-text");
    std::error_code ec;
    if (freq && eval && fs::equivalent(*freq, *eval, ec) && !ec)
        print_warnings(
            {"--freq-text is also the --eval-text: tokens rare in it are rare in what is evaluated, "
             "so the rebuilt rows are hardly measured; evaluate on another text"});
}

} // namespace embedlab::cli
