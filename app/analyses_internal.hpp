// What the analyses' .cpp files share (libtorch inside; never included by Qt code).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "analyses.hpp"
#include "embedlab/error.hpp"

namespace embedlab::app::detail {

// Splits one progress bar into consecutive stages of the given weights.
ProgressFn stage(const ProgressFn& progress, int64_t offset, int64_t weight, int64_t total);

// This computer's name for the results' "host" column.
std::string host_name();

// The original model's perplexity, computed once per key (model, text, length,
// host: callers build it) and remembered for the process; safe from any thread.
double original_perplexity(const std::string& key, const std::function<double()>& compute);

// The request's text, or the bundled sample text when it is empty.
std::string text_or_default(const std::string& text);

// analyses_flat.cpp: method "flat" (METHODS 3) on this computer.
CompressionRun flat_compress_and_evaluate(const std::string& model, const CompressionRequest& request,
                                          const std::string& text, const ProgressFn& progress);
std::string flat_export(const std::string& model, const CompressionRequest& request,
                        const std::string& out_dir, bool dense, bool overwrite, const ProgressFn& progress);

// analyses_remote.cpp: a request with a host, run by `embedlab-cli worker` there.
CompressionRun remote_compress_and_evaluate(const std::string& model, const CompressionRequest& request,
                                            const std::string& text, const ProgressFn& progress);

} // namespace embedlab::app::detail
