// Models whose weights are finite but whose forward pass overflows float32 (issue 57
// item 3): a tiny llama with down_proj scaled to 3e38, and copies of the encoder
// fixtures of tests/data/encoders with one weight scaled so.
#pragma once

#include <filesystem>
#include <string>

#include "embedlab/file_output.hpp"
#include "embedlab/model_files.hpp"
#include "test_paths.hpp"
#include "tiny_models.hpp"

namespace embedlab::test {

// `weights` with each tensor whose name contains `part` scaled so that its largest
// |value| is 3e38: every weight finite, their products not.
inline WeightMap overflowing(WeightMap weights, const std::string& part)
{
    for (auto& [name, t] : weights)
        if (name.find(part) != std::string::npos)
            t = t / t.abs().max() * 3e38; // 3e38 / max itself may be beyond float's range
    return weights;
}

inline std::filesystem::path encoder_fixture(const std::string& name)
{
    return std::filesystem::path(EMBEDLAB_SOURCE_DIR) / "tests" / "data" / "encoders" / name;
}

// A copy of the encoder fixture `name` in `dir` with the tensors naming `part` overflowing.
inline std::filesystem::path write_overflowing_encoder(const std::filesystem::path& dir,
                                                       const std::string& name, const std::string& part)
{
    namespace fs = std::filesystem;
    fs::copy(encoder_fixture(name), dir, fs::copy_options::recursive);
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (auto& [tensor_name, t] : overflowing(load_safetensors(dir / "model.safetensors"), part))
        tensors.emplace_back(tensor_name, t.clone());
    fs::remove(dir / "model.safetensors");
    write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
    return dir;
}

// A tiny llama (tiny_config) with the vocabulary of bert-cls's WordPiece tokenizer,
// whose files are copied beside it; `part` names the weights made to overflow (none
// when empty).
inline std::filesystem::path write_tiny_llama_with_tokenizer(const std::filesystem::path& dir,
                                                             const std::string& part)
{
    namespace fs = std::filesystem;
    auto c = tiny_config(Architecture::Llama);
    c.vocab_size = 2000;
    auto weights = random_weights(c);
    write_tiny_hf_model(dir, c, part.empty() ? weights : overflowing(weights, part));
    for (const char* file :
         {"tokenizer.json", "vocab.txt", "special_tokens_map.json", "tokenizer_config.json"})
        fs::copy_file(encoder_fixture("bert-cls") / file, dir / file, fs::copy_options::overwrite_existing);
    return dir;
}

} // namespace embedlab::test
