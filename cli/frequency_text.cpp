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

KnnFlags knn_flags(const Args& args, const std::string& command)
{
    KnnFlags f;
    f.knn = args.get("--knn").value_or("exact");
    if (f.knn != "exact" && f.knn != "ivf")
        throw InputError(command + ": --knn must be exact or ivf, got '" + f.knn + "'");
    for (const char* o : {"--nlist", "--nprobe"})
        if (args.has(o) && f.knn != "ivf")
            throw InputError(command + ": " + o + " applies to --knn ivf");
    constexpr int64_t most = int64_t{1} << 31;
    f.nlist = args.has("--nlist") ? args.get_int("--nlist", 0, 1, most) : 0;
    f.nprobe = args.has("--nprobe") ? args.get_int("--nprobe", 0, 1, most) : 0;
    if (f.nlist > 0 && f.nprobe > f.nlist)
        throw InputError(command + ": --nprobe " + std::to_string(f.nprobe) + " is outside 1..--nlist " +
                         std::to_string(f.nlist) + " (lists searched per rare row)");
    return f;
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
