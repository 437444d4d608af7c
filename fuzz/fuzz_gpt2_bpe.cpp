// GPT-2 vocab.json + merges.txt. The input holds both, split at its first NUL byte.
#include "embedlab/tokenizer.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace embedlab;
    const auto text = fuzz::as_text(data, size);
    const size_t cut = std::min(text.find('\0'), text.size());
    const auto vocab = fuzz::write_scratch("vocab.json", text.substr(0, cut));
    const auto merges = fuzz::write_scratch("merges.txt", cut < text.size() ? text.substr(cut + 1) : "");
    fuzz::expect_input_errors([&] { fuzz::encode_and_decode_sample(*load_gpt2_bpe(vocab, merges)); });
    return 0;
}
