// embedlab-cli embed [MODEL] --text FILE: one pooled embedding per line of FILE
// (encoder.hpp), as numbers on a line each or as JSON.
#include <cstdio>

#include "common.hpp"
#include "embedlab/encoder.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/non_finite.hpp"
#include "progress_printer.hpp"

namespace embedlab::cli {

namespace {

// One input per line; a final newline ends the last line, it adds no empty input.
std::vector<std::string> text_lines(const std::string& text, const std::string& file)
{
    std::vector<std::string> lines;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos)
            end = text.size();
        std::string line = text.substr(start, end - start);
        if (!line.empty() && line.back() == '\r')
            line.pop_back();
        lines.push_back(std::move(line));
        start = end + 1;
    }
    if (lines.empty())
        throw InputError(file + ": no lines to embed (the file is empty)");
    return lines;
}

} // namespace

int command_embed(const std::vector<std::string>& argv)
{
    Args args("embed", argv, {"--text", "--pooling", "--batch", "--tokenizer"},
              {"--normalize", "--json", "--quiet"});
    const std::string text_file = args.required("--text", "FILE");
    EmbedOptions options;
    if (const auto pooling = args.get("--pooling"); pooling && *pooling != "model") {
        options.pooling = parse_pooling(*pooling);
        if (!options.pooling)
            throw InputError("--pooling must be cls, mean, max or model (got '" + *pooling + "')");
    }
    options.normalize = args.has("--normalize");
    options.batch_size = args.get_int("--batch", 32, 1, 4096);
    const auto path = model_argument(args);
    LoadOptions load = load_options(args);
    load.need_tokenizer = true;
    auto lm = load_model(path, load);
    print_warnings(lm.files.warnings);
    const auto lines = text_lines(read_text_file(text_file), text_file);
    ProgressPrinter progress("embed", "lines", args.has("--quiet") || args.has("--json"));
    Embeddings e;
    try {
        e = embed_texts(*lm.model, *lm.tokenizer, lines, options, progress.callback());
    } catch (const NonFiniteError&) {
        throw; // the model's fault, not the text file's
    } catch (const InputError& error) {
        throw InputError(text_file + ": " + error.what());
    }
    const auto values = e.values.contiguous();
    const int64_t n = values.size(0), d = values.size(1);
    const float* p = values.data_ptr<float>();
    if (args.has("--json")) {
        Json rows = Json::array();
        for (int64_t i = 0; i < n; ++i)
            rows.push_back(std::vector<float>(p + i * d, p + (i + 1) * d));
        print_json({{"model", path.string()},
                    {"text", text_file},
                    {"pooling", pooling_name(e.pooling)},
                    {"normalized", e.normalized},
                    {"truncated", e.truncated},
                    {"dim", d},
                    {"count", n},
                    {"embeddings", rows}});
        return 0;
    }
    for (int64_t i = 0; i < n; ++i) {
        std::string line;
        char buf[32];
        for (int64_t j = 0; j < d; ++j) {
            std::snprintf(buf, sizeof buf, j ? " %.7g" : "%.7g", static_cast<double>(p[i * d + j]));
            line += buf;
        }
        std::printf("%s\n", line.c_str());
    }
    return 0;
}

} // namespace embedlab::cli
