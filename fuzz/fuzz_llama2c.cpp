// llama2.c checkpoints: the 7-int header and the file size it implies.
#include "fuzz_support.hpp"
#include "io/llama2c_header.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace embedlab;
    const auto path = fuzz::write_scratch("model.bin", fuzz::as_text(data, size));
    fuzz::expect_input_errors([&] { io::read_llama2c_header(*io::MappedFile::open(path)); });
    return 0;
}
