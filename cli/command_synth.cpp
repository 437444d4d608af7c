// embedlab-cli synth --like NAME --out DIR [--dtype f32|f16|bf16] [--seed S] [--layers N] [--force]
#include <chrono>

#include "common.hpp"
#include "embedlab/json_members.hpp"
#include "embedlab/synth_model.hpp"
#include "progress_printer.hpp"

namespace embedlab::cli {

int command_synth(const std::vector<std::string>& argv)
{
    Args args("synth", argv, {"--like", "--out", "--dtype", "--seed", "--layers"},
              {"--force", "--json", "--quiet"});
    if (!args.positional().empty())
        throw InputError("synth: takes no MODEL argument ('" + args.positional().front() +
                         "'); name the model to imitate with --like");
    std::string known;
    for (const auto& n : synth_model_names())
        known += (known.empty() ? "" : ", ") + n;
    SynthOptions o;
    const std::string like = args.required("--like", "NAME", known);
    o.like = like;
    const std::string out = args.required("--out", "DIR");
    o.out = out;
    o.dtype = args.get("--dtype").value_or("");
    o.seed = static_cast<uint64_t>(args.get_int("--seed", 1, 0, INT64_MAX));
    if (args.get("--layers"))
        o.layers = args.get_int("--layers", 0, 1, 1024);
    o.overwrite = args.has("--force");

    const auto t0 = std::chrono::steady_clock::now();
    SynthReport r;
    {
        ProgressPrinter bar("synth", "MiB", args.has("--quiet") || args.has("--json"));
        auto megabytes = bar.callback();
        r = synth_model(o, [&](int64_t done, int64_t total) { return megabytes(done >> 20, total >> 20); });
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (args.has("--json")) {
        Json j{{"out", r.path.string()}};
        EMBEDLAB_JSON_MEMBERS(j, r, like, model_type, dtype);
        j["seed"] = o.seed;
        EMBEDLAB_JSON_MEMBERS(j, r, layers, tensors, parameters, bytes);
        j["seconds"] = seconds;
        j["tokenizer_vocab_size"] = r.tokenizer_vocab;
        EMBEDLAB_JSON_MEMBERS(j, r, tokenizer, notes);
        print_json(j);
        return 0;
    }
    std::printf("wrote %s: %s (%s, %lld layers, %s), %lld parameters, %.1f MB, %.1f s\n", r.path.c_str(),
                r.like.c_str(), r.model_type.c_str(), (long long)r.layers, r.dtype.c_str(),
                (long long)r.parameters, static_cast<double>(r.bytes) / 1e6, seconds);
    std::printf("  tokenizer: %s\n", r.tokenizer.c_str());
    for (const auto& n : r.notes)
        std::printf("  note: %s\n", n.c_str());
    return 0;
}

} // namespace embedlab::cli
