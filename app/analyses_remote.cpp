// Workbench compressions on a remote host (remote.hpp): the same jobs the CLI's
// `remote run` sends, evaluated there.
#include "analyses_internal.hpp"

namespace embedlab::app::detail {

CompressionRun remote_compress_and_evaluate(const std::string&, const CompressionRequest& request,
                                            const std::string&, const ProgressFn&)
{
    throw InputError(request.host + ": remote runs are not built yet");
}

} // namespace embedlab::app::detail
