// Encoding arbitrary text with the bundled model's GPT-2 tokenizer. Byte-level BPE
// covers every byte sequence, so decode(encode(x)) == x must hold exactly and
// every id must lie inside the vocabulary.
#include "embedlab/tokenizer.hpp"
#include "fuzz_support.hpp"

namespace {
std::unique_ptr<embedlab::Tokenizer> tokenizer;
}

// Loading the 1.5 MB tokenizer.json takes seconds under ASan: not per input.
extern "C" int LLVMFuzzerInitialize(int*, char***)
{
    tokenizer = embedlab::load_tokenizer_from_directory(std::filesystem::path(EMBEDLAB_SOURCE_DIR) /
                                                        "resources/models/tinygpt2-f16");
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace embedlab;
    const auto text = fuzz::as_text(data, size);
    const auto ids = tokenizer->encode(text);
    for (int32_t id : ids)
        if (id < 0 || id >= tokenizer->vocab_size())
            std::abort();
    if (tokenizer->decode(ids) != text)
        std::abort();
    return 0;
}
