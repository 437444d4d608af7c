// neighbours: for one rare token, its k nearest common tokens with cosines and
// LLE weights, and how well they rebuild it (the neighbour-graph view's data).
#include <cmath>

#include "common.hpp"
#include "frequency_text.hpp"

namespace embedlab::cli {

namespace {

int64_t token_argument(const Args& args, const Tokenizer& tokenizer, int64_t V)
{
    if (args.has("--id") == args.has("--token"))
        throw InputError("neighbours: give exactly one of --token STRING or --id N");
    if (args.has("--id"))
        return args.get_int("--id", 0, 0, V - 1);
    const std::string text = *args.get("--token");
    const auto ids = tokenizer.encode(text);
    if (ids.size() != 1) {
        std::string pieces;
        for (auto id : ids)
            pieces +=
                (pieces.empty() ? "" : " | ") + tokenizer.token_text(id) + " (" + std::to_string(id) + ")";
        throw InputError("neighbours: '" + text + "' is " + std::to_string(ids.size()) + " tokens, not one" +
                         (pieces.empty() ? std::string() : ": " + pieces) + "; pick one with --id");
    }
    return ids[0];
}

double cosine(const torch::Tensor& a, const torch::Tensor& b)
{
    const double na = a.norm().item<double>(), nb = b.norm().item<double>();
    if (na == 0 || nb == 0)
        return na == nb ? 1.0 : 0.0;
    return (a * b).sum().item<double>() / (na * nb);
}

} // namespace

int command_neighbours(const std::vector<std::string>& argv)
{
    Args args("neighbours", argv,
              {"--freq-text", "--keep-ratio", "--k", "--reg", "--token", "--id", "--tokenizer"}, {"--json"});
    const auto path = model_argument(args);
    auto lm = load_model(path, load_options(args));
    const auto& model = *lm.model;
    const int64_t V = model.config().vocab_size;
    const auto freq = FrequencyText::from_args(args, *lm.tokenizer, V);
    const int64_t id = token_argument(args, *lm.tokenizer, V);
    const auto& split = *freq.split;
    if (std::binary_search(split.common.begin(), split.common.end(), id))
        throw InputError("neighbours: token " + std::to_string(id) + " ('" + lm.tokenizer->token_text(id) +
                         "') is common at keep ratio " + std::to_string(split.keep_ratio) +
                         " (kept exactly); pick a rare token or lower --keep-ratio");
    const int64_t k = args.get_int("--k", 5, 1, static_cast<int64_t>(split.common.size()));
    const double reg = args.get_double("--reg", 1e-3, 0, 1e6);

    const auto table = dense_token_table(model, path.string());
    const auto near = nearest_common(table, {id}, split.common, k);
    const auto neighbour_ids = near.ids[0];
    const auto rows = table.index_select(0, neighbour_ids);
    const auto y = table[id];
    const auto alpha = lle_weights(y, rows, reg);
    // y_hat = ||y|| * normalise(sum alpha_j x_j / ||x_j||)
    const auto unit = rows.to(torch::kDouble) / rows.to(torch::kDouble).norm(2, 1, true).clamp_min(1e-300);
    auto rebuilt = torch::matmul(alpha.unsqueeze(0), unit)[0];
    const double rn = rebuilt.norm().item<double>();
    rebuilt = rn > 0 ? rebuilt * (y.to(torch::kDouble).norm().item<double>() / rn) : rebuilt;

    Json list = Json::array();
    for (int64_t j = 0; j < k; ++j) {
        const auto nid = neighbour_ids[j].item<int64_t>();
        list.push_back({{"id", nid},
                        {"token", lm.tokenizer->token_text(static_cast<int32_t>(nid))},
                        {"count", split.counts[static_cast<size_t>(nid)]},
                        {"cosine", near.cosines[0][j].item<double>()},
                        {"weight", alpha[j].item<double>()}});
    }
    const double recon = cosine(rebuilt, y.to(torch::kDouble));
    Json j = {{"model", path.string()},
              {"id", id},
              {"token", lm.tokenizer->token_text(static_cast<int32_t>(id))},
              {"count", split.counts[static_cast<size_t>(id)]},
              {"k", k},
              {"reg", reg},
              {"frequency_text", freq.json()},
              {"neighbours", list},
              {"reconstruction_cosine", recon}};
    if (args.has("--json")) {
        print_json(j);
        return 0;
    }
    std::printf("token %lld '%s' (seen %lld times; rare at keep ratio %.3f: %zu common tokens)\n",
                (long long)id, j["token"].get<std::string>().c_str(), (long long)j["count"].get<int64_t>(),
                split.keep_ratio, split.common.size());
    std::printf("%8s  %-20s %8s %10s %10s\n", "id", "token", "count", "cosine", "weight");
    for (const auto& n : list)
        std::printf("%8lld  %-20s %8lld %10.6f %+10.6f\n", (long long)n["id"].get<int64_t>(),
                    n["token"].get<std::string>().c_str(), (long long)n["count"].get<int64_t>(),
                    n["cosine"].get<double>(), n["weight"].get<double>());
    std::printf("reconstruction cosine %.6f (k = %lld, reg = %g)\n", recon, (long long)k, reg);
    return 0;
}

} // namespace embedlab::cli
