// fourier-map: the data of the Fourier token-map view (METHODS.md 4) for a range
// of ids: the features T, and for a fitted fourier model MLP(T) and E = T + MLP(T)
// (normed when the model has RMSNorm), the original rows, and the cosine of each
// pair of neighbouring ids (p, p+1) in each.
//
//   embedlab-cli fourier-map MODEL --ids A:B [--json]                  T and the original rows
//   embedlab-cli fourier-map FOURIER_DIR --ids A:B [--json]            + MLP(T), E; original rows
//                                                                     from the source in embedlab.json
//   embedlab-cli fourier-map MODEL --dir FOURIER_DIR --ids A:B [--json]
#include <cmath>
#include <optional>

#include "common.hpp"
#include "embedlab/fourier_embedding.hpp"

namespace embedlab::cli {

namespace {

constexpr int64_t kMaxIds = 4096;

std::pair<int64_t, int64_t> id_range(const Args& args, int64_t V)
{
    const std::string v =
        args.required("--ids", "A:B", "token ids A..B-1, at most " + std::to_string(kMaxIds));
    const auto colon = v.find(':');
    int64_t a = 0, b = 0;
    try {
        if (colon == std::string::npos)
            throw std::invalid_argument("no colon");
        size_t used_a = 0, used_b = 0;
        const std::string sa = v.substr(0, colon), sb = v.substr(colon + 1);
        a = std::stoll(sa, &used_a);
        b = std::stoll(sb, &used_b);
        if (used_a != sa.size() || used_b != sb.size())
            throw std::invalid_argument("trailing characters");
    } catch (const std::exception&) {
        throw InputError("fourier-map: --ids expects A:B (two integers, e.g. 0:256), got '" + v + "'");
    }
    if (a < 0 || b > V || a >= b)
        throw InputError("fourier-map: --ids " + v + " must satisfy 0 <= A < B <= V = " + std::to_string(V));
    if (b - a > kMaxIds)
        throw InputError("fourier-map: --ids " + v + " spans " + std::to_string(b - a) + " ids; at most " +
                         std::to_string(kMaxIds) + " per call (split the range)");
    return {a, b};
}

// Values rounded to float32's 7 significant digits: the JSON stays about 10
// characters a value instead of 20.
Json matrix_json(const torch::Tensor& m)
{
    const auto t = m.to(torch::kFloat32).contiguous();
    const float* data = t.data_ptr<float>();
    Json rows = Json::array();
    char buf[32];
    for (int64_t i = 0; i < t.size(0); ++i) {
        Json row = Json::array();
        for (int64_t j = 0; j < t.size(1); ++j) {
            std::snprintf(buf, sizeof buf, "%.7g", static_cast<double>(data[i * t.size(1) + j]));
            row.push_back(std::strtod(buf, nullptr));
        }
        rows.push_back(std::move(row));
    }
    return rows;
}

// Cosine of rows i and i+1 ([n, d] -> n - 1 values); a zero row against a zero row counts 1.
std::vector<double> neighbour_cosines(const torch::Tensor& m)
{
    const auto x = m.to(torch::kDouble);
    std::vector<double> out;
    for (int64_t i = 0; i + 1 < x.size(0); ++i) {
        const double na = x[i].norm().item<double>(), nb = x[i + 1].norm().item<double>();
        out.push_back(na == 0 || nb == 0 ? (na == nb ? 1.0 : 0.0)
                                         : (x[i] * x[i + 1]).sum().item<double>() / (na * nb));
    }
    return out;
}

double mean(const std::vector<double>& v)
{
    double s = 0;
    for (double x : v)
        s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

// The original rows [a, b) of a dense model, or nothing when it is not dense.
std::optional<torch::Tensor> dense_rows(const LanguageModel& model, int64_t a, int64_t b)
{
    const auto* dense = dense_table(&model.token_embedding());
    if (!dense)
        return std::nullopt;
    return dense->narrow(0, a, b - a).clone();
}

std::shared_ptr<const FourierTokenEmbedding> fourier_of(const LanguageModel& model)
{
    return std::dynamic_pointer_cast<const FourierTokenEmbedding>(model.shared_token_embedding());
}

} // namespace

int command_fourier_map(const std::vector<std::string>& argv)
{
    namespace fs = std::filesystem;
    Args args("fourier-map", argv, {"--ids", "--dir", "--tokenizer"}, {"--json"});
    const auto path = model_argument(args);
    LoadOptions options = load_options(args);
    options.need_tokenizer = false; // token texts are shown when a tokenizer is found
    auto lm = load_model(path, options);
    if (!lm.tokenizer) {
        try {
            lm.tokenizer = load_model_tokenizer(lm.files, options);
        } catch (const InputError&) {
            // no tokenizer: the map has no token texts
        }
    }
    print_warnings(lm.files.warnings);
    const auto& model = *lm.model;
    const int64_t V = model.config().vocab_size, d = model.config().hidden_size;
    const auto [a, b] = id_range(args, V);

    std::shared_ptr<const FourierTokenEmbedding> fourier = fourier_of(model);
    std::optional<torch::Tensor> original;
    std::string fourier_from, original_from, original_note;
    if (fourier) {
        if (args.has("--dir"))
            throw InputError("fourier-map: " + path.string() +
                             " is already a fourier directory; --dir goes with the original MODEL");
        fourier_from = path.string();
        // The original rows come from the source model recorded at compression.
        const auto manifest = nlohmann::json::parse(lm.files.embedlab_manifest, nullptr, false);
        const auto* source = manifest.is_object() && manifest.contains("source") &&
                                     manifest["source"].is_object() && manifest["source"].contains("path") &&
                                     manifest["source"]["path"].is_string()
                                 ? &manifest["source"]["path"]
                                 : nullptr;
        if (source && fs::exists(source->get<std::string>())) {
            original_from = source->get<std::string>();
            auto src = load_model(original_from, {.need_tokenizer = false});
            if (src.model->config().vocab_size != V || src.model->config().hidden_size != d)
                throw InputError("fourier-map: the source model " + original_from +
                                 " does not match the fourier directory's vocabulary and dimension");
            original = dense_rows(*src.model, a, b);
        } else {
            original_note = source ? "source model " + source->get<std::string>() + " not found"
                                   : "embedlab.json records no source path";
        }
    } else {
        original = dense_rows(model, a, b);
        if (!original)
            throw InputError("fourier-map: " + path.string() + " has a " + model.token_embedding().kind() +
                             " embedding; give the original model or a --method fourier directory");
        original_from = path.string();
        if (const auto dir = args.get("--dir")) {
            auto f = load_model(*dir, {.need_tokenizer = false});
            fourier = fourier_of(*f.model);
            if (!fourier)
                throw InputError("fourier-map: --dir " + *dir + " is not a --method fourier directory (its " +
                                 "embedding is " + f.model->token_embedding().kind() + ")");
            if (fourier->vocab_size() != V || fourier->dim() != d)
                throw InputError("fourier-map: --dir " + *dir +
                                 " has V = " + std::to_string(fourier->vocab_size()) +
                                 ", d = " + std::to_string(fourier->dim()) +
                                 "; MODEL has V = " + std::to_string(V) + ", d = " + std::to_string(d));
            fourier_from = *dir;
        }
    }

    c10::InferenceMode guard;
    const auto ids = torch::arange(a, b, torch::kLong);
    const auto features = fourier_features(ids, V, d);
    std::vector<double> x;
    for (int64_t p = a; p < b; ++p)
        x.push_back(2.0 * static_cast<double>(p) / static_cast<double>(V - 1) - 1.0);
    Json j = {{"model", path.string()}, {"vocab", V}, {"dim", d}, {"first", a}, {"end", b}, {"x", x}};
    if (lm.tokenizer) {
        Json tokens = Json::array();
        for (int64_t p = a; p < b; ++p)
            tokens.push_back(p < lm.tokenizer->vocab_size()
                                 ? lm.tokenizer->token_text(static_cast<int32_t>(p))
                                 : std::string());
        j["tokens"] = tokens;
    }
    Json neighbours = {{"features", neighbour_cosines(features)}};
    j["features"] = matrix_json(features);
    if (fourier) {
        const auto mlp = fourier->mlp(features);
        const auto e = fourier->rows_from_features(features);
        j["fourier_model"] = fourier_from;
        j["fourier"] = {{"mlp", fourier_mlp_name(fourier->params().mlp)},
                        {"hidden", fourier->params().hidden},
                        {"norm", fourier->params().norm},
                        {"parameters", fourier->parameter_count()}};
        j["mlp"] = matrix_json(mlp);
        j["embedding"] = matrix_json(e);
        neighbours["mlp"] = neighbour_cosines(mlp);
        neighbours["embedding"] = neighbour_cosines(e);
        if (original) {
            const auto c =
                torch::cosine_similarity(e.to(torch::kDouble), original->to(torch::kDouble), 1, 1e-12);
            j["cosine_to_original"] =
                std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
        }
    }
    if (original) {
        j["original_model"] = original_from;
        j["original"] = matrix_json(*original);
        neighbours["original"] = neighbour_cosines(*original);
    } else {
        j["original_note"] = original_note;
    }
    j["neighbour_cosine"] = neighbours;
    Json means = Json::object();
    for (const auto& [name, values] : neighbours.items())
        means[name] = mean(values.get<std::vector<double>>());
    j["mean_neighbour_cosine"] = means;
    if (j.contains("cosine_to_original"))
        j["mean_cosine_to_original"] = mean(j["cosine_to_original"].get<std::vector<double>>());

    if (args.has("--json")) {
        // Token texts may hold partial UTF-8 sequences (byte-level BPE).
        std::printf("%s\n", j.dump(1, ' ', false, Json::error_handler_t::replace).c_str());
        return 0;
    }
    std::printf("ids %lld..%lld of V = %lld, d = %lld (x from %.6f to %.6f)\n", (long long)a,
                (long long)b - 1, (long long)V, (long long)d, x.front(), x.back());
    if (fourier)
        std::printf("fourier model %s: %s MLP, %lld parameters\n", fourier_from.c_str(),
                    fourier_mlp_name(fourier->params().mlp), (long long)fourier->parameter_count());
    if (original)
        std::printf("original rows from %s\n", original_from.c_str());
    else
        std::printf("no original rows (%s)\n", original_note.c_str());
    std::printf("mean cosine of neighbouring ids (p, p+1):\n");
    for (const auto& [name, value] : means.items())
        std::printf("  %-10s %.6f\n", name.c_str(), value.get<double>());
    if (j.contains("mean_cosine_to_original"))
        std::printf("mean cosine of E to the original rows: %.6f\n",
                    j["mean_cosine_to_original"].get<double>());
    std::printf("(--json prints the matrices)\n");
    return 0;
}

} // namespace embedlab::cli
