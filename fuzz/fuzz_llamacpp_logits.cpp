// llama-perplexity's --kl-divergence-base file: header, sizes, tokens, every row.
#include "fuzz_support.hpp"
#include "io/llamacpp_logits.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace embedlab;
    const auto path = fuzz::write_scratch("base.kld", fuzz::as_text(data, size));
    fuzz::expect_input_errors([&] {
        const auto logits = io::parse_llamacpp_logits(io::MappedFile::open(path));
        const auto row = logits.row(logits.n_chunk - 1, logits.scored_per_chunk() - 1);
        (void)row.log_prob(logits.n_vocab - 1);
    });
    return 0;
}
