// Reading WordPiece tokenizers: vocab.txt (+ tokenizer_config.json) as
// BertTokenizerFast builds them, and tokenizer.json with a WordPiece model.
#include <set>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "tokenizer/text_util.hpp"
#include "tokenizer/wordpiece_impl.hpp"

namespace embedlab {
namespace tokenizer_impl {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A token named in a config: "[CLS]" or {"content": "[CLS]", ...} (AddedToken).
std::optional<std::string> token_name(const json& config, const char* key)
{
    const auto it = config.find(key);
    if (it == config.end() || it->is_null())
        return std::nullopt;
    if (it->is_string())
        return it->get<std::string>();
    if (it->is_object() && it->contains("content"))
        return it->at("content").get<std::string>();
    return std::nullopt;
}

bool bool_field(const json& object, const char* key, bool fallback)
{
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? fallback : it->get<bool>();
}

// The special-token names of tokenizer_config.json into `options`.
void apply_token_names(const json& config, WordPieceOptions& options)
{
    const std::pair<const char*, std::string*> names[] = {{"unk_token", &options.unk_token},
                                                          {"cls_token", &options.cls_token},
                                                          {"sep_token", &options.sep_token},
                                                          {"pad_token", &options.pad_token},
                                                          {"mask_token", &options.mask_token}};
    for (const auto& [key, field] : names)
        if (auto name = token_name(config, key))
            *field = *name;
}

// tokenizer_config.json beside `file`, or null when there is none.
json config_beside(const fs::path& file)
{
    std::error_code ec;
    const fs::path config = file.parent_path() / "tokenizer_config.json";
    if (!fs::exists(config, ec))
        return json();
    json parsed = read_json_file(config);
    if (!parsed.is_object())
        throw InputError(file_message(config, "not a JSON object"));
    return parsed;
}

void apply_normalizer(const json& normalizer, WordPieceSpec& spec, const fs::path& file)
{
    spec.normalizer.clear();
    if (normalizer.is_null())
        return;
    std::vector<json> steps;
    const std::string type = normalizer.value("type", "");
    if (type == "Sequence")
        steps = normalizer.at("normalizers").get<std::vector<json>>();
    else
        steps.push_back(normalizer);
    bool bert = false;
    for (const json& step : steps) {
        const std::string name = step.value("type", "");
        if (name == "BertNormalizer" && !bert) {
            bert = true;
            spec.normalizer.push_back(WordPieceNorm::Bert);
            WordPieceOptions& o = spec.options;
            o.clean_text = bool_field(step, "clean_text", true);
            o.handle_chinese_chars = bool_field(step, "handle_chinese_chars", true);
            o.lowercase = bool_field(step, "lowercase", true);
            const auto strip = step.find("strip_accents");
            o.strip_accents = strip == step.end() || strip->is_null()
                                  ? std::nullopt
                                  : std::optional<bool>(strip->get<bool>());
        } else if (name == "Lowercase") {
            spec.normalizer.push_back(WordPieceNorm::Lowercase);
        } else if (name == "StripAccents") {
            spec.normalizer.push_back(WordPieceNorm::StripAccents);
        } else if (name == "NFD") {
            spec.normalizer.push_back(WordPieceNorm::Nfd);
        } else if (name == "NFKD") {
            spec.normalizer.push_back(WordPieceNorm::Nfkd);
        } else if (name == "NFC") {
            spec.normalizer.push_back(WordPieceNorm::Nfc);
        } else if (name == "NFKC") {
            spec.normalizer.push_back(WordPieceNorm::Nfkc);
        } else {
            throw InputError(file_message(
                file, "normalizer type \"" + name +
                          "\" is not supported for WordPiece (supported: BertNormalizer, Lowercase, "
                          "StripAccents, NFD, NFKD, NFC, NFKC, or a Sequence of them)"));
        }
    }
}

void apply_pre_tokenizer(const json& pre, WordPieceSpec& spec, const fs::path& file)
{
    if (pre.is_null()) {
        spec.pre_tokenizer = WordPieceSplit::None;
        return;
    }
    const json* step = &pre;
    std::string type = pre.value("type", "");
    // A Sequence of one step is that step.
    if (type == "Sequence" && pre.contains("pretokenizers") && pre.at("pretokenizers").size() == 1) {
        step = &pre.at("pretokenizers").at(0);
        type = step->value("type", "");
    }
    if (type == "BertPreTokenizer")
        spec.pre_tokenizer = WordPieceSplit::Bert;
    else if (type == "WhitespaceSplit")
        spec.pre_tokenizer = WordPieceSplit::Whitespace;
    else
        throw InputError(file_message(file, "pre-tokenizer type \"" + type +
                                                "\" is not supported for WordPiece (supported: "
                                                "BertPreTokenizer, WhitespaceSplit)"));
}

// [CLS] and [SEP] ids from TemplateProcessing or BertProcessing.
void apply_post_processor(const json& post, WordPieceSpec& spec, const fs::path& file)
{
    if (!post.is_object())
        return;
    const std::string type = post.value("type", "");
    const auto id_of = [&](const json& pair) -> std::optional<int32_t> {
        if (pair.is_array() && pair.size() == 2 && pair[1].is_number_integer())
            return pair[1].get<int32_t>();
        return std::nullopt;
    };
    if (type == "BertProcessing" || type == "RobertaProcessing") {
        spec.cls_id = id_of(post.value("cls", json()));
        spec.sep_id = id_of(post.value("sep", json()));
    } else if (type == "TemplateProcessing") {
        // single: [SpecialToken cls] [Sequence A] [SpecialToken sep]
        const json single = post.value("single", json::array());
        const json specials = post.value("special_tokens", json::object());
        bool seen_sequence = false;
        for (const json& piece : single) {
            if (piece.contains("Sequence")) {
                seen_sequence = true;
                continue;
            }
            if (!piece.contains("SpecialToken"))
                continue;
            const std::string name = piece.at("SpecialToken").value("id", "");
            const auto it = specials.find(name);
            if (it == specials.end() || !it->contains("ids") || it->at("ids").size() != 1)
                throw InputError(file_message(file, "post-processor special token \"" + printable_utf8(name) +
                                                        "\" has no single id"));
            const int32_t id = it->at("ids").at(0).get<int32_t>();
            (seen_sequence ? spec.sep_id : spec.cls_id) = id;
        }
    }
}

} // namespace

// sentence_bert_config.json beside `file` (a sentence-transformers model): its
// max_seq_length into options.max_length. sentence-transformers passes it to the
// tokenizer call as max_length with truncation, so it counts [CLS] and [SEP]. A
// null or absent max_seq_length leaves no limit.
void apply_sentence_transformers_length(const fs::path& file, WordPieceOptions& options)
{
    std::error_code ec;
    const fs::path config = file.parent_path() / "sentence_bert_config.json";
    if (!fs::exists(config, ec))
        return;
    const json parsed = read_json_file(config);
    if (!parsed.is_object())
        throw InputError(file_message(config, "not a JSON object"));
    const auto it = parsed.find("max_seq_length");
    if (it == parsed.end() || it->is_null())
        return;
    if (!it->is_number_integer() || it->get<int64_t>() < 2)
        throw InputError(file_message(config, "max_seq_length " + it->dump() +
                                                  " is not a whole number of tokens of at least 2 "
                                                  "([CLS] and [SEP])"));
    options.max_length = it->get<int64_t>();
}

} // namespace tokenizer_impl

