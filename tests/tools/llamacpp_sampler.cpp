// llamacpp-sampler: llama.cpp's own top-k, top-p, min-p and temperature samplers applied,
// in llama.cpp's default order, to logits read from stdin: the oracle of tests/sampler_test.cpp.
// Built by scripts/build-llamacpp-sampler.sh against ../shared/tools/llama.cpp/libllama.so.
//
//   echo "2 1 0" | llamacpp-sampler TOP_K TOP_P MIN_P TEMPERATURE
//   -> {"stages": [{"name": "top_k", "p": [V]}, ...], "dist": [V]}
// Each stage's "p" is the softmax (double) of the logits llama.cpp left, 0 for removed tokens;
// "dist" is the probabilities llama.cpp's own dist sampler computes over the survivors.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "llama.h"

namespace {

void print_probabilities(const std::vector<double>& p)
{
    std::printf("[");
    for (size_t i = 0; i < p.size(); ++i)
        std::printf("%s%.17g", i ? ", " : "", p[i]);
    std::printf("]");
}

// The softmax of the candidates' current logits, scattered to [V].
std::vector<double> softmax_of(const llama_token_data_array& a, size_t V)
{
    std::vector<double> p(V, 0);
    double max = -INFINITY, sum = 0;
    for (size_t i = 0; i < a.size; ++i)
        max = std::fmax(max, a.data[i].logit);
    for (size_t i = 0; i < a.size; ++i)
        sum += std::exp(static_cast<double>(a.data[i].logit) - max);
    for (size_t i = 0; i < a.size; ++i)
        p[static_cast<size_t>(a.data[i].id)] = std::exp(static_cast<double>(a.data[i].logit) - max) / sum;
    return p;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc != 5) {
        std::fprintf(stderr, "usage: llamacpp-sampler TOP_K TOP_P MIN_P TEMPERATURE < logits\n");
        return 2;
    }
    const int top_k = std::atoi(argv[1]);
    const float top_p = std::strtof(argv[2], nullptr), min_p = std::strtof(argv[3], nullptr),
                temperature = std::strtof(argv[4], nullptr);
    std::vector<llama_token_data> data;
    for (float logit; std::scanf("%f", &logit) == 1;)
        data.push_back({static_cast<llama_token>(data.size()), logit, 0.0f});
    const size_t V = data.size();
    llama_token_data_array a{data.data(), V, -1, false};
    const struct {
        const char* name;
        llama_sampler* sampler;
    } chain[] = {{"top_k", llama_sampler_init_top_k(top_k)},
                 {"top_p", llama_sampler_init_top_p(top_p, 1)},
                 {"min_p", llama_sampler_init_min_p(min_p, 1)},
                 {"temperature", llama_sampler_init_temp(temperature)}};
    std::printf("{\"stages\": [");
    bool first = true;
    for (const auto& stage : chain) {
        llama_sampler_apply(stage.sampler, &a);
        llama_sampler_free(stage.sampler);
        // Greedy temperature marks the losers -inf instead of removing them.
        size_t kept = 0;
        for (size_t i = 0; i < a.size; ++i)
            if (std::isfinite(a.data[i].logit))
                a.data[kept++] = a.data[i];
        a.size = kept;
        std::printf("%s{\"name\": \"%s\", \"p\": ", first ? "" : ", ", stage.name);
        print_probabilities(softmax_of(a, V));
        std::printf("}");
        first = false;
    }
    llama_sampler* dist = llama_sampler_init_dist(1234);
    llama_sampler_apply(dist, &a);
    llama_sampler_free(dist);
    std::vector<double> p(V, 0);
    for (size_t i = 0; i < a.size; ++i)
        p[static_cast<size_t>(a.data[i].id)] = a.data[i].p;
    std::printf("], \"dist\": ");
    print_probabilities(p);
    std::printf("}\n");
    return 0;
}
