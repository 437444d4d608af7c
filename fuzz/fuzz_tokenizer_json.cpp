// Hugging Face tokenizer.json (BPE + ByteLevel): vocab, merges, added tokens.
#include "embedlab/tokenizer.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace embedlab;
    const auto file = fuzz::write_scratch("tokenizer.json", fuzz::as_text(data, size));
    fuzz::expect_input_errors([&] {
        auto tokenizer = load_hf_tokenizer_json(file);
        for (int32_t id : fuzz::encode_and_decode_sample(*tokenizer))
            tokenizer->token_text(id);
    });
    return 0;
}
