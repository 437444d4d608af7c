// Vocabulary trimming's tokenizer files: reading each family's vocabulary, the
// tokens every trimmed tokenizer keeps, and the files rewritten for a kept set.
#include "tokenizer/trim_vocab.hpp"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "tokenizer/byte_level_bpe.hpp"
#include "tokenizer/gpt2_loaders.hpp"
#include "tokenizer/text_util.hpp"

namespace embedlab::tokenizer_impl {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

namespace {

constexpr int64_t kWholeWord = int64_t{1} << 30;        // WordPiece's unk covers its word
const std::string kSentencePieceSpace = "\xE2\x96\x81"; // U+2581

bool is_file(const fs::path& p)
{
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

int64_t code_points(std::string_view text)
{
    int64_t n = 0;
    for (size_t i = 0; i < text.size(); ++n)
        i += static_cast<size_t>(next_code_point(text, i).length);
    return n;
}

// A vocabulary by id from (text, id) pairs, ids possibly sparse.
void set_tokens(TrimVocabulary& v, const std::vector<std::pair<std::string, int32_t>>& pairs)
{
    int32_t top = -1;
    for (const auto& [text, id] : pairs)
        top = std::max(top, id);
    v.tokens.assign(static_cast<size_t>(top + 1), std::string());
    for (const auto& [text, id] : pairs)
        v.tokens[static_cast<size_t>(id)] = text;
    v.parts.assign(v.tokens.size(), {});
    v.units.assign(v.tokens.size(), 0);
    v.continuation.assign(v.tokens.size(), 0);
}

std::unordered_map<std::string, int32_t> ids_by_text(const TrimVocabulary& v)
{
    std::unordered_map<std::string, int32_t> out;
    for (size_t id = 0; id < v.tokens.size(); ++id)
        if (!v.tokens[id].empty())
            out.emplace(v.tokens[id], static_cast<int32_t>(id));
    return out;
}

void finish_required(TrimVocabulary& v)
{
    std::sort(v.required.begin(), v.required.end());
    v.required.erase(std::unique(v.required.begin(), v.required.end()), v.required.end());
}

TrimVocabulary byte_level_vocabulary(const ByteLevelBpeSpec& spec)
{
    TrimVocabulary v;
    v.family = TrimFamily::ByteLevelBpe;
    auto pairs = spec.vocab;
    for (const auto& added : spec.added_tokens)
        pairs.emplace_back(added.content, added.id);
    set_tokens(v, pairs);
    for (size_t id = 0; id < v.tokens.size(); ++id)
        v.units[id] = code_points(v.tokens[id]); // one code point per byte
    const auto ids = ids_by_text(v);
    for (int byte = 0; byte < 256; ++byte) {
        std::string text;
        append_utf8(text, byte_to_code_point(static_cast<unsigned char>(byte)));
        if (const auto it = ids.find(text); it != ids.end())
            v.required.push_back(it->second);
    }
    for (const auto& added : spec.added_tokens) {
        v.required.push_back(added.id);
        v.units[static_cast<size_t>(added.id)] = static_cast<int64_t>(added.content.size());
    }
    for (const auto& [left, right] : spec.merges) {
        const auto a = ids.find(left), b = ids.find(right), made = ids.find(left + right);
        if (a != ids.end() && b != ids.end() && made != ids.end()) {
            auto& parts = v.parts[static_cast<size_t>(made->second)];
            parts.push_back(a->second);
            parts.push_back(b->second);
        }
    }
    finish_required(v);
    return v;
}

TrimVocabulary wordpiece_vocabulary(const std::vector<std::pair<std::string, int32_t>>& pairs,
                                    const std::string& prefix, const std::string& unk,
                                    const std::vector<int32_t>& added)
{
    TrimVocabulary v;
    v.family = TrimFamily::WordPiece;
    set_tokens(v, pairs);
    for (size_t id = 0; id < v.tokens.size(); ++id) {
        const std::string& t = v.tokens[id];
        const bool continues = !prefix.empty() && t.size() > prefix.size() && t.starts_with(prefix);
        v.continuation[id] = continues ? 1 : 0;
        const int64_t chars = code_points(continues ? std::string_view(t).substr(prefix.size()) : t);
        v.units[id] = chars;
        if (t == unk) {
            v.required.push_back(static_cast<int32_t>(id));
            v.units[id] = kWholeWord;
        } else if (chars == 1) { // a single character, plain or "##"
            v.required.push_back(static_cast<int32_t>(id));
        }
    }
    v.required.insert(v.required.end(), added.begin(), added.end());
    finish_required(v);
    return v;
}

std::string json_string_or(const Json& object, const char* key, const std::string& fallback)
{
    const auto it = object.find(key);
    if (it == object.end() || it->is_null())
        return fallback;
    if (it->is_string())
        return it->get<std::string>();
    if (it->is_object() && it->contains("content")) // tokenizer_config.json's AddedToken form
        return it->at("content").get<std::string>();
    return fallback;
}

TrimVocabulary wordpiece_json_vocabulary(const Json& root, const fs::path& file)
{
    const Json& model = root.at("model");
    std::vector<std::pair<std::string, int32_t>> pairs;
    for (const auto& [text, id] : model.at("vocab").items())
        pairs.emplace_back(text, id.get<int32_t>());
    std::vector<int32_t> added;
    for (const Json& t : root.value("added_tokens", Json::array()))
        added.push_back(t.at("id").get<int32_t>());
    if (pairs.empty())
        throw InputError(file_message(file, "the WordPiece vocabulary is empty"));
    return wordpiece_vocabulary(pairs, json_string_or(model, "continuing_subword_prefix", "##"),
                                json_string_or(model, "unk_token", "[UNK]"), added);
}

// vocab.txt's lines as load_wordpiece_vocab splits them.
std::vector<std::string> vocab_txt_lines(const std::string& bytes)
{
    std::vector<std::string> lines;
    for (size_t pos = 0; pos < bytes.size();) {
        size_t end = bytes.find_first_of("\r\n", pos);
        if (end == std::string::npos)
            end = bytes.size();
        lines.push_back(bytes.substr(pos, end - pos));
        pos = end + (end + 1 < bytes.size() && bytes[end] == '\r' && bytes[end + 1] == '\n' ? 2 : 1);
    }
    return lines;
}

TrimVocabulary wordpiece_txt_vocabulary(const fs::path& dir)
{
    const auto lines = vocab_txt_lines(read_file_bytes(dir / "vocab.txt"));
    if (lines.empty())
        throw InputError(file_message(dir / "vocab.txt", "the WordPiece vocabulary is empty"));
    std::vector<std::pair<std::string, int32_t>> pairs;
    for (size_t i = 0; i < lines.size(); ++i)
        pairs.emplace_back(lines[i], static_cast<int32_t>(i));
    std::string unk = "[UNK]";
    std::vector<int32_t> added;
    if (is_file(dir / "tokenizer_config.json")) {
        const Json config = read_json_file(dir / "tokenizer_config.json");
        if (config.is_object()) {
            unk = json_string_or(config, "unk_token", unk);
            if (const auto decoder = config.find("added_tokens_decoder");
                decoder != config.end() && decoder->is_object())
                for (const auto& [key, token] : decoder->items())
                    if (!key.empty() && key.find_first_not_of("0123456789") == std::string::npos)
                        added.push_back(static_cast<int32_t>(std::stol(key)));
        }
    }
    return wordpiece_vocabulary(pairs, "##", unk, added);
}

// --- SentencePiece's ModelProto, field by field, keeping each field's bytes.

struct ProtoField {
    uint32_t number = 0;
    uint32_t wire = 0;
    uint64_t varint = 0;      // wire 0
    std::string_view payload; // wire 2
    std::string_view whole;   // key and value as stored
};

uint64_t read_varint(std::string_view bytes, size_t& pos, const fs::path& file)
{
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (pos >= bytes.size())
            throw InputError(file_message(file, "truncated protobuf (a varint runs past the end)"));
        const auto byte = static_cast<unsigned char>(bytes[pos++]);
        value |= static_cast<uint64_t>(byte & 0x7F) << shift;
        if (!(byte & 0x80))
            return value;
    }
    throw InputError(file_message(file, "corrupt protobuf (a varint longer than 10 bytes)"));
}

std::vector<ProtoField> scan_message(std::string_view bytes, const fs::path& file)
{
    std::vector<ProtoField> fields;
    for (size_t pos = 0; pos < bytes.size();) {
        const size_t start = pos;
        const uint64_t key = read_varint(bytes, pos, file);
        ProtoField f;
        f.number = static_cast<uint32_t>(key >> 3);
        f.wire = static_cast<uint32_t>(key & 7);
        size_t length = 0;
        if (f.wire == 0) {
            f.varint = read_varint(bytes, pos, file);
        } else if (f.wire == 1 || f.wire == 5) {
            length = f.wire == 1 ? 8 : 4;
        } else if (f.wire == 2) {
            length = static_cast<size_t>(read_varint(bytes, pos, file));
        } else {
            throw InputError(
                file_message(file, "corrupt protobuf (wire type " + std::to_string(f.wire) + ")"));
        }
        if (length > bytes.size() - pos)
            throw InputError(file_message(file, "truncated protobuf (a field runs past the end)"));
        if (f.wire == 2)
            f.payload = bytes.substr(pos, length);
        pos += length;
        f.whole = bytes.substr(start, pos - start);
        fields.push_back(f);
    }
    return fields;
}

void append_varint(std::string& out, uint64_t value)
{
    while (value >= 0x80) {
        out.push_back(static_cast<char>((value & 0x7F) | 0x80));
        value >>= 7;
    }
    out.push_back(static_cast<char>(value));
}

void append_message_field(std::string& out, uint32_t number, std::string_view payload)
{
    append_varint(out, (uint64_t{number} << 3) | 2);
    append_varint(out, payload.size());
    out.append(payload);
}

namespace sp {
constexpr uint32_t model_pieces = 1, model_trainer_spec = 2;
constexpr uint32_t piece_text = 1, piece_type = 3;
constexpr uint32_t trainer_model_type = 3, trainer_vocab_size = 4, trainer_byte_fallback = 35;
constexpr int32_t normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6;
constexpr uint64_t model_type_bpe = 2;
} // namespace sp

TrimVocabulary sentencepiece_vocabulary(const fs::path& file)
{
    const std::string bytes = read_file_bytes(file);
    std::vector<std::pair<std::string, int32_t>> pairs;
    std::vector<int32_t> types;
    uint64_t model_type = 1; // the proto's default: Unigram
    bool byte_fallback = false;
    for (const ProtoField& f : scan_message(bytes, file)) {
        if (f.number == sp::model_pieces && f.wire == 2) {
            std::string text;
            int32_t type = sp::normal;
            for (const ProtoField& p : scan_message(f.payload, file)) {
                if (p.number == sp::piece_text && p.wire == 2)
                    text = std::string(p.payload);
                else if (p.number == sp::piece_type && p.wire == 0)
                    type = static_cast<int32_t>(p.varint);
            }
            pairs.emplace_back(std::move(text), static_cast<int32_t>(pairs.size()));
            types.push_back(type);
        } else if (f.number == sp::model_trainer_spec && f.wire == 2) {
            for (const ProtoField& t : scan_message(f.payload, file)) {
                if (t.number == sp::trainer_model_type && t.wire == 0)
                    model_type = t.varint;
                else if (t.number == sp::trainer_byte_fallback && t.wire == 0)
                    byte_fallback = t.varint != 0;
            }
        }
    }
    if (model_type != sp::model_type_bpe)
        throw InputError(file_message(
            file, std::string("SentencePiece ") +
                      (model_type == 1 ? "Unigram" : "model type " + std::to_string(model_type)) +
                      " is not a tokenizer trim rewrites (it rewrites SentencePiece BPE)"));
    if (pairs.empty())
        throw InputError(file_message(file, "the SentencePiece model has no pieces"));

    TrimVocabulary v;
    v.family = TrimFamily::SentencePieceBpe;
    set_tokens(v, pairs);
    const auto ids = ids_by_text(v);
    for (size_t id = 0; id < v.tokens.size(); ++id) {
        const std::string& t = v.tokens[id];
        const int32_t type = types[id];
        if (type == sp::unknown || type == sp::control || type == sp::user_defined || type == sp::byte)
            v.required.push_back(static_cast<int32_t>(id));
        // Without byte fallback a character no piece spells is unk: keep every one.
        if (!byte_fallback && type == sp::normal && code_points(t) == 1)
            v.required.push_back(static_cast<int32_t>(id));
        if (type == sp::byte || type == sp::unknown) {
            v.units[id] = 1;
        } else if (type == sp::control || type == sp::unused) {
            v.units[id] = 0;
        } else {
            int64_t units = 0;
            for (size_t i = 0; i < t.size();) {
                // "▁" stands for one space byte.
                const bool space = t.compare(i, kSentencePieceSpace.size(), kSentencePieceSpace) == 0;
                ++units;
                i += space ? kSentencePieceSpace.size() : 1;
            }
            v.units[id] = units;
        }
        // Every split into two pieces: whichever one the merges take is kept.
        if (type != sp::normal && type != sp::user_defined)
            continue;
        for (size_t i = 0; i < t.size();) {
            i += static_cast<size_t>(next_code_point(t, i).length);
            if (i >= t.size())
                break;
            const auto a = ids.find(t.substr(0, i)), b = ids.find(t.substr(i));
            if (a != ids.end() && b != ids.end()) {
                v.parts[id].push_back(a->second);
                v.parts[id].push_back(b->second);
            }
        }
    }
    finish_required(v);
    return v;
}

// --- Writing.

class Renumbering {
public:
    Renumbering(const std::vector<int32_t>& kept, size_t vocab)
        : new_id_(std::max(vocab, kept.empty() ? size_t{0} : static_cast<size_t>(kept.back()) + 1), -1)
    {
        for (size_t i = 0; i < kept.size(); ++i)
            new_id_[static_cast<size_t>(kept[i])] = static_cast<int32_t>(i);
    }
    // -1 for a dropped id or one outside the vocabulary.
    int32_t operator()(int64_t old) const
    {
        return old >= 0 && static_cast<size_t>(old) < new_id_.size() ? new_id_[static_cast<size_t>(old)] : -1;
    }

private:
    std::vector<int32_t> new_id_;
};

int32_t renumbered_or_refuse(const Renumbering& renumber, const OrderedJson& id, const fs::path& file,
                             const std::string& where)
{
    const int32_t out = id.is_number_integer() ? renumber(id.get<int64_t>()) : -1;
    if (out < 0)
        throw InputError(file_message(file, where + " names id " + id.dump() +
                                                ", which is not a kept token (trim keeps special tokens)"));
    return out;
}

// A {text: id} vocabulary cut to the kept ids, in the new id order. (Read as a plain
// json: ordered_json's objects find keys by linear search, quadratic for 50k tokens.)
OrderedJson trimmed_vocab_object(const Json& vocab, const Renumbering& renumber, const fs::path& file)
{
    if (!vocab.is_object())
        throw InputError(file_message(file, "the vocabulary is not a JSON object of token -> id"));
    std::vector<std::pair<int32_t, std::string>> kept;
    for (const auto& [text, id] : vocab.items())
        if (const int32_t n = id.is_number_integer() ? renumber(id.get<int64_t>()) : -1; n >= 0)
            kept.emplace_back(n, text);
    std::sort(kept.begin(), kept.end());
    OrderedJson out = OrderedJson::object();
    for (const auto& [id, text] : kept)
        out[text] = id;
    return out;
}

using TextSet = std::unordered_set<std::string>;

TextSet vocab_texts(const OrderedJson& vocab)
{
    TextSet out;
    for (const auto& [text, id] : vocab.items())
        out.insert(text);
    return out;
}

bool merge_kept(const std::string& left, const std::string& right, const TextSet& vocab)
{
    return vocab.count(left) && vocab.count(right) && vocab.count(left + right);
}

// tokenizer.json in its own key order without model.vocab's entries (read apart).
OrderedJson ordered_without_vocab(const std::string& text)
{
    bool in_vocab = false;
    using Event = nlohmann::detail::parse_event_t;
    return OrderedJson::parse(text, [&](int depth, Event event, OrderedJson& parsed) {
        if (event == Event::key && depth == 2)
            in_vocab = parsed == "vocab";
        return !(in_vocab && depth == 3 && event == Event::key);
    });
}

// Post-processors name special ids: TemplateProcessing's special_tokens[..].ids,
// BertProcessing's and RobertaProcessing's sep/cls pairs, Sequence's processors.
void renumber_post_processor(OrderedJson& p, const Renumbering& renumber, const fs::path& file)
{
    if (!p.is_object())
        return;
    if (auto it = p.find("special_tokens"); it != p.end() && it->is_object())
        for (auto& [name, token] : it->items())
            if (auto ids = token.find("ids"); ids != token.end() && ids->is_array())
                for (auto& id : *ids)
                    id = renumbered_or_refuse(renumber, id, file, "post_processor token " + name);
    for (const char* key : {"sep", "cls"})
        if (auto it = p.find(key); it != p.end() && it->is_array() && it->size() == 2)
            (*it)[1] = renumbered_or_refuse(renumber, (*it)[1], file, std::string("post_processor ") + key);
    if (auto it = p.find("processors"); it != p.end() && it->is_array())
        for (auto& step : *it)
            renumber_post_processor(step, renumber, file);
}

std::string trimmed_tokenizer_json(const fs::path& file, const Renumbering& renumber)
{
    const std::string text = read_file_bytes(file);
    OrderedJson root = ordered_without_vocab(text);
    OrderedJson& model = root.at("model");
    model["vocab"] = trimmed_vocab_object(Json::parse(text).at("model").at("vocab"), renumber, file);
    const TextSet kept_texts = vocab_texts(model["vocab"]);
    if (auto merges = model.find("merges"); merges != model.end() && merges->is_array()) {
        OrderedJson kept = OrderedJson::array();
        for (const auto& m : *merges) {
            std::string left, right;
            if (m.is_string()) {
                const std::string s = m.get<std::string>();
                const size_t space = s.find(' ');
                left = s.substr(0, space);
                right = space == std::string::npos ? std::string() : s.substr(space + 1);
            } else if (m.is_array() && m.size() == 2) {
                left = m[0].get<std::string>();
                right = m[1].get<std::string>();
            }
            if (merge_kept(left, right, kept_texts))
                kept.push_back(m);
        }
        *merges = std::move(kept);
    }
    if (auto added = root.find("added_tokens"); added != root.end() && added->is_array())
        for (auto& t : *added)
            t["id"] = renumbered_or_refuse(renumber, t.at("id"), file,
                                           "added token \"" + t.value("content", std::string()) + "\"");
    if (auto post = root.find("post_processor"); post != root.end())
        renumber_post_processor(*post, renumber, file);
    if (auto padding = root.find("padding"); padding != root.end() && padding->is_object())
        if (auto pad = padding->find("pad_id"); pad != padding->end())
            *pad = renumbered_or_refuse(renumber, *pad, file, "padding.pad_id");
    return root.dump(2) + "\n";
}

std::string trimmed_merges_txt(const fs::path& dir, const OrderedJson& kept_vocab)
{
    const TextSet vocab = vocab_texts(kept_vocab);
    std::string out;
    tokenizer_impl::for_each_merges_line(
        read_file_bytes(dir / "merges.txt"), [&](std::string_view line, bool version) {
            const size_t space = line.find(' ');
            if (version ||
                (space != std::string_view::npos &&
                 merge_kept(std::string(line.substr(0, space)), std::string(line.substr(space + 1)), vocab)))
                out.append(line).push_back('\n');
        });
    return out;
}

std::string trimmed_tokenizer_config(const fs::path& file, const Renumbering& renumber)
{
    OrderedJson root = OrderedJson::parse(read_file_bytes(file));
    if (auto decoder = root.find("added_tokens_decoder"); decoder != root.end() && decoder->is_object()) {
        OrderedJson out = OrderedJson::object();
        std::vector<std::pair<int32_t, OrderedJson>> kept;
        for (auto& [key, token] : decoder->items()) {
            const bool numeric =
                !key.empty() && key.size() < 10 && key.find_first_not_of("0123456789") == std::string::npos;
            const int32_t id = numeric ? renumber(std::stol(key)) : -1;
            if (id < 0)
                throw InputError(file_message(file, "added_tokens_decoder names \"" + key +
                                                        "\", which is not a kept token id"));
            kept.emplace_back(id, token);
        }
        std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        for (auto& [id, token] : kept)
            out[std::to_string(id)] = std::move(token);
        *decoder = std::move(out);
    }
    return root.dump(2) + "\n";
}

std::string trimmed_sentencepiece(const fs::path& file, const Renumbering& renumber, size_t kept)
{
    const std::string bytes = read_file_bytes(file);
    std::string out;
    int64_t piece = 0;
    for (const ProtoField& f : scan_message(bytes, file)) {
        if (f.number == sp::model_pieces && f.wire == 2) {
            if (renumber(piece++) >= 0)
                out.append(f.whole);
        } else if (f.number == sp::model_trainer_spec && f.wire == 2) {
            std::string spec;
            for (const ProtoField& t : scan_message(f.payload, file)) {
                if (t.number == sp::trainer_vocab_size && t.wire == 0) {
                    append_varint(spec, uint64_t{sp::trainer_vocab_size} << 3);
                    append_varint(spec, kept);
                } else {
                    spec.append(t.whole);
                }
            }
            append_message_field(out, f.number, spec);
        } else {
            out.append(f.whole);
        }
    }
    return out;
}

} // namespace

const char* trim_family_name(TrimFamily family)
{
    switch (family) {
    case TrimFamily::ByteLevelBpe:
        return "byte-level BPE";
    case TrimFamily::WordPiece:
        return "WordPiece";
    case TrimFamily::SentencePieceBpe:
        return "SentencePiece BPE";
    }
    return "?";
}

TrimVocabulary read_trim_vocabulary(const fs::path& dir)
{
    const fs::path tokenizer_json = dir / "tokenizer.json";
    const bool gpt2_files = is_file(dir / "vocab.json") && is_file(dir / "merges.txt");
    TrimVocabulary v;
    try {
        if (is_file(tokenizer_json)) {
            const Json root = read_json_file(tokenizer_json);
            const std::string type =
                root.is_object() && root.contains("model") && root.at("model").is_object()
                    ? root.at("model").value("type", "BPE")
                    : "";
            if (type != "BPE" && type != "WordPiece" && !is_file(dir / "tokenizer.model"))
                throw InputError(
                    file_message(tokenizer_json, "model type \"" + type +
                                                     "\" is not a tokenizer family trim rewrites "
                                                     "(byte-level BPE, WordPiece, SentencePiece BPE)"));
            const bool wordpiece = type == "WordPiece";
            if (wordpiece) {
                v = wordpiece_json_vocabulary(root, tokenizer_json);
                v.files.push_back("tokenizer.json");
                if (is_file(dir / "vocab.txt"))
                    v.files.push_back("vocab.txt");
            } else {
                ByteLevelBpeSpec spec;
                try {
                    spec = parse_hf_tokenizer_json(root, tokenizer_json);
                } catch (const InputError& e) {
                    if (is_file(dir / "tokenizer.model"))
                        throw InputError(
                            file_message(tokenizer_json,
                                         "is not a byte-level BPE or WordPiece tokenizer.json, and trim does "
                                         "not rewrite it beside tokenizer.model (remove it to trim from "
                                         "tokenizer.model)"));
                    throw;
                }
                v = byte_level_vocabulary(spec);
                v.files.push_back("tokenizer.json");
                if (gpt2_files) {
                    v.files.push_back("vocab.json");
                    v.files.push_back("merges.txt");
                }
            }
        } else if (gpt2_files) {
            v = byte_level_vocabulary(gpt2_files_spec(dir / "vocab.json", dir / "merges.txt"));
            v.files = {"vocab.json", "merges.txt"};
        } else if (is_file(dir / "vocab.txt") && !is_file(dir / "tokenizer.model")) {
            v = wordpiece_txt_vocabulary(dir);
            v.files = {"vocab.txt"};
        } else if (is_file(dir / "tokenizer.model")) {
            v = sentencepiece_vocabulary(dir / "tokenizer.model");
            v.files = {"tokenizer.model"};
        } else {
            throw InputError(file_message(dir, "no tokenizer trim can rewrite (looked for tokenizer.json, "
                                               "vocab.json + merges.txt, vocab.txt, tokenizer.model)"));
        }
    } catch (const Json::exception& e) {
        throw InputError(file_message(dir, std::string("a tokenizer file has an unexpected structure (") +
                                               e.what() + ")"));
    }
    if (is_file(dir / "tokenizer_config.json"))
        v.files.push_back("tokenizer_config.json");
    if (is_file(dir / "added_tokens.json"))
        v.files.push_back("added_tokens.json");
    return v;
}

std::vector<int32_t> close_over_parts(const TrimVocabulary& vocab, const std::vector<int32_t>& seeds)
{
    std::vector<uint8_t> in(vocab.tokens.size(), 0);
    std::vector<int32_t> stack, out;
    for (int32_t id : seeds)
        if (id >= 0 && static_cast<size_t>(id) < in.size() && !in[static_cast<size_t>(id)]) {
            in[static_cast<size_t>(id)] = 1;
            stack.push_back(id);
        }
    while (!stack.empty()) {
        const int32_t id = stack.back();
        stack.pop_back();
        out.push_back(id);
        for (int32_t part : vocab.parts[static_cast<size_t>(id)])
            if (!in[static_cast<size_t>(part)]) {
                in[static_cast<size_t>(part)] = 1;
                stack.push_back(part);
            }
    }
    std::sort(out.begin(), out.end());
    return out;
}

int64_t token_units(const TrimVocabulary& vocab, int32_t id)
{
    return id >= 0 && static_cast<size_t>(id) < vocab.units.size() ? vocab.units[static_cast<size_t>(id)] : 1;
}

bool continues_word(const TrimVocabulary& vocab, int32_t id)
{
    return id >= 0 && static_cast<size_t>(id) < vocab.continuation.size() &&
           vocab.continuation[static_cast<size_t>(id)] != 0;
}

std::vector<std::pair<std::string, std::string>>
trimmed_tokenizer_files(const fs::path& dir, const TrimVocabulary& vocab, const std::vector<int32_t>& kept)
{
    const Renumbering renumber(kept, vocab.tokens.size());
    std::vector<std::pair<std::string, std::string>> files;
    try {
        for (const std::string& name : vocab.files) {
            const fs::path file = dir / name;
            if (name == "tokenizer.json") {
                files.emplace_back(name, trimmed_tokenizer_json(file, renumber));
            } else if (name == "vocab.json") {
                const OrderedJson trimmed =
                    trimmed_vocab_object(Json::parse(read_file_bytes(file)), renumber, file);
                files.emplace_back(name, trimmed.dump() + "\n");
                files.emplace_back("merges.txt", trimmed_merges_txt(dir, trimmed));
            } else if (name == "vocab.txt") {
                const auto lines = vocab_txt_lines(read_file_bytes(file));
                std::string out;
                for (size_t id = 0; id < lines.size(); ++id)
                    if (renumber(static_cast<int64_t>(id)) >= 0)
                        out.append(lines[id]).push_back('\n');
                files.emplace_back(name, std::move(out));
            } else if (name == "tokenizer.model") {
                files.emplace_back(name, trimmed_sentencepiece(file, renumber, kept.size()));
            } else if (name == "added_tokens.json") { // {content: id}
                files.emplace_back(
                    name,
                    trimmed_vocab_object(Json::parse(read_file_bytes(file)), renumber, file).dump(2) + "\n");
            } else if (name == "tokenizer_config.json") {
                files.emplace_back(name, trimmed_tokenizer_config(file, renumber));
            } // merges.txt is written with vocab.json
        }
    } catch (const OrderedJson::exception& e) {
        throw InputError(file_message(dir, std::string("a tokenizer file has an unexpected structure (") +
                                               e.what() + ")"));
    }
    return files;
}

} // namespace embedlab::tokenizer_impl
