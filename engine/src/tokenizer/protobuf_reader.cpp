#include "tokenizer/protobuf_reader.hpp"

#include <cstring>
#include <string>

#include "embedlab/error.hpp"
#include "tokenizer/text_util.hpp"

namespace embedlab::tokenizer_impl {

void ProtobufReader::corrupt(const char* what) const
{
    throw InputError(file_message(file_, std::string("corrupt or truncated protobuf (") + what + " at byte " +
                                             std::to_string(pos_) + ")"));
}

uint64_t ProtobufReader::read_varint()
{
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (pos_ >= bytes_.size())
            corrupt("varint runs past the end");
        const auto byte = static_cast<unsigned char>(bytes_[pos_++]);
        value |= static_cast<uint64_t>(byte & 0x7F) << shift;
        if (byte < 0x80)
            return value;
    }
    corrupt("varint longer than 10 bytes");
}

void ProtobufReader::next_field(uint32_t& field, WireType& type)
{
    const uint64_t key = read_varint();
    field = static_cast<uint32_t>(key >> 3);
    type = static_cast<WireType>(key & 7);
}

float ProtobufReader::read_float()
{
    if (bytes_.size() - pos_ < 4)
        corrupt("float runs past the end");
    float value;
    std::memcpy(&value, bytes_.data() + pos_, 4);
    pos_ += 4;
    return value;
}

std::string_view ProtobufReader::read_bytes()
{
    const uint64_t length = read_varint();
    if (length > bytes_.size() - pos_)
        corrupt("length runs past the end");
    const std::string_view out = bytes_.substr(pos_, static_cast<size_t>(length));
    pos_ += static_cast<size_t>(length);
    return out;
}

void ProtobufReader::skip(WireType type)
{
    switch (type) {
    case varint:
        read_varint();
        return;
    case fixed64:
        if (bytes_.size() - pos_ < 8)
            corrupt("fixed64 runs past the end");
        pos_ += 8;
        return;
    case length_delimited:
        read_bytes();
        return;
    case fixed32:
        read_float();
        return;
    }
    corrupt("unsupported wire type");
}

} // namespace embedlab::tokenizer_impl
