// Choosing the tokenizer file of a Hugging Face style model directory.
#include "embedlab/error.hpp"
#include "embedlab/tokenizer.hpp"
#include "embedlab/wordpiece.hpp"
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
    // Every candidate file that exists but is no regular file (a FIFO, a directory)
    // is named as such, not passed over as if absent.
    for (const char* name : {"tokenizer.json", "vocab.json", "merges.txt", "vocab.txt", "tokenizer.model"}) {
        const auto status = fs::status(dir / name, ec);
        if (fs::exists(status) && !fs::is_regular_file(status))
            throw InputError(
                tokenizer_impl::file_message(dir / name, std::string("is not a regular file (") +
                                                             (fs::is_directory(status) ? "a directory"
                                                              : fs::is_fifo(status)    ? "a FIFO"
                                                                                       : "a special file") +
                                                             "); a tokenizer file must be one"));
    }
    if (fs::is_regular_file(tokenizer_json, ec)) {
        // Unreadable or not JSON: refused, never skipped for another file.
        const auto json = tokenizer_impl::read_json_file(tokenizer_json);
        // WordPiece (BERT) has its own loader, whose errors are final.
        if (json.is_object() && json.contains("model") && json.at("model").is_object() &&
            json.at("model").value("type", "") == "WordPiece")
            return load_wordpiece_tokenizer_json(json, tokenizer_json);
        try {
            auto spec = tokenizer_impl::parse_hf_tokenizer_json(json, tokenizer_json);
            return tokenizer_impl::make_byte_level_bpe(std::move(spec));
        } catch (const InputError& e) {
            tokenizer_json_problem = e.what();
        }
    }

    const fs::path vocab_json = dir / "vocab.json";
    const fs::path merges_txt = dir / "merges.txt";
    const fs::path model_file = dir / "tokenizer.model";
    const bool gpt2_files = fs::is_regular_file(vocab_json, ec) && fs::is_regular_file(merges_txt, ec);
    // Hugging Face reads tokenizer.json first: one it cannot be read as is not
    // silently replaced by vocab.json + merges.txt (they may disagree with it). A
    // Llama-style tokenizer.json defers to its tokenizer.model, as before.
    if (!tokenizer_json_problem.empty() && gpt2_files && !fs::is_regular_file(model_file, ec))
        throw InputError(tokenizer_json_problem +
                         " (vocab.json and merges.txt beside it are not used instead: Hugging Face reads "
                         "tokenizer.json first; fix or remove it)");
    if (gpt2_files)
        return load_gpt2_bpe(vocab_json, merges_txt);

    // vocab.txt: a BERT-style WordPiece vocabulary (BertTokenizer's own file).
    const fs::path vocab_txt = dir / "vocab.txt";
    if (fs::is_regular_file(vocab_txt, ec) && !fs::is_regular_file(model_file, ec)) {
        if (!tokenizer_json_problem.empty())
            throw InputError(tokenizer_json_problem +
                             " (vocab.txt beside it is not used instead: Hugging Face reads tokenizer.json "
                             "first; fix or remove it)");
        return load_wordpiece_vocab(vocab_txt);
    }

    if (fs::is_regular_file(model_file, ec))
        return load_sentencepiece(model_file);

    if (!tokenizer_json_problem.empty())
        throw InputError(tokenizer_json_problem);
    throw InputError(tokenizer_impl::file_message(
        dir, "no tokenizer found (looked for tokenizer.json, vocab.json + merges.txt, vocab.txt, "
             "tokenizer.model)"));
}

} // namespace embedlab
