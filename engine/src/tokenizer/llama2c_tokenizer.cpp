// llama2.c tokenizer.bin: int32 max_token_length, then per token
// {float32 score, int32 length, length bytes}, little-endian.
#include <cstring>

#include "embedlab/error.hpp"
#include "embedlab/tokenizer.hpp"
#include "tokenizer/text_util.hpp"

namespace embedlab {
namespace {

using tokenizer_impl::file_message;

// Reads fixed-size fields, refusing to run past the end of the file.
class Reader {
public:
    Reader(const std::string& bytes, const std::filesystem::path& file) : bytes_(bytes), file_(file) {}

    template <typename T> T read(const char* what)
    {
        need(sizeof(T), what);
        T value;
        std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return value;
    }

    std::string read_bytes(size_t n, const char* what)
    {
        need(n, what);
        std::string out = bytes_.substr(pos_, n);
        pos_ += n;
        return out;
    }

    size_t remaining() const { return bytes_.size() - pos_; }

private:
    void need(size_t n, const char* what) const
    {
        if (n > remaining())
            throw InputError(file_message(file_, std::string("truncated: the file ends inside ") + what +
                                                     " at byte " + std::to_string(pos_)));
    }

    const std::string& bytes_;
    const std::filesystem::path& file_;
    size_t pos_ = 0;
};

} // namespace

std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::filesystem::path& tokenizer_bin,
                                                  int64_t vocab_size)
{
    if (vocab_size <= 0 || vocab_size > INT32_MAX)
        throw InputError(file_message(tokenizer_bin, "invalid vocabulary size " + std::to_string(vocab_size) +
                                                         " (from the checkpoint header)"));
    const std::string bytes = tokenizer_impl::read_file_bytes(tokenizer_bin);
    // Every token takes at least 8 bytes, so a size the file cannot hold is
    // refused before allocating for it.
    if (static_cast<uint64_t>(vocab_size) > bytes.size() / 8)
        throw InputError(file_message(tokenizer_bin, "too small (" + std::to_string(bytes.size()) +
                                                         " bytes) for " + std::to_string(vocab_size) +
                                                         " tokens: truncated, or the wrong tokenizer "
                                                         "for this checkpoint"));

    Reader reader(bytes, tokenizer_bin);
    const auto max_token_length = reader.read<int32_t>("the header");
    if (max_token_length <= 0)
        throw InputError(
            file_message(tokenizer_bin, "invalid max_token_length " + std::to_string(max_token_length)));

    ScoredVocab vocab;
    vocab.tokens.reserve(static_cast<size_t>(vocab_size));
    vocab.scores.reserve(static_cast<size_t>(vocab_size));
    for (int64_t i = 0; i < vocab_size; ++i) {
        const auto score = reader.read<float>("a token score");
        const auto length = reader.read<int32_t>("a token length");
        if (length < 0 || static_cast<size_t>(length) > reader.remaining())
            throw InputError(file_message(tokenizer_bin, "token " + std::to_string(i) + " claims " +
                                                             std::to_string(length) + " bytes but " +
                                                             std::to_string(reader.remaining()) +
                                                             " remain: the file is truncated or corrupt"));
        vocab.scores.push_back(score);
        vocab.tokens.push_back(reader.read_bytes(static_cast<size_t>(length), "a token"));
    }
    // run.c's fixed ids.
    vocab.unk_id = 0;
    vocab.bos_id = vocab_size > 1 ? 1 : -1;
    vocab.eos_id = vocab_size > 2 ? 2 : -1;
    vocab.add_dummy_prefix = true;
    return make_scored_vocab_tokenizer(std::move(vocab), "llama2c", tokenizer_bin.string());
}

} // namespace embedlab
