// llama.cpp's byte-level BPE and WordPiece vocabularies read from GGUF metadata
// into the same tokenizers their Hugging Face files make (byte_level_bpe.hpp,
// wordpiece_impl.hpp).
#include "tokenizer/gguf_tokenizer.hpp"

#include <algorithm>
#include <climits>
#include <optional>
#include <unordered_set>

#include "embedlab/error.hpp"
#include "io/mapped_file.hpp"
#include "tokenizer/byte_level_bpe.hpp"
#include "tokenizer/text_util.hpp"
#include "tokenizer/wordpiece_impl.hpp"

namespace embedlab::tokenizer_impl {
namespace {

using io::GgufFile;
using io::GgufType;
using io::GgufValue;

// llama.cpp's token types (llama_token_type).
constexpr int32_t control_type = 3;
constexpr int32_t user_defined_type = 4;

// A llama.cpp pre-tokenizer name and the Hugging Face pre-tokenizer it stands for,
// among those the byte-level BPE reproduces (llama-vocab.cpp's regexes at the
// commit of shared/tools/llama.cpp):
//   GPT-2's pattern alone: ByteLevel(add_prefix_space=false) in tokenizer.json;
//   \p{N} then GPT-2's pattern: Digits(individual_digits=true) then ByteLevel;
//   Llama 3's pattern, whole words in the vocabulary before merges (ignore_merges,
//   which llama.cpp sets for these names too): Meta's Split then ByteLevel;
//   Qwen2's pattern: Qwen2's Split then ByteLevel, after the NFC normalizer its
//   tokenizer.json has (llama.cpp skips it: it differs on text not in NFC).
struct BpePreTokenizer {
    const char* name;
    SplitPattern pattern = SplitPattern::gpt2;
    bool individual_digits = false;
    bool ignore_merges = false;
    bool nfc = false;
};
constexpr BpePreTokenizer bpe_pre_tokenizers[] = {
    {"gpt-2"},
    {"phi-2"},
    {"roberta-bpe"},
    {"starcoder", SplitPattern::gpt2, true},
    {"refact", SplitPattern::gpt2, true},
    {"smollm", SplitPattern::gpt2, true},
    {"llama-bpe", SplitPattern::llama3, false, true},
    {"llama3", SplitPattern::llama3, false, true},
    {"llama-v3", SplitPattern::llama3, false, true},
    {"qwen2", SplitPattern::qwen2, false, false, true},
};

// The shared typed reads (io::GgufKeys), and the tokenizer's own keys.
class Keys : public io::GgufKeys {
public:
    Keys(const GgufFile& gguf, const std::filesystem::path& file) : GgufKeys(gguf, file.string()) {}

    // A token id key; nullopt when absent, llama.cpp's "none" (-1 / 0xFFFFFFFF) or
    // outside the vocabulary (io/gguf.cpp warns about the last when it reads the model).
    std::optional<int32_t> token_id(const std::string& key, size_t vocab_size) const
    {
        const auto id = integer(key);
        if (!id || *id < 0 || static_cast<uint64_t>(*id) >= vocab_size)
            return std::nullopt;
        return static_cast<int32_t>(*id);
    }

