#include "tokenizer/gpt2_loaders.hpp"

#include <optional>
#include <string_view>

#include "embedlab/error.hpp"
#include "embedlab/tokenizer.hpp"
#include "tokenizer/text_util.hpp"

namespace embedlab {
namespace tokenizer_impl {
namespace {

using nlohmann::json;

std::vector<std::pair<std::string, int32_t>> parse_vocab(const json& vocab, const std::filesystem::path& file)
{
    if (!vocab.is_object())
        throw InputError(file_message(file, "the vocabulary is not a JSON object of token -> id"));
    std::vector<std::pair<std::string, int32_t>> out;
    out.reserve(vocab.size());
    for (const auto& [text, id] : vocab.items()) {
        if (!id.is_number_integer())
            throw InputError(file_message(file, "token \"" + printable_utf8(text) +
                                                    "\" has an id that is not an integer"));
        const auto value = id.get<int64_t>();
        if (value < 0 || value > INT32_MAX)
            throw InputError(file_message(file, "token \"" + printable_utf8(text) + "\" has an invalid id " +
                                                    std::to_string(value)));
        out.emplace_back(text, static_cast<int32_t>(value));
    }
    return out;
}

// "a b" -> (a, b); byte-level tokens never contain a real space.
std::pair<std::string, std::string> split_merge(std::string_view line, const std::filesystem::path& file,
                                                size_t number)
{
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
        throw InputError(file_message(file, "merge " + std::to_string(number) + " \"" + printable_utf8(line) +
                                                "\" is not two tokens separated by one space"));
    return {std::string(line.substr(0, space)), std::string(line.substr(space + 1))};
}

// The Split regexes of Meta's Llama 3 and Qwen2 tokenizer.json files, as llama.cpp's
// llama-vocab.cpp quotes them (pre_tokenizer.hpp's llama3_piece_end scans them).
constexpr std::string_view llama3_regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view qwen2_regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// A Split step EmbedLab reproduces: Llama 3's or Qwen2's regex, isolated; nullopt otherwise.
std::optional<SplitPattern> split_pattern(const json& step)
{
    const json pattern = step.value("pattern", json());
    if (!pattern.is_object() || !pattern.contains("Regex") || !pattern.at("Regex").is_string() ||
        step.value("behavior", "") != "Isolated" || step.value("invert", false))
        return std::nullopt;
    const auto regex = pattern.at("Regex").get<std::string>();
    if (regex == llama3_regex)
        return SplitPattern::llama3;
    if (regex == qwen2_regex)
        return SplitPattern::qwen2;
    return std::nullopt;
}

void apply_pre_tokenizer(const json& pre, ByteLevelBpeSpec& spec, const std::filesystem::path& file)
{
    const auto unsupported = [&](const std::string& what) {
        return InputError(file_message(
            file,
            "pre-tokenizer " + what +
                " is not supported (supported: ByteLevel; Digits then ByteLevel; a Split with Llama 3's or "
                "Qwen2's regex then ByteLevel without its own)"));
    };
    if (!pre.is_object())
        throw unsupported("null");
    const std::string type = pre.value("type", "");
    std::vector<json> steps;
    if (type == "Sequence")
        steps = pre.at("pretokenizers").get<std::vector<json>>();
    else
        steps.push_back(pre);

    bool byte_level = false;
    std::optional<SplitPattern> split;
    for (size_t i = 0; i < steps.size(); ++i) {
        const std::string step = steps[i].value("type", "");
        if (step == "Digits" && i + 1 < steps.size() && !spec.split_digits && !split) {
            spec.split_digits = true;
            spec.individual_digits = steps[i].value("individual_digits", false);
        } else if (step == "Split" && i + 1 < steps.size() && !spec.split_digits && !split &&
                   (split = split_pattern(steps[i]))) {
            spec.pattern = *split;
        } else if (step == "ByteLevel" && i + 1 == steps.size() &&
                   !(split && steps[i].value("use_regex", true))) {
            byte_level = true;
            spec.add_prefix_space = steps[i].value("add_prefix_space", false);
            spec.use_regex = split || steps[i].value("use_regex", true);
        } else {
            throw unsupported("\"" + step + "\"");
        }
    }
    if (!byte_level)
        throw unsupported("without ByteLevel");
}

void apply_normalizer(const json& normalizer, ByteLevelBpeSpec& spec, const std::filesystem::path& file)
{
    if (normalizer.is_null())
        return;
    const std::string type = normalizer.value("type", "");
    if (type == "NFC") {
        spec.nfc = true;
        return;
    }
    throw InputError(
        file_message(file, "normalizer \"" + type + "\" is not supported (supported: none, NFC)"));
}

std::string string_field_or_empty(const json& object, const char* key)
{
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? std::string() : it->get<std::string>();
}

} // namespace

ByteLevelBpeSpec parse_hf_tokenizer_json(const json& root, const std::filesystem::path& file)
{
    try {
        if (!root.is_object() || !root.contains("model"))
            throw InputError(file_message(file, "no \"model\" section: not a Hugging Face tokenizer.json"));
        const json& model = root.at("model");
        const std::string type = model.value("type", "BPE");
        if (type != "BPE")
            throw InputError(
                file_message(file, "model type \"" + type + "\" is not supported (only byte-level BPE)"));
        if (!string_field_or_empty(model, "continuing_subword_prefix").empty() ||
            !string_field_or_empty(model, "end_of_word_suffix").empty())
            throw InputError(file_message(file, "BPE with a subword prefix or word suffix is not supported"));

        ByteLevelBpeSpec spec;
        spec.source = file;
        apply_normalizer(root.value("normalizer", json()), spec, file);
        apply_pre_tokenizer(root.value("pre_tokenizer", json()), spec, file);
        spec.ignore_merges = model.value("ignore_merges", false);
        spec.vocab = parse_vocab(model.at("vocab"), file);

        const json& merges = model.at("merges");
        spec.merges.reserve(merges.size());
        for (size_t i = 0; i < merges.size(); ++i) {
            const json& m = merges[i];
            if (m.is_string())
                spec.merges.push_back(split_merge(m.get<std::string>(), file, i + 1));
            else if (m.is_array() && m.size() == 2)
                spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
            else
                throw InputError(
                    file_message(file, "merge " + std::to_string(i + 1) + " is neither \"a b\" nor [a, b]"));
        }

        for (const json& t : root.value("added_tokens", json::array())) {
            AddedToken added;
            added.id = t.at("id").get<int32_t>();
            added.content = t.at("content").get<std::string>();
            added.special = t.value("special", false);
            spec.added_tokens.push_back(std::move(added));
        }
        return spec;
    } catch (const json::exception& e) {
        throw InputError(file_message(file, std::string("unexpected structure (") + e.what() + ")"));
    }
}

} // namespace tokenizer_impl

using namespace tokenizer_impl;

namespace tokenizer_impl {

void for_each_merges_line(std::string_view text,
                          const std::function<void(std::string_view line, bool version)>& visit)
{
    size_t line_number = 0;
    for (size_t pos = 0; pos < text.size();) {
        size_t end = text.find('\n', pos);
        if (end == std::string_view::npos)
            end = text.size();
        std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        ++line_number;
        if (!line.empty() && line.back() == '\r')
            line.remove_suffix(1);
        if (!line.empty())
            visit(line, line_number == 1 && line.starts_with("#version"));
    }
}

ByteLevelBpeSpec gpt2_files_spec(const std::filesystem::path& vocab_json,
                                 const std::filesystem::path& merges_txt)
{
    ByteLevelBpeSpec spec;
    spec.source = vocab_json;
    spec.merges_source = merges_txt;
    spec.vocab = parse_vocab(read_json_file(vocab_json), vocab_json);

    // merges.txt: an optional "#version" line, then one "a b" merge per line.
    for_each_merges_line(read_file_bytes(merges_txt), [&](std::string_view line, bool version) {
        if (!version)
            spec.merges.push_back(split_merge(line, merges_txt, spec.merges.size() + 1));
    });

    // GPT-2's one special token is part of vocab.json itself.
    for (const auto& [token, id] : spec.vocab)
        if (token == "<|endoftext|>")
            spec.added_tokens.push_back({id, token, true});
    return spec;
}

} // namespace tokenizer_impl

std::unique_ptr<Tokenizer> load_gpt2_bpe(const std::filesystem::path& vocab_json,
                                         const std::filesystem::path& merges_txt)
{
    return make_byte_level_bpe(gpt2_files_spec(vocab_json, merges_txt));
}

std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::filesystem::path& tokenizer_json)
{
    return make_byte_level_bpe(parse_hf_tokenizer_json(read_json_file(tokenizer_json), tokenizer_json));
}

} // namespace embedlab
