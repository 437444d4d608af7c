// Peak memory of one training step of a transformer LM, and the refusal of a run
// the machine cannot hold (issue 57 item 8), shared by finetune and train; also the
// micro-batch size that keeps a step bounded in memory and time.
#pragma once

#include <cstdint>
#include <string>

namespace embedlab::methods {

struct TrainingShape {
    int64_t trained = 0, frozen = 0; // parameters
    int64_t windows = 0, seqlen = 0; // one micro-batch: windows x seqlen tokens
    int64_t layers = 0, dim = 0, heads = 0, vocab = 0;
    int64_t batch = 0; // the whole step's windows (its index buffers)
};

// Bytes at the peak of a step (fp32): weights, gradients and AdamW state, the
// activations autograd keeps (per layer, attention scores, the logits' softmax and
// gradient) and a fixed runtime overhead; calibrated against measured RSS.
double training_step_bytes(const TrainingShape& shape);

// MemAvailable (/proc/meminfo), lowered by a cgroup memory.max or RLIMIT_AS; 0 if unknown.
double available_memory_bytes();

// InputError "<what>: batch B x seqlen T needs about X GB (estimate), this machine
// has Y GB available; lower --batch or --seqlen" when bytes exceed 90% of available.
void check_training_memory(const std::string& what, int64_t batch, int64_t seqlen, double bytes,
                           double available);

// Windows per micro-batch: at most kMicroTokens tokens for a model as costly per
// token as tinygpt2 (fewer for costlier ones; one window at least), so a forward or
// backward pass stays under a second and cancel is prompt. vocab 0: no LM head.
inline constexpr int64_t kMicroTokens = 1024;
int64_t micro_windows(int64_t batch, int64_t seqlen, int64_t layers, int64_t dim, int64_t vocab);

} // namespace embedlab::methods