using namespace tokenizer_impl;

std::unique_ptr<Tokenizer> load_wordpiece_vocab(const fs::path& vocab_txt)
{
    const std::string bytes = read_file_bytes(vocab_txt);
    // Python's readlines() in text mode: "\n", "\r\n" and "\r" end lines; each
    // line's newline is stripped, nothing else (load_vocab's rstrip("\n")).
    std::vector<std::string> vocab;
    for (size_t pos = 0; pos < bytes.size();) {
        size_t end = bytes.find_first_of("\r\n", pos);
        if (end == std::string::npos)
            end = bytes.size();
        std::string line = bytes.substr(pos, end - pos);
        for (size_t i = 0; i < line.size();) {
            const CodePoint cp = next_code_point(line, i);
            if (cp.value < 0)
                throw InputError(file_message(vocab_txt, "line " + std::to_string(vocab.size() + 1) +
                                                             " is not valid UTF-8"));
            i += static_cast<size_t>(cp.length);
        }
        vocab.push_back(std::move(line));
        pos = end + (end + 1 < bytes.size() && bytes[end] == '\r' && bytes[end + 1] == '\n' ? 2 : 1);
    }
    if (vocab.empty())
        throw InputError(file_message(vocab_txt, "the WordPiece vocabulary is empty"));

    WordPieceOptions options;
    const fs::path config_file = vocab_txt.parent_path() / "tokenizer_config.json";
    try {
        const json config = config_beside(vocab_txt);
        if (config.is_object()) {
            options.lowercase = bool_field(config, "do_lower_case", true);
            options.handle_chinese_chars = bool_field(config, "tokenize_chinese_chars", true);
            const auto strip = config.find("strip_accents");
            if (strip != config.end() && !strip->is_null())
                options.strip_accents = strip->get<bool>();
            apply_token_names(config, options);
            // added_tokens_decoder (transformers >= 4.34): the added tokens with
            // their flags; the named specials are added too when missing.
            if (const auto decoder = config.find("added_tokens_decoder");
                decoder != config.end() && decoder->is_object()) {
                std::set<std::string> seen;
                for (const auto& [key, token] : decoder->items()) {
                    WordPieceAddedToken added;
                    added.id = std::stoi(key);
                    added.content = token.at("content").get<std::string>();
                    added.special = bool_field(token, "special", false);
                    added.lstrip = bool_field(token, "lstrip", false);
                    added.rstrip = bool_field(token, "rstrip", false);
                    seen.insert(added.content);
                    options.added_tokens.push_back(std::move(added));
                }
                for (const std::string* name : {&options.pad_token, &options.unk_token, &options.cls_token,
                                                &options.sep_token, &options.mask_token})
                    if (!seen.count(*name))
                        for (size_t id = vocab.size(); id-- > 0;)
                            if (vocab[id] == *name) {
                                options.added_tokens.push_back({*name, static_cast<int32_t>(id), true});
                                break;
                            }
            }
        }
    } catch (const json::exception& e) {
        throw InputError(file_message(config_file, std::string("unexpected structure (") + e.what() + ")"));
    } catch (const std::logic_error& e) { // std::stoi of a key that is no number
        throw InputError(file_message(config_file, "added_tokens_decoder has a key that is not a token id"));
    }
    apply_sentence_transformers_length(vocab_txt, options);
    return make_wordpiece_tokenizer(std::move(vocab), std::move(options), vocab_txt.string());
}

