// SentencePiece tokenizer.model reader. The engine reads the ModelProto
// itself instead of linking libsentencepiece: Debian's libsentencepiece
// exports a private protobuf copy that clashes with libtorch's libprotobuf
// and crashes any program that loads both.
#include "embedlab/error.hpp"
#include "embedlab/tokenizer.hpp"
#include "tokenizer/protobuf_reader.hpp"
#include "tokenizer/scored_vocab.hpp"
#include "tokenizer/text_util.hpp"

namespace embedlab {
namespace {

using tokenizer_impl::file_message;
using tokenizer_impl::ProtobufReader;

// Field numbers of sentencepiece_model.proto.
namespace field {
constexpr uint32_t model_pieces = 1, model_trainer_spec = 2, model_normalizer_spec = 3;
constexpr uint32_t piece_text = 1, piece_score = 2, piece_type = 3;
constexpr uint32_t trainer_model_type = 3, trainer_whitespace_as_suffix = 24, trainer_byte_fallback = 35,
                   trainer_unk_surface = 44, trainer_unk_piece = 45, trainer_bos_piece = 46,
                   trainer_eos_piece = 47;
constexpr uint32_t normalizer_name = 1, normalizer_charsmap = 2, normalizer_dummy_prefix = 3,
                   normalizer_remove_extra_whitespaces = 4, normalizer_escape_whitespaces = 5;
} // namespace field

constexpr uint64_t model_type_unigram = 1, model_type_bpe = 2;

struct SentencePieceModel {
    ScoredVocab vocab;
    tokenizer_impl::ScoredEncoderOptions options;
    uint64_t model_type = model_type_unigram; // the proto's default
    std::string normalizer_name;
    bool has_charsmap = false;
    std::string unk_piece = "<unk>", bos_piece = "<s>", eos_piece = "</s>";
};

// Every field of a message in order: read(r, field, wire type) reads the value of
// a field it knows and returns true; any other field is skipped.
template <class Read> void read_fields(std::string_view bytes, const std::filesystem::path& file, Read&& read)
{
    ProtobufReader r(bytes, file);
    while (!r.done()) {
        uint32_t f;
        ProtobufReader::WireType w;
        r.next_field(f, w);
        if (!read(r, f, w))
            r.skip(w);
    }
}

void read_piece(std::string_view bytes, const std::filesystem::path& file, SentencePieceModel& m)
{
    std::string text;
    float score = 0;
    int32_t type = tokenizer_impl::type_normal;
    read_fields(bytes, file, [&](ProtobufReader& r, uint32_t f, ProtobufReader::WireType w) {
        if (f == field::piece_text && w == ProtobufReader::length_delimited)
            text = r.read_bytes();
        else if (f == field::piece_score && w == ProtobufReader::fixed32)
            score = r.read_float();
        else if (f == field::piece_type && w == ProtobufReader::varint)
            type = static_cast<int32_t>(r.read_varint());
        else
            return false;
        return true;
    });
    m.vocab.tokens.push_back(std::move(text));
    m.vocab.scores.push_back(score);
    m.vocab.types.push_back(type);
}

void read_trainer_spec(std::string_view bytes, const std::filesystem::path& file, SentencePieceModel& m)
{
    read_fields(bytes, file, [&](ProtobufReader& r, uint32_t f, ProtobufReader::WireType w) {
        if (w == ProtobufReader::varint && f == field::trainer_model_type)
            m.model_type = r.read_varint();
        else if (w == ProtobufReader::varint && f == field::trainer_byte_fallback)
            m.options.byte_fallback = r.read_varint() != 0;
        else if (w == ProtobufReader::varint && f == field::trainer_whitespace_as_suffix)
            m.options.whitespace_as_suffix = r.read_varint() != 0;
        else if (w == ProtobufReader::length_delimited && f == field::trainer_unk_surface)
            m.options.unk_surface = r.read_bytes();
        else if (w == ProtobufReader::length_delimited && f == field::trainer_unk_piece)
            m.unk_piece = r.read_bytes();
        else if (w == ProtobufReader::length_delimited && f == field::trainer_bos_piece)
            m.bos_piece = r.read_bytes();
        else if (w == ProtobufReader::length_delimited && f == field::trainer_eos_piece)
            m.eos_piece = r.read_bytes();
        else
            return false;
        return true;
    });
}

void read_normalizer_spec(std::string_view bytes, const std::filesystem::path& file, SentencePieceModel& m)
{
    read_fields(bytes, file, [&](ProtobufReader& r, uint32_t f, ProtobufReader::WireType w) {
        if (w == ProtobufReader::length_delimited && f == field::normalizer_name)
            m.normalizer_name = r.read_bytes();
        else if (w == ProtobufReader::length_delimited && f == field::normalizer_charsmap)
            m.has_charsmap = !r.read_bytes().empty();
        else if (w == ProtobufReader::varint && f == field::normalizer_dummy_prefix)
            m.vocab.add_dummy_prefix = r.read_varint() != 0;
        else if (w == ProtobufReader::varint && f == field::normalizer_remove_extra_whitespaces)
            m.options.remove_extra_whitespaces = r.read_varint() != 0;
        else if (w == ProtobufReader::varint && f == field::normalizer_escape_whitespaces)
            m.options.escape_whitespaces = r.read_varint() != 0;
        else
            return false;
        return true;
    });
}

// The id of `piece` when it has the wanted type, else -1 (libsentencepiece's bos_id() etc.).
int32_t id_of_typed_piece(const ScoredVocab& vocab, const std::string& piece, int32_t type)
{
    for (size_t i = 0; i < vocab.tokens.size(); ++i)
        if (vocab.tokens[i] == piece && vocab.types[i] == type)
            return static_cast<int32_t>(i);
    return -1;
}

} // namespace

std::unique_ptr<Tokenizer> load_sentencepiece(const std::filesystem::path& model_file)
{
    const std::string bytes = tokenizer_impl::read_file_bytes(model_file);
    SentencePieceModel m;
    // NormalizerSpec defaults (proto2 [default = true]).
    m.vocab.add_dummy_prefix = true;
    m.options.remove_extra_whitespaces = true;
    m.options.escape_whitespaces = true;
    m.options.byte_fallback = false;
    m.options.style = tokenizer_impl::ScoredEncoderOptions::Style::sentencepiece;

    read_fields(bytes, model_file, [&](ProtobufReader& r, uint32_t f, ProtobufReader::WireType w) {
        if (w != ProtobufReader::length_delimited)
            return false;
        const std::string_view sub = r.read_bytes();
        if (f == field::model_pieces)
            read_piece(sub, model_file, m);
        else if (f == field::model_trainer_spec)
            read_trainer_spec(sub, model_file, m);
        else if (f == field::model_normalizer_spec)
            read_normalizer_spec(sub, model_file, m);
        return true;
    });

    if (m.vocab.tokens.empty())
        throw InputError(file_message(model_file, "not a SentencePiece model (no pieces)"));
    if (m.model_type != model_type_bpe)
        throw InputError(file_message(
            model_file, std::string("SentencePiece model type ") +
                            (m.model_type == model_type_unigram ? "Unigram" : std::to_string(m.model_type)) +
                            " is not supported (only BPE, as in Llama models)"));
    if (m.has_charsmap)
        throw InputError(file_message(model_file, "SentencePiece normalizer \"" + m.normalizer_name +
                                                      "\" with a character map is not supported "
                                                      "(only the identity normalizer)"));

    m.vocab.unk_id = id_of_typed_piece(m.vocab, m.unk_piece, tokenizer_impl::type_unknown);
    m.vocab.bos_id = id_of_typed_piece(m.vocab, m.bos_piece, tokenizer_impl::type_control);
    m.vocab.eos_id = id_of_typed_piece(m.vocab, m.eos_piece, tokenizer_impl::type_control);
    return std::make_unique<tokenizer_impl::ScoredVocabTokenizer>(std::move(m.vocab), "sentencepiece",
                                                                  model_file.string(), std::move(m.options));
}

} // namespace embedlab
