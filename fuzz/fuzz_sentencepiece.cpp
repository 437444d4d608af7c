// SentencePiece tokenizer.model: the protobuf reader, pieces, scores, types.
#include "embedlab/tokenizer.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace embedlab;
    const auto file = fuzz::write_scratch("tokenizer.model", fuzz::as_text(data, size));
    fuzz::expect_input_errors([&] { fuzz::encode_and_decode_sample(*load_sentencepiece(file)); });
    return 0;
}