std::unique_ptr<Tokenizer> load_wordpiece_tokenizer_json(const json& root, const fs::path& source)
{
    WordPieceSpec spec;
    spec.source = source.string();
    try {
        if (!root.is_object() || !root.contains("model"))
            throw InputError(file_message(source, "no \"model\" section: not a Hugging Face tokenizer.json"));
        const json& model = root.at("model");
        const std::string type = model.value("type", "");
        if (type != "WordPiece")
            throw InputError(file_message(source, "model type \"" + type + "\" is not WordPiece"));
        WordPieceOptions& o = spec.options;
        if (const auto unk = token_name(model, "unk_token"))
            o.unk_token = *unk;
        if (const auto prefix = token_name(model, "continuing_subword_prefix"))
            o.continuing_subword_prefix = *prefix;
        if (model.contains("max_input_chars_per_word") && !model.at("max_input_chars_per_word").is_null())
            o.max_input_chars_per_word = model.at("max_input_chars_per_word").get<int>();

        const json& vocab = model.at("vocab");
        if (!vocab.is_object())
            throw InputError(file_message(source, "the vocabulary is not a JSON object of token -> id"));
        if (vocab.empty())
            throw InputError(file_message(source, "the WordPiece vocabulary is empty"));
        // Ids need not be dense, but a stray huge id must not allocate gigabytes.
        const int64_t limit = 2 * static_cast<int64_t>(vocab.size()) + 1024;
        for (const auto& [text, id] : vocab.items()) {
            if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= limit)
                throw InputError(file_message(source, "token \"" + printable_utf8(text) +
                                                          "\" has an invalid id " + id.dump()));
            const auto index = static_cast<size_t>(id.get<int64_t>());
            if (index >= spec.vocab.size())
                spec.vocab.resize(index + 1);
            if (!spec.vocab[index].empty())
                throw InputError(file_message(source, "tokens \"" + printable_utf8(spec.vocab[index]) +
                                                          "\" and \"" + printable_utf8(text) +
                                                          "\" share id " + std::to_string(index)));
            spec.vocab[index] = text;
        }

        apply_normalizer(root.value("normalizer", json()), spec, source);
        apply_pre_tokenizer(root.value("pre_tokenizer", json()), spec, source);
        apply_post_processor(root.value("post_processor", json()), spec, source);
        if (const json decoder = root.value("decoder", json()); decoder.is_object())
            o.decode_cleanup = bool_field(decoder, "cleanup", true);

        for (const json& t : root.value("added_tokens", json::array())) {
            WordPieceAddedToken added;
            added.id = t.at("id").get<int32_t>();
            added.content = t.at("content").get<std::string>();
            added.special = bool_field(t, "special", false);
            added.lstrip = bool_field(t, "lstrip", false);
            added.rstrip = bool_field(t, "rstrip", false);
            o.added_tokens.push_back(std::move(added));
        }
        // tokenizer_config.json beside it names [MASK] and [PAD] (and [CLS]/[SEP]
        // when no post-processor gave them).
        const fs::path config_file = source.parent_path() / "tokenizer_config.json";
        try {
            const json config = config_beside(source);
            if (config.is_object()) {
                const std::string unk = o.unk_token; // the model's, not the config's
                apply_token_names(config, o);
                o.unk_token = unk;
            }
        } catch (const json::exception& e) {
            throw InputError(
                file_message(config_file, std::string("unexpected structure (") + e.what() + ")"));
        }
    } catch (const json::exception& e) {
        throw InputError(file_message(source, std::string("unexpected structure (") + e.what() + ")"));
    }
    apply_sentence_transformers_length(source, spec.options);
    return make_wordpiece(std::move(spec));
}

} // namespace embedlab
