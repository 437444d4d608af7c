#include <charconv>

#include "common.hpp"
#include "embedlab/eval.hpp"

namespace embedlab::cli {

namespace {

// Writes the ids as they are formatted, through a small buffer (issue 57 item 9: a
// line of every id, or a JSON array of them, cost 13 and 72 bytes per input byte).
class IdWriter {
public:
    void text(std::string_view s)
    {
        buffer_.append(s);
        if (buffer_.size() >= kFlush)
            flush();
    }
    void id(int32_t v)
    {
        char digits[16];
        const auto r = std::to_chars(digits, digits + sizeof digits, v);
        text(std::string_view(digits, static_cast<size_t>(r.ptr - digits)));
    }
    void flush()
    {
        if (!buffer_.empty() && std::fwrite(buffer_.data(), 1, buffer_.size(), stdout) != buffer_.size())
            throw std::runtime_error("cannot write the ids to the standard output");
        buffer_.clear();
    }

private:
    static constexpr size_t kFlush = size_t{1} << 16;
    std::string buffer_;
};

} // namespace

int command_tokenize(const std::vector<std::string>& argv)
{
    Args args("tokenize", argv, {"--text", "--tokenizer"}, {"--json", "--quiet"});
    const std::string text_file = args.required("--text", "FILE");
    const auto path = model_argument(args);
    // Only the tokenizer is needed, but its kind and vocabulary come with the model files:
    // their shapes, not their values (inspect's way; the Qwen2.5-0.5B f16 shape's tokenize
    // peaked at 2.1 GB with the weights widened to float32).
    auto options = load_options(args);
    options.values = WeightValues::ShapesOnly;
    auto lm = load_model(path, options);
    const auto ids = lm.tokenizer->encode(read_text_file(text_file));
    IdWriter out;
    if (args.has("--json")) {
        // As print_json's dump(1) prints it, without a JSON array of every id.
        std::string head = Json{
            {"model", path.string()},
            {"text", text_file},
            {"tokenizer", lm.tokenizer->kind()},
            {"count",
             ids.size()}}.dump(1);
        head.pop_back(); // "\n}"
        head.pop_back();
        out.text(head);
        out.text(ids.empty() ? ",\n \"ids\": []" : ",\n \"ids\": [\n  ");
        for (size_t i = 0; i < ids.size(); ++i) {
            if (i)
                out.text(",\n  ");
            out.id(ids[i]);
        }
        out.text(ids.empty() ? "\n}\n" : "\n ]\n}\n");
        out.flush();
        return 0;
    }
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i)
            out.text(" ");
        out.id(ids[i]);
    }
    out.text("\n");
    out.flush();
    return 0;
}

} // namespace embedlab::cli
