// token_damage over scored positions however they are held: ScoredPositions' arrays
// (token_damage) or a text's ids and the KL in scoring order (evaluate_divergence_report,
// which keeps no per-position ids).
//
//   auto damage = detail::token_damage_over(model, reference, n, for_each_position, same_as_target);
//
// Thread safety: reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "embedlab/token_damage.hpp"

namespace embedlab::detail {

// Calls `each(input, target, kl)` for every scored position in scoring order.
using DamagePositionFn = std::function<void(int32_t input, int32_t target, double kl)>;
using ForEachDamagePosition = std::function<void(const DamagePositionFn& each)>;

// token_damage of `positions` scored positions, read twice through `for_each_position`;
// `same_as_target[id]`: the positions predicting id whose two argmaxes agree.
// InputError when the vocabularies or an id disagree.
TokenDamage token_damage_over(const LanguageModel& model, const LanguageModel& reference, size_t positions,
                              const ForEachDamagePosition& for_each_position,
                              const std::vector<int64_t>& same_as_target);

} // namespace embedlab::detail
