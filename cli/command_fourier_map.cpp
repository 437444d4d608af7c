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
#include "embedlab/fourier_map.hpp"

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

double mean(const std::vector<double>& v)
{
    double s = 0;
    for (double x : v)
        s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

} // namespace

int command_fourier_map(const std::vector<std::string>& argv)
{
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

    const auto map = fourier_token_map(lm, path.string(), args.get("--dir").value_or(""), a, b);
    const auto& fourier = map.fourier;
    const bool original = map.original.defined();
    Json j = {{"model", path.string()}, {"vocab", V}, {"dim", d}, {"first", a}, {"end", b}, {"x", map.x}};
    if (lm.tokenizer)
        j["tokens"] = map.tokens;
    Json neighbours = {{"features", neighbour_cosines(map.features)}};
    j["features"] = matrix_json(map.features);
    if (fourier) {
        j["fourier_model"] = map.fourier_from;
        j["fourier"] = {{"mlp", fourier_mlp_name(fourier->params().mlp)},
                        {"hidden", fourier->params().hidden},
                        {"norm", fourier->params().norm},
                        {"parameters", fourier->parameter_count()}};
        j["mlp"] = matrix_json(map.mlp);
        j["embedding"] = matrix_json(map.embedding);
        neighbours["mlp"] = neighbour_cosines(map.mlp);
        neighbours["embedding"] = neighbour_cosines(map.embedding);
        if (original)
            j["cosine_to_original"] = map.cosine_to_original;
    }
    if (original) {
        j["original_model"] = map.original_from;
        j["original"] = matrix_json(map.original);
        neighbours["original"] = neighbour_cosines(map.original);
    } else {
        j["original_note"] = map.original_note;
    }
    j["neighbour_cosine"] = neighbours;
    Json means = Json::object();
    for (const auto& [name, values] : neighbours.items())
        means[name] = mean(values.get<std::vector<double>>());
    j["mean_neighbour_cosine"] = means;
    if (j.contains("cosine_to_original"))
        j["mean_cosine_to_original"] = mean(map.cosine_to_original);

    if (args.has("--json")) {
        // Token texts may hold partial UTF-8 sequences (byte-level BPE).
        std::printf("%s\n", j.dump(1, ' ', false, Json::error_handler_t::replace).c_str());
        return 0;
    }
    std::printf("ids %lld..%lld of V = %lld, d = %lld (x from %.6f to %.6f)\n", (long long)a,
                (long long)b - 1, (long long)V, (long long)d, map.x.front(), map.x.back());
    if (fourier)
        std::printf("fourier model %s: %s MLP, %lld parameters\n", map.fourier_from.c_str(),
                    fourier_mlp_name(fourier->params().mlp), (long long)fourier->parameter_count());
    if (original)
        std::printf("original rows from %s\n", map.original_from.c_str());
    else
        std::printf("no original rows (%s)\n", map.original_note.c_str());
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
