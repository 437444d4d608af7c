// What a peer program run beside EmbedLab for comparison (llama.cpp's llama-bench and
// llamacpp-ppl in `bench ... --compare-llamacpp`) must not inherit: the settings
// EmbedLab made for itself at start-up rather than the user's. restart_with_passive_openmp
// (model.hpp) sets OMP_WAIT_POLICY=PASSIVE when the user left it unset; llama.cpp's
// OpenMP threads then sleep between its graph's steps (its tg on the Qwen2.5-0.5B shape
// 22 instead of 32-37 tokens/s, issue 63), a handicap the user's own run never has.
// Usage: argv = {"env"} + unset_for_peers() + {tool, args...}
// Thread safety: reads the environment only.
#pragma once

#include <string>
#include <vector>

namespace embedlab {

// Set beside OMP_WAIT_POLICY when EmbedLab (not the user) set it: by the CLI, GUI and
// embedlab-figure at start-up and by `import embedlab`.
inline constexpr const char* kOmpWaitPolicySetByEmbedLab = "EMBEDLAB_SET_OMP_WAIT_POLICY";

// `env` arguments that unset what EmbedLab set for itself: {"-u", "OMP_WAIT_POLICY",
// "-u", kOmpWaitPolicySetByEmbedLab} when it set the policy, else none (the user's
// own OMP_WAIT_POLICY reaches the peer as it reaches EmbedLab).
std::vector<std::string> unset_for_peers();

// OMP_WAIT_POLICY as the peer gets it: the user's value, or "default (spinning)" (unset
// by the user, or set only by EmbedLab). Beside openmp_wait_policy() in bench output.
std::string peer_openmp_wait_policy();

} // namespace embedlab