    // tokenizer.ggml.token_type, one per token; empty when the file has none.
    std::vector<int32_t> token_types(size_t vocab_size) const
    {
        const GgufValue* types = array("tokenizer.ggml.token_type", GgufType::Int32);
        if (!types)
            return {};
        if (types->count != vocab_size)
            fail("tokenizer.ggml.token_type has " + std::to_string(types->count) +
                 " entries but tokenizer.ggml.tokens has " + std::to_string(vocab_size));
        std::vector<int32_t> out(vocab_size);
        for (uint64_t k = 0; k < types->count; ++k)
            out[k] = static_cast<int32_t>(types->element(k).i);
        return out;
    }
};

std::string known_pre_tokenizers()
{
    std::string out;
    for (const std::string& name : gguf_bpe_pre_tokenizers())
        out += (out.empty() ? "" : ", ") + name;
    return out;
}

void apply_pre_tokenizer(const Keys& keys, ByteLevelBpeSpec& spec)
{
    const auto pre = keys.string("tokenizer.ggml.pre");
    if (!pre)
        keys.fail("no tokenizer.ggml.pre: which pre-tokenizer this byte-level BPE vocabulary needs is not "
                  "recorded (llama.cpp then falls back on its 'default' one); EmbedLab reads " +
                  known_pre_tokenizers() +
                  "; pass --tokenizer DIR, the Hugging Face directory of its tokenizer");
    const auto* known = std::find_if(std::begin(bpe_pre_tokenizers), std::end(bpe_pre_tokenizers),
                                     [&](const BpePreTokenizer& p) { return *pre == p.name; });
    if (known == std::end(bpe_pre_tokenizers))
        keys.fail("tokenizer.ggml.pre is '" + printable_utf8(*pre) +
                  "', a pre-tokenizer EmbedLab does not implement (it reads " + known_pre_tokenizers() +
                  "); pass --tokenizer DIR, the Hugging Face directory of its tokenizer");
    spec.use_regex = true;
    spec.add_prefix_space = false;
    spec.pattern = known->pattern;
    spec.split_digits = spec.individual_digits = known->individual_digits;
    spec.ignore_merges = known->ignore_merges;
    spec.nfc = known->nfc;
}

// "left right" of tokenizer.ggml.merges entry `index`, both parts and their
// concatenation checked against the token list.
std::pair<std::string, std::string> read_merge(const Keys& keys, const std::string& line, size_t index,
                                               const std::unordered_set<std::string_view>& tokens)
{
    const std::string where =
        "tokenizer.ggml.merges entry " + std::to_string(index + 1) + " '" + printable_utf8(line) + "'";
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos)
        keys.fail(where + " is not two tokens separated by one space");
    std::pair<std::string, std::string> merge{line.substr(0, space), line.substr(space + 1)};
    for (const std::string& part : {merge.first, merge.second, merge.first + merge.second})
        if (!tokens.contains(part))
            keys.fail(where + " names '" + printable_utf8(part) +
                      "', which tokenizer.ggml.tokens does not list");
    return merge;
}

std::unique_ptr<Tokenizer> make_byte_level_bpe_from_gguf(const Keys& keys,
                                                         const std::vector<std::string>& tokens,
                                                         const std::filesystem::path& file)
{
    ByteLevelBpeSpec spec;
    spec.source = file;
    apply_pre_tokenizer(keys, spec);
    const std::vector<int32_t> types = keys.token_types(tokens.size());
    const GgufValue* merges = keys.array("tokenizer.ggml.merges", GgufType::String);
    if (!merges)
        keys.fail("tokenizer.ggml.model is 'gpt2' but there is no tokenizer.ggml.merges: a byte-level BPE "
                  "vocabulary cannot encode without its merges");

    // Every token is in the model's vocabulary, as Hugging Face's tokenizer.json
    // lists GPT-2's <|endoftext|> in both. llama.cpp's converter stores control (3)
    // and user-defined (4) tokens as plain text, the rest byte-level encoded; a
    // user-defined one is also entered byte-level so a merge may reach it.
    spec.vocab.reserve(tokens.size());
    for (size_t id = 0; id < tokens.size(); ++id) {
        const auto token_id = static_cast<int32_t>(id);
        const int32_t type = types.empty() ? 1 : types[id];
        spec.vocab.emplace_back(tokens[id], token_id);
        if (type == control_type || type == user_defined_type)
            spec.added_tokens.push_back({token_id, tokens[id], type == control_type});
        if (type == user_defined_type) {
            std::string byte_level;
            for (unsigned char b : tokens[id])
                append_utf8(byte_level, byte_to_code_point(b));
            if (byte_level != tokens[id])
                spec.vocab.emplace_back(std::move(byte_level), token_id);
        }
    }
    std::unordered_set<std::string_view> listed;
    listed.reserve(spec.vocab.size());
    for (const auto& [text, id] : spec.vocab)
        listed.insert(text);
    spec.merges.reserve(merges->strings.size());
    for (size_t i = 0; i < merges->strings.size(); ++i)
        spec.merges.push_back(read_merge(keys, merges->strings[i], i, listed));

    spec.bos_id = keys.token_id("tokenizer.ggml.bos_token_id", tokens.size());
    spec.eos_id = keys.token_id("tokenizer.ggml.eos_token_id", tokens.size());
    spec.unk_id = keys.token_id("tokenizer.ggml.unknown_token_id", tokens.size());
    return make_byte_level_bpe(std::move(spec));
}

// llama.cpp's BERT form (wordpiece_vocab_from_gguf_tokens), its special tokens named
// by their ids: [CLS] is bos unless cls_token_id says, [SEP] eos unless
// seperator_token_id (llama.cpp's spelling) says.
std::unique_ptr<Tokenizer> make_wordpiece_from_gguf(const Keys& keys, const std::vector<std::string>& tokens,
                                                    const std::filesystem::path& file)
{
    WordPieceSpec spec;
    spec.source = file.string();
    spec.vocab = wordpiece_vocab_from_gguf_tokens(tokens, keys.token_types(tokens.size()));
    WordPieceOptions& o = spec.options;
    o.lowercase = keys.boolean("tokenizer.ggml.normalizer.lowercase", true);
    const auto name = [&](const char* key, std::string& token) {
        if (const auto id = keys.token_id(key, tokens.size()))
            token = spec.vocab[static_cast<size_t>(*id)];
    };
    name("tokenizer.ggml.unknown_token_id", o.unk_token);
    name("tokenizer.ggml.padding_token_id", o.pad_token);
    name("tokenizer.ggml.mask_token_id", o.mask_token);
    const auto cls = keys.token_id("tokenizer.ggml.cls_token_id", tokens.size());
    spec.cls_id = cls ? cls : keys.token_id("tokenizer.ggml.bos_token_id", tokens.size());
    const auto sep = keys.token_id("tokenizer.ggml.seperator_token_id", tokens.size());
    spec.sep_id = sep ? sep : keys.token_id("tokenizer.ggml.eos_token_id", tokens.size());
    if (spec.cls_id)
        o.cls_token = spec.vocab[static_cast<size_t>(*spec.cls_id)];
    if (spec.sep_id)
        o.sep_token = spec.vocab[static_cast<size_t>(*spec.sep_id)];
    return make_wordpiece(std::move(spec));
}

// SentencePiece's scored pieces, as io/gguf.cpp reads them with the model.
std::unique_ptr<Tokenizer> make_scored_vocab_from_gguf(const Keys& keys,
                                                       const std::vector<std::string>& tokens,
                                                       const std::filesystem::path& file)
{
    const GgufValue* scores = keys.array("tokenizer.ggml.scores", GgufType::Float32);
    if (!scores)
        keys.fail("tokenizer.ggml.model is 'llama' but there is no tokenizer.ggml.scores: SentencePiece "
                  "pieces cannot be merged without their scores");
    if (scores->count != tokens.size())
        keys.fail("tokenizer.ggml.scores has " + std::to_string(scores->count) +
                  " entries but tokenizer.ggml.tokens has " + std::to_string(tokens.size()));
    ScoredVocab vocab;
    vocab.tokens = tokens;
    vocab.scores.resize(tokens.size());
    for (uint64_t k = 0; k < scores->count; ++k)
        vocab.scores[k] = static_cast<float>(scores->element(k).f);
    vocab.types = keys.token_types(tokens.size());
    vocab.bos_id = keys.token_id("tokenizer.ggml.bos_token_id", tokens.size()).value_or(-1);
    vocab.eos_id = keys.token_id("tokenizer.ggml.eos_token_id", tokens.size()).value_or(-1);
    vocab.unk_id = keys.token_id("tokenizer.ggml.unknown_token_id", tokens.size()).value_or(-1);
    vocab.add_dummy_prefix = keys.boolean("tokenizer.ggml.add_space_prefix", true);
    return make_scored_vocab_tokenizer(std::move(vocab), "gguf-llama", file.string());
}

} // namespace

