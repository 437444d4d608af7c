// GGUF container: header, metadata key/values (nested arrays), tensor table,
// tensor types and data bounds.
#include "fuzz_support.hpp"
#include "io/gguf_parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace embedlab;
    const auto path = fuzz::write_scratch("model.gguf", fuzz::as_text(data, size));
    fuzz::expect_input_errors([&] {
        const auto file = io::MappedFile::open(path);
        const io::GgufFile gguf = io::parse_gguf(*file);
        io::check_gguf_tensor_data(gguf, *file);
        for (const auto& [key, value] : gguf.metadata)
            for (uint64_t k = 0; k < value.count && k < 64 && value.raw; ++k)
                value.element(k);
    });
    return 0;
}
