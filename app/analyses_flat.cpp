// FLAT-LLM (METHODS 3) for the workbench: calibrate, IPRS, absorb, evaluate.
#include "analyses_internal.hpp"

namespace embedlab::app::detail {

CompressionRun flat_compress_and_evaluate(const std::string& model, const CompressionRequest&,
                                          const std::string&, const ProgressFn&)
{
    throw InputError(model + ": flat is not built yet");
}

std::string flat_export(const std::string& model, const CompressionRequest&, const std::string&, bool, bool,
                        const ProgressFn&)
{
    throw InputError(model + ": flat export is not built yet");
}

} // namespace embedlab::app::detail
