// The Fourier token map (fourier_map.hpp).
#include "embedlab/fourier_map.hpp"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "embedlab/tokenizer.hpp"

namespace embedlab {

namespace {

std::shared_ptr<const FourierTokenEmbedding> fourier_of(const LanguageModel& model)
{
    return std::dynamic_pointer_cast<const FourierTokenEmbedding>(model.shared_token_embedding());
}

// Rows [a, b) of a dense model's table; undefined when the table is not dense.
torch::Tensor dense_rows(const LanguageModel& model, int64_t a, int64_t b)
{
    const auto* dense = dense_table(&model.token_embedding());
    return dense ? dense->narrow(0, a, b - a).clone() : torch::Tensor();
}

} // namespace

std::vector<double> neighbour_cosines(const torch::Tensor& rows)
{
    if (rows.size(0) < 2)
        return {};
    const auto x = rows.to(torch::kDouble);
    const auto a = x.narrow(0, 0, x.size(0) - 1), b = x.narrow(0, 1, x.size(0) - 1);
    const auto na = a.norm(2, 1), nb = b.norm(2, 1);
    auto c = (a * b).sum(1) / (na * nb);
    c = torch::where((na == 0) | (nb == 0), torch::where(na == nb, 1.0, 0.0).to(torch::kDouble), c)
            .contiguous();
    return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

FourierTokenMap fourier_token_map(const LoadedModel& lm, const std::string& path,
                                  const std::string& fourier_dir, int64_t first, int64_t end)
{
    namespace fs = std::filesystem;
    const auto& model = *lm.model;
    FourierTokenMap m{.vocab = model.config().vocab_size, .dim = model.config().hidden_size};
    const int64_t V = m.vocab, d = m.dim;
    if (first < 0 || end > V || first >= end)
        throw InputError(path + ": token ids " + std::to_string(first) + ".." + std::to_string(end) +
                         " must satisfy 0 <= first < end <= V = " + std::to_string(V));
    m.first = first;
    m.end = end;
    m.fourier = fourier_of(model);
    if (m.fourier) {
        if (!fourier_dir.empty())
            throw InputError(path + ": is already a fourier directory; a second fourier directory (" +
                             fourier_dir + ") goes with the original model");
        m.fourier_from = path;
        // The original rows come from the source model recorded at compression.
        const auto manifest = nlohmann::json::parse(lm.files.embedlab_manifest, nullptr, false);
        const nlohmann::json::json_pointer at("/source/path");
        const std::string source = manifest.is_object() && manifest.contains(at) && manifest[at].is_string()
                                       ? manifest[at].get<std::string>()
                                       : std::string();
        if (!source.empty() && fs::exists(source)) {
            auto src = load_model(source, {.need_tokenizer = false});
            if (src.model->config().vocab_size != V || src.model->config().hidden_size != d)
                throw InputError(source + ": the source model does not match the fourier directory " + path +
                                 "'s vocabulary and dimension");
            m.original = dense_rows(*src.model, first, end);
            m.original_from = source;
        } else {
            m.original_note = source.empty() ? "embedlab.json records no source path"
                                             : "source model " + source + " not found";
        }
    } else {
        m.original = dense_rows(model, first, end);
        if (!m.original.defined())
            throw InputError(path + ": has a " + model.token_embedding().kind() +
                             " embedding; give the original model or a --method fourier directory");
        m.original_from = path;
        if (!fourier_dir.empty()) {
            auto f = load_model(fourier_dir, {.need_tokenizer = false});
            m.fourier = fourier_of(*f.model);
            if (!m.fourier)
                throw InputError(fourier_dir + ": is not a --method fourier directory (its embedding is " +
                                 f.model->token_embedding().kind() + ")");
            if (m.fourier->vocab_size() != V || m.fourier->dim() != d)
                throw InputError(fourier_dir + ": has V = " + std::to_string(m.fourier->vocab_size()) +
                                 ", d = " + std::to_string(m.fourier->dim()) + "; the model " + path +
                                 " has V = " + std::to_string(V) + ", d = " + std::to_string(d));
            m.fourier_from = fourier_dir;
        }
    }
    c10::InferenceMode guard;
    m.features = fourier_features(torch::arange(first, end, torch::kLong), V, d);
    for (int64_t p = first; p < end; ++p)
        m.x.push_back(2.0 * static_cast<double>(p) / static_cast<double>(V - 1) - 1.0);
    if (m.fourier) {
        m.mlp = m.fourier->mlp(m.features);
        m.embedding = m.fourier->rows_from_features(m.features);
        if (m.original.defined()) {
            const auto c = torch::cosine_similarity(m.embedding.to(torch::kDouble),
                                                    m.original.to(torch::kDouble), 1, 1e-12)
                               .contiguous();
            m.cosine_to_original.assign(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
        }
    }
    if (lm.tokenizer)
        for (int64_t p = first; p < end; ++p)
            m.tokens.push_back(p < lm.tokenizer->vocab_size()
                                   ? lm.tokenizer->token_text(static_cast<int32_t>(p))
                                   : std::string());
    return m;
}

} // namespace embedlab
