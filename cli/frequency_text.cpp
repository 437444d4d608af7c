#include "frequency_text.hpp"

#include <algorithm>

#include "embedlab/eval.hpp"

namespace embedlab::cli {

std::vector<int64_t> special_ids(const Tokenizer& tokenizer)
{
    std::vector<int64_t> out;
    for (int64_t id = 0; id < tokenizer.vocab_size(); ++id)
        if (tokenizer.is_special(static_cast<int32_t>(id)))
            out.push_back(id);
    return out;
}

FrequencyText FrequencyText::from_args(const Args& args, const Tokenizer& tokenizer, int64_t vocab_size,
                                       double keep_ratio)
{
    const auto file = args.get("--freq-text");
    if (!file)
        throw InputError("the lle methods need --freq-text FILE (token frequencies decide common vs rare)");
    FrequencyText f;
    f.path = *file;
    const auto ids = tokenizer.encode(read_text_file(f.path));
    if (ids.empty())
        throw InputError(f.path.string() + ": the frequency text has no tokens");
    f.sha256 = sha256_file(f.path);
    // A text in another script than the vocabulary tokenizes to unknown tokens.
    if (const auto unk = tokenizer.unk_id()) {
        const auto unknown = std::count(ids.begin(), ids.end(), *unk);
        if (2 * unknown > static_cast<int64_t>(ids.size()))
            throw InputError(f.path.string() + ": " + std::to_string(unknown) + " of its " +
                             std::to_string(ids.size()) +
                             " tokens are the unknown token; is the text in the vocabulary's script?");
    }
    if (keep_ratio < 0)
        keep_ratio = args.get_double("--keep-ratio", 1.0, 0, 1);
    try {
        f.split = std::make_shared<FrequencySplit>(
            split_by_frequency(ids, vocab_size, keep_ratio, special_ids(tokenizer)));
    } catch (const InputError& e) {
        throw InputError(f.path.string() + ": " + e.what());
    }
    return f;
}

Json FrequencyText::json() const
{
    return {{"path", std::filesystem::absolute(path).lexically_normal().string()},
            {"sha256", sha256},
            {"tokens", split->total_tokens},
            {"distinct_seen", split->distinct_seen},
            {"keep_ratio", split->keep_ratio},
            {"common", split->common.size()},
            {"rare", split->rare.size()}};
}

} // namespace embedlab::cli
