// Choosing the tokenizer file of a Hugging Face style model directory.
#include "embedlab/error.hpp"
#include "embedlab/tokenizer.hpp"
#include "tokenizer/gpt2_loaders.hpp"
#include "tokenizer/text_util.hpp"

namespace embedlab {

std::unique_ptr<Tokenizer> load_tokenizer_from_directory(const std::filesystem::path& dir)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw InputError(tokenizer_impl::file_message(dir, "not a directory"));

    // tokenizer.json is preferred when it is a byte-level BPE we reproduce; a
    // Llama-style tokenizer.json (byte-fallback BPE) defers to tokenizer.model.
    const fs::path tokenizer_json = dir / "tokenizer.json";
    std::string tokenizer_json_problem;
    if (fs::is_regular_file(tokenizer_json, ec)) {
        // Unreadable or not JSON: refused, never skipped for another file.
        const auto json = tokenizer_impl::read_json_file(tokenizer_json);
        try {
            auto spec = tokenizer_impl::parse_hf_tokenizer_json(json, tokenizer_json);
            return tokenizer_impl::make_byte_level_bpe(std::move(spec));
        } catch (const InputError& e) {
            tokenizer_json_problem = e.what();
        }
    }

    const fs::path vocab_json = dir / "vocab.json";
    const fs::path merges_txt = dir / "merges.txt";
    if (fs::is_regular_file(vocab_json, ec) && fs::is_regular_file(merges_txt, ec))
        return load_gpt2_bpe(vocab_json, merges_txt);

    const fs::path model_file = dir / "tokenizer.model";
    if (fs::is_regular_file(model_file, ec))
        return load_sentencepiece(model_file);

    if (!tokenizer_json_problem.empty())
        throw InputError(tokenizer_json_problem);
    throw InputError(tokenizer_impl::file_message(
        dir, "no tokenizer found (looked for tokenizer.json, vocab.json + merges.txt, "
             "tokenizer.model)"));
}

} // namespace embedlab
