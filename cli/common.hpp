// Pieces every command shares: model argument resolution, JSON output.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.hpp"
#include "embedlab/error.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/model.hpp"
#include "embedlab/resources.hpp"

namespace embedlab::cli {

using Json = nlohmann::ordered_json;

// MODEL positional, or the bundled default model when none is given.
inline std::filesystem::path model_argument(const Args& args)
{
    auto m = args.single_positional("MODEL");
    return m ? std::filesystem::path(*m) : default_model_path();
}

inline LoadOptions load_options(const Args& args)
{
    LoadOptions o;
    if (auto t = args.get("--tokenizer"))
        o.tokenizer = *t;
    o.verify = !args.has("--no-verify"); // compressed directories: sha256 of the tensors
    return o;
}

// The table of an uncompressed model, from the model itself (not its tensor name).
inline const torch::Tensor& dense_token_table(const LanguageModel& model, const std::string& label)
{
    const auto* dense = dense_table(&model.token_embedding());
    if (!dense)
        throw InputError(label + ": the token embedding is already compressed (" +
                         model.token_embedding().kind() + "); use the original model");
    return *dense;
}

// The value of `option` in raw argv ("--method x" or "--method=x"), before the
// strict parse: commands branch on it to their method's option set.
inline std::string peek_option(const std::vector<std::string>& argv, const std::string& option)
{
    for (size_t i = 0; i < argv.size(); ++i) {
        if (argv[i] == option && i + 1 < argv.size())
            return argv[i + 1];
        if (argv[i].rfind(option + "=", 0) == 0)
            return argv[i].substr(option.size() + 1);
    }
    return {};
}

// The files and directories a command's input options name: an input is never an output.
inline std::vector<std::filesystem::path> input_paths(const Args& args,
                                                      std::vector<std::filesystem::path> more = {})
{
    for (const char* option :
         {"--tokenizer", "--freq-text", "--eval-text", "--calib-text", "--train-text", "--task-data",
          "--coverage-data", "--data", "--text", "--ids", "--reference", "--scores", "--embedding"})
        if (const auto v = args.get(option))
            more.emplace_back(*v);
    return more;
}

// Fail on the output location before any work: DIR exists without --force, is
// (or holds) one of `inputs`, holds anything EmbedLab did not write, or its
// parent cannot be created.
inline void prepare_output_directory(const std::string& out, bool force,
                                     const std::vector<std::filesystem::path>& inputs = {})
{
    if (out.empty())
        throw InputError("the output directory name is empty");
    // --force replaces only an empty directory or what EmbedLab wrote.
    check_replaceable_directory(out, force, "use --force to replace it", inputs);
    create_parent_directories(out);
}

inline void print_json(const Json& j)
{
    std::printf("%s\n", j.dump(1).c_str());
}

Json parameter_json(const ParameterBreakdown& p);
void print_warnings(const std::vector<std::string>& warnings);

int command_inspect(const std::vector<std::string>& argv);
int command_eval(const std::vector<std::string>& argv);
int command_task(const std::vector<std::string>& argv); // command_task.cpp
int command_tokenize(const std::vector<std::string>& argv);
int command_embed(const std::vector<std::string>& argv);
int command_finetune_classifier(const std::vector<std::string>& argv);
int command_generate(const std::vector<std::string>& argv); // command_generate.cpp
int command_export(const std::vector<std::string>& argv);
int command_bench(const std::vector<std::string>& argv);
int command_account(const std::vector<std::string>& argv);
int command_compress(const std::vector<std::string>& argv);
int command_trim(const std::vector<std::string>& argv); // command_trim.cpp
int command_sweep(const std::vector<std::string>& argv);
int command_neighbours(const std::vector<std::string>& argv);
int command_fourier_map(const std::vector<std::string>& argv);
int command_importance(const std::vector<std::string>& argv);
int command_allocate(const std::vector<std::string>& argv);
int command_worker(const std::vector<std::string>& argv); // command_worker.cpp
int command_remote(const std::vector<std::string>& argv); // command_remote.cpp
// sweep-status DIR, sweep-collect DIR: a Slurm sweep (command_sweep_slurm.cpp)
int command_sweep_status(const std::vector<std::string>& argv);
int command_sweep_collect(const std::vector<std::string>& argv);
int command_finetune(const std::vector<std::string>& argv);
int command_synth(const std::vector<std::string>& argv);  // command_synth.cpp
int command_train(const std::vector<std::string>& argv);  // command_train.cpp
int bench_train(const std::vector<std::string>& argv);    // bench train (command_finetune.cpp)
int bench_scale(const std::vector<std::string>& argv);    // bench scale (command_bench_scale.cpp)
int bench_generate(const std::vector<std::string>& argv); // bench generate (command_bench_generate.cpp)
int compress_flat(const std::vector<std::string>& argv);  // compress --method flat
int sweep_flat(const std::vector<std::string>& argv);     // sweep --method flat
// figure, demo: run embedlab-figure (the GUI build) with the same arguments.
int command_figure(const std::string& command, const std::vector<std::string>& argv);

} // namespace embedlab::cli