std::vector<std::string> gguf_bpe_pre_tokenizers()
{
    std::vector<std::string> out;
    for (const BpePreTokenizer& p : bpe_pre_tokenizers)
        out.emplace_back(p.name);
    return out;
}

std::unique_ptr<Tokenizer> make_gguf_tokenizer(const GgufFile& gguf, const std::filesystem::path& file)
{
    const Keys keys(gguf, file);
    const GgufValue* tokens = keys.array("tokenizer.ggml.tokens", GgufType::String);
    if (!tokens)
        keys.fail("the GGUF file has no embedded tokenizer vocabulary (no tokenizer.ggml.tokens); pass "
                  "--tokenizer DIR, the Hugging Face directory of its tokenizer");
    if (tokens->strings.empty())
        keys.fail("tokenizer.ggml.tokens is empty");
    const std::string model = keys.string("tokenizer.ggml.model").value_or("llama");
    if (const auto arch = keys.string("general.architecture"))
        if (const auto size = keys.integer(*arch + ".vocab_size");
            size && *size != std::ssize(tokens->strings))
            keys.fail("tokenizer.ggml.tokens lists " + std::to_string(tokens->strings.size()) +
                      " tokens but " + *arch + ".vocab_size is " + std::to_string(*size));
    if (model == "gpt2")
        return make_byte_level_bpe_from_gguf(keys, tokens->strings, file);
    if (model == "bert")
        return make_wordpiece_from_gguf(keys, tokens->strings, file);
    if (model == "llama")
        return make_scored_vocab_from_gguf(keys, tokens->strings, file);
    keys.fail("tokenizer.ggml.model is '" + printable_utf8(model) +
              "', a vocabulary EmbedLab does not read from GGUF (it reads llama's SentencePiece, gpt2's "
              "byte-level BPE and bert's WordPiece); pass --tokenizer DIR, the Hugging Face directory of its "
              "tokenizer");
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& gguf)
{
    const auto file = io::MappedFile::open(gguf);
    return make_gguf_tokenizer(io::parse_gguf(*file), gguf);
}

} // namespace embedlab::tokenizer_impl
