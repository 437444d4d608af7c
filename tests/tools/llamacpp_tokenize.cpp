// llamacpp-tokenize: llama.cpp's own tokenizer (llama_tokenize, no BOS, special tokens not
// parsed) on the vocabulary of a GGUF: the oracle of tests/trim_llamacpp_test.cpp.
// Built by scripts/build-llamacpp-sampler.sh against ../shared/tools/llama.cpp/libllama.so.
//
//   llamacpp-tokenize MODEL.gguf TEXT_FILE...
//   -> one line per file: its token ids, space-separated
// Only the vocabulary is loaded (vocab_only); llama.cpp's log goes to stderr.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

std::vector<llama_token> tokenize(const llama_vocab* vocab, const std::string& text)
{
    std::vector<llama_token> ids(text.size() + 16);
    const auto length = static_cast<int32_t>(text.size());
    int32_t n = llama_tokenize(vocab, text.data(), length, ids.data(), static_cast<int32_t>(ids.size()),
                               /*add_special=*/false, /*parse_special=*/false);
    if (n < 0) { // the buffer was short by -n
        ids.resize(static_cast<size_t>(-n));
        n = llama_tokenize(vocab, text.data(), length, ids.data(), static_cast<int32_t>(ids.size()), false,
                           false);
    }
    ids.resize(static_cast<size_t>(n < 0 ? 0 : n));
    return ids;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc < 3) {
        std::fprintf(stderr, "usage: llamacpp-tokenize MODEL.gguf TEXT_FILE...\n");
        return 2;
    }
    llama_backend_init();
    llama_model_params params = llama_model_default_params();
    params.vocab_only = true;
    llama_model* model = llama_model_load_from_file(argv[1], params);
    if (!model) {
        std::fprintf(stderr, "llamacpp-tokenize: llama.cpp cannot load %s\n", argv[1]);
        return 1;
    }
    const llama_vocab* vocab = llama_model_get_vocab(model);
    for (int i = 2; i < argc; ++i) {
        std::ifstream in(argv[i], std::ios::binary);
        if (!in) {
            std::fprintf(stderr, "llamacpp-tokenize: cannot read %s\n", argv[i]);
            return 1;
        }
        std::stringstream text;
        text << in.rdbuf();
        const auto ids = tokenize(vocab, text.str());
        for (size_t k = 0; k < ids.size(); ++k)
            std::printf(k ? " %d" : "%d", ids[k]);
        std::printf("\n");
    }
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
