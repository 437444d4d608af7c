// The shared models every architecture test runs (tinyllama, tinygpt2 and the seven zoo
// fixtures of ../shared/models), and the held-out ids they read: one list for the
// generation and export tests.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "embedlab/eval.hpp"
#include "embedlab/model.hpp"
#include "test_support.hpp"

namespace embedlab::test {

struct SharedModel {
    std::string name;
    std::filesystem::path dir; // under ../shared
};
inline void PrintTo(const SharedModel& m, std::ostream* os)
{
    *os << m.name;
}

inline std::vector<SharedModel> shared_models()
{
    std::vector<SharedModel> models{{"tinyllama", "models/tinyllama"}, {"tinygpt2", "models/tinygpt2"}};
    for (const char* z :
         {"smollm2-tied", "llama32-ropescaled", "qwen2", "qwen3", "gemma2", "phi3", "gptneox"})
        models.push_back({z, std::filesystem::path("models/zoo") / z});
    return models;
}

// A gtest parameter name: the model's name with '-' as '_'.
inline std::string shared_model_name(const SharedModel& m)
{
    std::string n = m.name;
    for (char& c : n)
        if (c == '-')
            c = '_';
    return n;
}

// The first n ids of the held-out token file (tinyllama's vocabulary, which every
// zoo fixture shares; tinygpt2 reads its own tokenisation of the same text).
inline std::vector<int32_t> heldout_ids(const LoadedModel& lm, size_t n)
{
    std::vector<int32_t> ids;
    if (lm.model->config().arch == Architecture::GPT2)
        ids = lm.tokenizer->encode(read_text_file(std::filesystem::path(EMBEDLAB_SOURCE_DIR) /
                                                  "resources/texts/tinystories-heldout.txt"));
    else
        ids = read_ids_file(shared_dir() / "reference" / "tokens-tinyllama-tinystories-heldout.json");
    ids.resize(n);
    return ids;
}

} // namespace embedlab::test
