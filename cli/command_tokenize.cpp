#include "common.hpp"
#include "embedlab/eval.hpp"

namespace embedlab::cli {

int command_tokenize(const std::vector<std::string>& argv)
{
    Args args("tokenize", argv, {"--text", "--tokenizer"}, {"--json", "--quiet"});
    const std::string text_file = args.required("--text", "FILE");
    const auto path = model_argument(args);
    // Only the tokenizer is needed, but its kind and vocabulary come with the model files.
    auto lm = load_model(path, load_options(args));
    const auto ids = lm.tokenizer->encode(read_text_file(text_file));
    if (args.has("--json")) {
        print_json({{"model", path.string()},
                    {"text", text_file},
                    {"tokenizer", lm.tokenizer->kind()},
                    {"count", ids.size()},
                    {"ids", ids}});
        return 0;
    }
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i)
            line += ' ';
        line += std::to_string(ids[i]);
    }
    std::printf("%s\n", line.c_str());
    return 0;
}

} // namespace embedlab::cli
