// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the
// other 68 bytes map to U+0100.. in byte order, so every token is printable text.
#include <array>

#include "tokenizer/byte_level_bpe.hpp"

namespace embedlab::tokenizer_impl {
namespace {

bool stands_for_itself(int byte)
{
    return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

struct ByteTables {
    std::array<int32_t, 256> to_code_point{};
    std::array<int16_t, 512> from_code_point{}; // every mapped code point is < 0x144

    ByteTables()
    {
        from_code_point.fill(-1);
        int32_t next_extra = 256;
        for (int byte = 0; byte < 256; ++byte) {
            const int32_t cp = stands_for_itself(byte) ? byte : next_extra++;
            to_code_point[byte] = cp;
            from_code_point[cp] = static_cast<int16_t>(byte);
        }
    }
};

const ByteTables& tables()
{
    static const ByteTables t;
    return t;
}

} // namespace

int32_t byte_to_code_point(unsigned char byte)
{
    return tables().to_code_point[byte];
}

int byte_from_code_point(int32_t cp)
{
    if (cp < 0 || cp >= 512)
        return -1;
    return tables().from_code_point[cp];
}

} // namespace embedlab::tokenizer_impl
