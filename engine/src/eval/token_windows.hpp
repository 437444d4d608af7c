// The ids of one evaluation window as the model reads them (int64), cut from the
// text's int32 ids when the window is fed. Converting the whole text at once
// held 8 more bytes per token for the whole run (issue 57 item 9: eval of a text
// of NUL bytes, one token per byte, then cost 13 bytes per input byte).
//
//   const auto ids32 = int32_ids(ids);                  // a view, no copy
//   auto input = window_ids(ids32, w.start, w.length);  // [w.length] int64
//
// Thread safety: pure functions; the view lives as long as `ids`.
#pragma once

#include <span>

#include <torch/torch.h>

namespace embedlab::detail {

// `ids` as a 1-d int32 tensor sharing their memory.
inline torch::Tensor int32_ids(std::span<const int32_t> ids)
{
    return torch::from_blob(const_cast<int32_t*>(ids.data()), {static_cast<int64_t>(ids.size())},
                            torch::kInt32);
}

// ids[start, start + length) as a new int64 tensor.
inline torch::Tensor window_ids(const torch::Tensor& ids32, int64_t start, int64_t length)
{
    return ids32.narrow(0, start, length).to(torch::kLong);
}

} // namespace embedlab::detail
