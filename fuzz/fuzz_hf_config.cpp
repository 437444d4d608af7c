// Hugging Face config.json -> ModelConfig (types, ranges, head divisibility).
#include "embedlab/format_parsers.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace embedlab;
    fuzz::expect_input_errors(
        [&] { parse_hf_config(std::string(fuzz::as_text(data, size)), "config.json"); });
    return 0;
}
