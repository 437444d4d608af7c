// One micro-batch's share of a training step (finetune, classifier finetune, train):
// the loss weighted by its share of the step, backward, summed into the step's loss,
// with cancel heard before and after the backward pass. Internal to the engine.
#pragma once

#include <torch/types.h>

#include "embedlab/error.hpp"

namespace embedlab::methods {

// `alive()` false throws Cancelled. share 1: the whole step in one micro-batch (no scaling,
// so such a step computes exactly what an unsplit one did).
template <class Alive>
void backward_share(torch::Tensor loss, double share, torch::Tensor& total, Alive&& alive)
{
    if (share != 1.0)
        loss = loss * share;
    if (!alive())
        throw Cancelled();
    loss.backward();
    total = total.defined() ? total + loss.detach() : loss.detach();
    if (!alive())
        throw Cancelled();
}

} // namespace embedlab::methods
