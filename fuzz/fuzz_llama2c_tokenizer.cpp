// llama2.c tokenizer.bin. The first two input bytes choose the vocabulary size the
// checkpoint would announce (1..65536); the rest is the file.
#include "embedlab/tokenizer.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace embedlab;
    if (size < 2)
        return 0;
    const int64_t vocab_size = 1 + (data[0] | (data[1] << 8));
    const auto file = fuzz::write_scratch("tokenizer.bin", fuzz::as_text(data + 2, size - 2));
    fuzz::expect_input_errors(
        [&] { fuzz::encode_and_decode_sample(*load_llama2c_tokenizer(file, vocab_size)); });
    return 0;
}
