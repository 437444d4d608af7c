// Pieces every command shares: model argument resolution, JSON output.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.hpp"
#include "embedlab/error.hpp"
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
    return o;
}

// The table of an uncompressed model, from the model itself (not its tensor name).
inline const torch::Tensor& dense_token_table(const LanguageModel& model, const std::string& label)
{
    const auto* dense = dynamic_cast<const DenseTokenEmbedding*>(&model.token_embedding());
    if (!dense)
        throw InputError(label + ": the token embedding is already compressed (" +
                         model.token_embedding().kind() + "); use the original model");
    return dense->table();
}

inline void print_json(const Json& j)
{
    std::printf("%s\n", j.dump(1).c_str());
}

Json parameter_json(const ParameterBreakdown& p);
void print_warnings(const std::vector<std::string>& warnings);

int command_inspect(const std::vector<std::string>& argv);
int command_eval(const std::vector<std::string>& argv);
int command_tokenize(const std::vector<std::string>& argv);
int command_bench(const std::vector<std::string>& argv);
int command_account(const std::vector<std::string>& argv);
int command_compress(const std::vector<std::string>& argv);
int command_sweep(const std::vector<std::string>& argv);
int command_neighbours(const std::vector<std::string>& argv);

} // namespace embedlab::cli
