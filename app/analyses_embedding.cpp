// Workbench requests checked field by field, and embedding requests as the
// engine's CompressionSpec (the same specs `embedlab-cli compress` builds).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analyses_internal.hpp"
#include "embedlab/compress.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/text_format.hpp"
#include "embedlab/tokenizer.hpp"

namespace embedlab::app {

namespace {

bool is_embedding_method(const std::string& m)
{
    return m == "pca" || m == "svd" || m == "tt" || m == "lle" || m == "fourier";
}

// One InputError per bad field, naming it and its range.
void check_fields(const CompressionRequest& r, int64_t d, const std::string& label)
{
    auto fail = [&](const std::string& what) { throw InputError(label + ": " + what); };
    const std::string& m = r.method;
    if (!is_embedding_method(m) && m != "flat")
        fail("method '" + m + "' is not one of pca, svd, tt, lle, fourier, flat");
    if ((m == "pca" || m == "svd") && (r.rank < 1 || r.rank > d))
        fail("rank " + std::to_string(r.rank) + " is outside 1.." + std::to_string(d));
    if (m == "tt" && !(r.eps > 0 && r.eps < 1))
        fail("eps " + short_number(r.eps) + " must lie strictly between 0 and 1");
    if (m == "lle") {
        if (!(r.keep_ratio > 0 && r.keep_ratio < 1))
            fail("keep_ratio " + short_number(r.keep_ratio) + " must lie strictly between 0 and 1");
        if (r.k < 1 || r.k > d)
            fail("k " + std::to_string(r.k) + " (neighbours) is outside 1.." + std::to_string(d));
    }
    if (m == "fourier") {
        if (r.mlp != "linear" && r.mlp != "geglu")
            fail("mlp '" + r.mlp + "' must be linear or geglu");
        if (r.steps < 1)
            fail("steps " + std::to_string(r.steps) + " must be at least 1");
    }
    if (m == "flat") {
        if (r.target_ratio == 0 && !(r.remaining > 0 && r.remaining <= 1))
            fail("remaining " + short_number(r.remaining) + " must lie in (0, 1]");
        if (r.target_ratio != 0 && !(r.target_ratio > 0 && r.target_ratio <= 1))
            fail("target ratio " + short_number(r.target_ratio) + " must lie in (0, 1]");
        if (r.allocation != "iprs" && r.allocation != "uniform")
            fail("allocation '" + r.allocation + "' must be iprs or uniform");
        if (r.samples < 1)
            fail("samples " + std::to_string(r.samples) + " must be at least 1");
        if (r.seqlen < 1)
            fail("seqlen " + std::to_string(r.seqlen) + " must be at least 1");
    }
    if (r.lora_rank < 0)
        fail("lora_rank " + std::to_string(r.lora_rank) + " must be 0 (off) or more");
    if (r.lora_rank > 0 && !is_embedding_method(m))
        fail("lora_rank: LoRA recovery applies to the embedding methods (pca, svd, tt, lle, fourier), not " +
             m);
    if (r.lora_rank > 0 && r.lora_steps < 1)
        fail("lora_steps " + std::to_string(r.lora_steps) + " must be at least 1 with LoRA on");
    if (r.eval_tokens < 0)
        fail("eval_tokens " + std::to_string(r.eval_tokens) + " must be 0 (all) or more");
    if (!r.task.empty() && r.task != "sst2" && r.task != "mc")
        fail("task '" + r.task + "' must be sst2 or mc");
    if (!r.task.empty() && r.task_data.empty())
        fail("task " + r.task + " needs its data file");
    if (r.task_limit < 0)
        fail("task_limit " + std::to_string(r.task_limit) + " must be 0 (all examples) or more");
}

} // namespace

void check_request(const CompressionRequest& request, int64_t d)
{
    check_fields(request, d, "request");
}

} // namespace embedlab::app
