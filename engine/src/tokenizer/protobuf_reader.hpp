// A minimal reader of the protobuf wire format, enough for SentencePiece's
// ModelProto: bounds-checked, so a corrupt file gives an InputError.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

namespace embedlab::tokenizer_impl {

class ProtobufReader {
public:
    enum WireType : uint32_t { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

    ProtobufReader(std::string_view bytes, const std::filesystem::path& file) : bytes_(bytes), file_(file) {}

    bool done() const { return pos_ >= bytes_.size(); }
    // Reads the next field's key; the value must then be read or skipped.
    void next_field(uint32_t& field, WireType& type);
    uint64_t read_varint();
    float read_float();
    std::string_view read_bytes(); // length-delimited: strings and sub-messages
    void skip(WireType type);

private:
    [[noreturn]] void corrupt(const char* what) const;

    std::string_view bytes_;
    const std::filesystem::path& file_;
    size_t pos_ = 0;
};

} // namespace embedlab::tokenizer_impl
