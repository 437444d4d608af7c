// Per-token damage of a compressed table (token_damage.hpp).
#include "embedlab/token_damage.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "eval/token_damage_passes.hpp"

namespace embedlab {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Cosine of every id's row in the two tables, float64, a block of ids at a time.
std::vector<double> row_cosines(const TokenEmbedding& model, const TokenEmbedding& reference, int64_t V)
{
    std::vector<double> cosine(static_cast<size_t>(V));
    constexpr int64_t block = 4096;
    for (int64_t a = 0; a < V; a += block) {
        const auto ids = torch::arange(a, std::min(V, a + block), torch::kLong);
        const auto x = model.lookup(ids).to(torch::kDouble), y = reference.lookup(ids).to(torch::kDouble);
        const auto norms = x.norm(2, 1) * y.norm(2, 1);
        // Two zero rows are the same row; one zero row shares no direction.
        const auto c = torch::where(norms > 0, (x * y).sum(1) / norms.clamp_min(1e-300),
                                    (x.norm(2, 1) == y.norm(2, 1)).to(torch::kDouble))
                           .contiguous();
        std::copy(c.data_ptr<double>(), c.data_ptr<double>() + c.numel(), cosine.begin() + a);
    }
    return cosine;
}

std::string csv_quoted(const std::string& s)
{
    std::string q = "\"";
    for (char c : s)
        q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

std::string number(double v)
{
    if (std::isnan(v))
        return "";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

double mean_or_nan(double sum, int64_t n)
{
    return n > 0 ? sum / static_cast<double>(n) : kNaN;
}

} // namespace

int32_t frequency_bucket(int64_t count)
{
    int32_t b = 0;
    for (; count > 0; count >>= 1)
        ++b;
    return b;
}

std::string TokenDamageBucket::label() const
{
    return min_count == max_count ? std::to_string(min_count)
                                  : std::to_string(min_count) + "-" + std::to_string(max_count);
}

TokenDamage detail::token_damage_over(const LanguageModel& model, const LanguageModel& reference,
                                      size_t positions, const ForEachDamagePosition& for_each_position,
                                      const std::vector<int64_t>& same_as_target)
{
    c10::InferenceMode guard;
    const int64_t V = model.config().vocab_size;
    if (reference.config().vocab_size != V)
        throw InputError("token damage: the reference has a vocabulary of " +
                         std::to_string(reference.config().vocab_size) + " tokens, the model " +
                         std::to_string(V));
    TokenDamage d;
    d.target_count.assign(V, 0);
    d.input_count.assign(V, 0);
    std::vector<double> kl_target(V, 0.0), kl_input(V, 0.0);
    size_t i = 0;
    for_each_position([&](int32_t input, int32_t target, double kl) {
        for (const int32_t id : {input, target})
            if (id < 0 || id >= V)
                throw InputError("token damage: scored position " + std::to_string(i) + " has id " +
                                 std::to_string(id) + ", outside the vocabulary of " + std::to_string(V));
        ++i;
        ++d.target_count[target];
        kl_target[target] += kl;
        ++d.input_count[input];
        kl_input[input] += kl;
    });
    if (i != positions || static_cast<int64_t>(same_as_target.size()) != V)
        throw std::logic_error("token damage: the positions and their counts disagree");
    d.cosine = row_cosines(model.token_embedding(), reference.token_embedding(), V);
    d.kl_as_target.resize(V);
    d.kl_as_input.resize(V);
    d.bucket.resize(V);
    int32_t last = 0;
    for (int64_t id = 0; id < V; ++id) {
        d.kl_as_target[id] = mean_or_nan(kl_target[id], d.target_count[id]);
        d.kl_as_input[id] = mean_or_nan(kl_input[id], d.input_count[id]);
        d.bucket[id] = frequency_bucket(d.target_count[id]);
        last = std::max(last, d.bucket[id]);
    }
    struct Sums {
        double cosine = 0, kl_target = 0, kl_input = 0;
        int64_t same = 0, inputs = 0; // whole counts: the same in any order
    };
    std::vector<Sums> sums(last + 1);
    d.buckets.resize(last + 1);
    for (int32_t b = 0; b <= last; ++b) {
        d.buckets[b].min_count = b == 0 ? 0 : int64_t{1} << (b - 1);
        d.buckets[b].max_count = b == 0 ? 0 : (int64_t{1} << b) - 1;
    }
    for (int64_t id = 0; id < V; ++id) {
        ++d.buckets[d.bucket[id]].tokens;
        sums[d.bucket[id]].cosine += d.cosine[id];
        sums[d.bucket[id]].same += same_as_target[id];
    }
    for_each_position([&](int32_t input, int32_t target, double kl) {
        const int32_t bt = d.bucket[target], bi = d.bucket[input];
        ++d.buckets[bt].positions;
        sums[bt].kl_target += kl;
        ++sums[bi].inputs;
        sums[bi].kl_input += kl;
    });
    for (int32_t b = 0; b <= last; ++b) {
        auto& k = d.buckets[b];
        k.mean_cosine = mean_or_nan(sums[b].cosine, k.tokens);
        k.kl_as_target = mean_or_nan(sums[b].kl_target, k.positions);
        k.top1_as_target = mean_or_nan(static_cast<double>(sums[b].same), k.positions);
        k.kl_as_input = mean_or_nan(sums[b].kl_input, sums[b].inputs);
    }
    return d;
}

TokenDamage token_damage(const LanguageModel& model, const LanguageModel& reference,
                         const ScoredPositions& positions)
{
    const size_t N = positions.size();
    const int64_t V = model.config().vocab_size;
    std::vector<int64_t> same_as_target(static_cast<size_t>(std::max<int64_t>(V, 0)), 0);
    for (size_t i = 0; i < N; ++i)
        if (positions.same_top[i] && positions.target[i] >= 0 && positions.target[i] < V)
            ++same_as_target[positions.target[i]];
    return detail::token_damage_over(
        model, reference, N,
        [&](const detail::DamagePositionFn& each) {
            for (size_t i = 0; i < N; ++i)
                each(positions.input[i], positions.target[i], positions.kl[i]);
        },
        same_as_target);
}

nlohmann::ordered_json token_damage_buckets_json(const TokenDamage& damage)
{
    auto j = nlohmann::ordered_json::array();
    for (const auto& b : damage.buckets)
        j.push_back({{"bucket", b.label()},
                     {"min_count", b.min_count},
                     {"max_count", b.max_count},
                     {"tokens", b.tokens},
                     {"positions", b.positions},
                     {"mean_cosine", b.mean_cosine},
                     {"kl_as_target", b.kl_as_target},
                     {"kl_as_input", b.kl_as_input},
                     {"top1_as_target", b.top1_as_target}});
    return j;
}

std::string token_damage_csv(const TokenDamage& damage, const Tokenizer* tokenizer)
{
    std::string out = "id,piece,bucket,target_count,cosine,kl_as_target,input_count,kl_as_input\n";
    for (size_t id = 0; id < damage.cosine.size(); ++id) {
        const auto i = static_cast<int32_t>(id);
        const bool piece = tokenizer && i < tokenizer->vocab_size();
        out += std::to_string(id) + "," + (piece ? csv_quoted(tokenizer->token_text(i)) : std::string()) +
               "," + std::to_string(damage.bucket[id]) + "," + std::to_string(damage.target_count[id]) + "," +
               number(damage.cosine[id]) + "," + number(damage.kl_as_target[id]) + "," +
               std::to_string(damage.input_count[id]) + "," + number(damage.kl_as_input[id]) + "\n";
    }
    return out;
}

} // namespace embedlab
