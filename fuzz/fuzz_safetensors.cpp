// safetensors header: 8-byte length, JSON table, dtypes, shapes against byte
// ranges, offsets against the file size.
#include "embedlab/format_parsers.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace embedlab;
    fuzz::expect_input_errors([&] { parse_safetensors_header(data, size, "fuzz.safetensors"); });
    return 0;
}
