// flat's registry row (METHODS 3, FLAT-LLM): the value rank ratio or a decoder
// target ratio, IPRS or uniform ranks, the MLP, and the calibration text.
#include "methods/request_support.hpp"

namespace embedlab::method_rows {

MethodDescriptor flat()
{
    return {
        .id = Method::Flat,
        .name = "flat",
        .part = CompressedPart::AttentionValues,
        .summary = "head-wise PCA of the values, IPRS ranks (METHODS 3)",
        .needs_calibration_text = true,
        .target_compresses_mlp = true,
        .fields = {"remaining", "target_ratio", "allocation", "compress_mlp", "no_mlp", "mlp_lambda",
                   "calibration", "mlp_calibration", "calib_text", "samples", "seqlen"},
        .check =
            [](const CompressionRequest& r, int64_t, const RequestFail& fail) {
                if (r.target_ratio != 0 && r.remaining != 0)
                    fail("target_ratio",
                         "and remaining both given: give one (the decoder's share to keep, or the "
                         "value rank ratio)");
                if (r.target_ratio != 0 && !(r.target_ratio > 0 && r.target_ratio <= 1))
                    fail("target_ratio",
                         short_number(r.target_ratio) + " must lie in (0, 1] (1 keeps everything)");
                if (r.target_ratio == 0 && !(r.remaining > 0 && r.remaining <= 1))
                    fail("remaining", short_number(r.remaining) + " must lie in (0, 1] (1 keeps everything)");
                if (r.calibration != "sequential" && r.calibration != "parallel")
                    fail("calibration", "'" + r.calibration + "' must be sequential or parallel");
                if (r.mlp_calibration != "reference" && r.mlp_calibration != "after_attention")
                    fail("mlp_calibration",
                         "'" + r.mlp_calibration + "' must be reference or after_attention");
                if (r.mlp_calibration == "after_attention" &&
                    (r.calibration != "sequential" || !request_compresses_mlp(r)))
                    fail("mlp_calibration",
                         "after_attention applies to sequential calibration with the "
                         "MLP compressed (compress_mlp, or a target_ratio without no_mlp)");
                if (r.no_mlp && r.compress_mlp)
                    fail("no_mlp", "and compress_mlp both given: give one");
                if (r.no_mlp && r.target_ratio == 0)
                    fail("no_mlp", "applies with target_ratio (which compresses the MLP by default); "
                                   "without it the MLP is compressed only with compress_mlp");
                if (r.allocation != "iprs" && r.allocation != "uniform")
                    fail("allocation", "'" + r.allocation + "' must be iprs or uniform");
                if (!(r.mlp_lambda > 0))
                    fail("mlp_lambda", short_number(r.mlp_lambda) + " must be positive");
                if (r.calib_text.empty())
                    fail("calib_text", "is required: the value statistics come from a calibration text");
                if (r.samples < 1 || r.samples > (1 << 20))
                    fail("samples", std::to_string(r.samples) + " must be 1..1048576 calibration windows");
                if (r.seqlen < 0 || r.seqlen > (1 << 20))
                    fail("seqlen", std::to_string(r.seqlen) + " must be 0 (the default) or a window length");
            },
        .describe =
            [](const CompressionRequest& r) {
                return (r.target_ratio > 0 ? "flat target " + short_number(r.target_ratio)
                                           : "flat remaining " + short_number(r.remaining)) +
                       ", " + r.allocation + (request_compresses_mlp(r) ? ", mlp" : "") +
                       (r.calibration == "parallel" ? ", parallel" : "") +
                       (r.calibration == "sequential" && request_compresses_mlp(r) &&
                                r.mlp_calibration == "after_attention"
                            ? ", mlp after attention"
                            : "");
            },
        .example = R"({"remaining": 0.5, "calib_text": "FILE"})"};
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_ROWS(flat, .methods = {flat()})

} // namespace embedlab::method_rows
