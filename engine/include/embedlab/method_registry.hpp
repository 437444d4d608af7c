// The registry of compression methods: one row per method, naming what it compresses
// and what it needs. It sits with the methods, below the job layer: methods/ and
// model/ read it without including job/ (experiment_request.hpp re-exports it).
//
//   const auto& m = embedlab::method_descriptor("lle");  // InputError for an unknown name
//   m.needs_frequency_text;                              // true
//   embedlab::find_method("lrf");                        // nullptr: a stored kind, not a method
//
// A method declares the request fields it takes (experiment_request.hpp), checks them,
// describes a request in a few words and names the stored form of its factors
// (stored_form.hpp); one file per method family, engine/src/methods/request_*.cpp,
// registers its rows itself (EMBEDLAB_BUILTIN_ROWS; the families' one list is
// methods/builtin_methods.hpp). register_method adds a row at run time (a test's toy method).
//
// Torch-free. Thread safety: the built-in rows never change; register_method must
// finish before any other thread reads the registry.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace embedlab {

struct CompressionRequest; // experiment_request.hpp

// The built-in methods of METHODS.md 1-5 by id; External: any other (one added by
// register_method, or a built-in row that sets none), known by its name alone. Code
// outside a method's own files reads the row's flags and the TableMethod's virtuals,
// not this id (kept for the front ends' few uses).
enum class Method { PCA, SVD, TT, Tucker, LLE, LLEUnk, LLEPCA, Fourier, Quant, AQ, Flat, External };
enum class CompressedPart { TokenEmbedding, AttentionValues };

// A method's checks report the first bad field: fail(field, what) throws.
using RequestFail = std::function<void(const std::string& field, const std::string& what)>;

// A sweep's option values as a front end read them (embedlab-cli sweep's flags): each
// reader throws InputError naming the option for a bad value, and returns nothing for
// an option not given.
class SweepValues {
public:
    virtual ~SweepValues() = default;
    virtual bool has(const std::string& option) const = 0;
    // "a,b,c", each in lo..hi.
    virtual std::vector<int64_t> integers(const std::string& option, int64_t lo, int64_t hi) const = 0;
    virtual std::vector<double> numbers(const std::string& option, double lo, double hi) const = 0;
    // "a,b:c,d": one list per colon-separated part, each value in lo..hi.
    virtual std::vector<std::vector<int64_t>> integer_sets(const std::string& option, int64_t lo,
                                                           int64_t hi) const = 0;
    virtual std::vector<std::string> words(const std::string& option) const = 0;
};

// How a sweep lists a method's settings (embedlab-cli sweep; issue 37): its own
// options, each a list, and the requests they expand to. A method without one does not
// sweep.
struct SweepGrammar {
    std::vector<std::string> options;  // valued, e.g. "--ranks", "--shapes"
    std::vector<std::string> switches; // e.g. "--uniform-ranks"
    std::string usage;                 // for messages and help: "--ranks K1,K2,.."
    // Each setting: `base` (model, evaluation, method, the method's other fields) with
    // the swept fields set from `values`; d the model's width. InputError names the
    // option and what it needs; check_request checks each request after.
    std::function<std::vector<CompressionRequest>(const SweepValues& values, const CompressionRequest& base,
                                                  int64_t d)>
        settings;
};

// What a front end shows of a request field (issue 59): the CLI's help and the GUI's
// boxes read it, and check_request holds the field to its range and choices, so the
// boxes' ranges are the engine's. default_field_doc (experiment_request.hpp) gives a
// field's own; a method whose field means something else overrides it (field_docs).
struct FieldDoc {
    std::string label;      // the GUI's: "Keep ratio"
    std::string value_name; // the CLI help's: "R" in --keep-ratio R ("" for a switch)
    std::string help;       // one line: what it is
    std::string unit;       // "" or e.g. "steps", "windows"
    // Integer and Number fields: lo..hi, ends excluded when open; hi_is_width: hi is the
    // model's width d. zero: 0 is accepted too and means this ("off", "automatic").
    bool ranged = false;
    double lo = 0, hi = 0;
    bool lo_open = false, hi_open = false, hi_is_width = false;
    std::string zero;
    std::vector<std::string> choices; // String fields taking one of a set
    bool required = false;
    // The other fields it applies with, as a JSON object ({"mlp": "geglu"}); "": always.
    std::string applies_with;
};

// A request field's JSON type: how a front end reads it (the CLI: a switch for Bool,
// "a,b,c" for Integers) before set_request_field checks it.
enum class RequestFieldType { String, Bool, Integer, Number, Integers, TokenIds };

// A field a method declares for itself (issue 59): a request field no other method
// has, whose value lives in CompressionRequest::method_fields under its name. The
// request's JSON, its checks (the doc's range, "is outside ..."), the CLI's flag
// (--proj-density for "proj_density"), help and the GUI's box take it as they take
// the built-in fields.
struct MethodField {
    std::string name;      // JSON key: lower case, digits and '_'
    RequestFieldType type; // Integer, Number or String (doc.choices: one of a set)
    nlohmann::ordered_json default_value;
    FieldDoc doc;
};

struct MethodDescriptor {
    Method id = Method::External; // a new method needs no enum value
    const char* name;             // as on the command line and in JSON: "pca", "lle-unk", ...
    CompressedPart part;          // what the ratio of a run is of
    const char* summary;
    bool needs_frequency_text = false; // lle family: common/rare split
    bool needs_calibration_text = false;
    bool tied_head_from_factors = false; // the tied output head is served from the factors
    bool positions = false;              // can also compress gpt2's position table
    bool lora = false;                   // can be followed by LoRA recovery
    bool remote = true;                  // runs as a worker job on a remote host
    // flat: a decoder target ratio (target_ratio) also compresses the MLP unless the
    // request says no_mlp; the CLI, the job API and the GUI share this default.
    bool target_compresses_mlp = false;
    // The baseline the others are read against at equal bytes (quant: the table in a
    // llama.cpp block format); the demo's report names the best run within its bytes.
    bool bytes_baseline = false;
    // LoRA recovery trains the table's own network instead of adapters on its factors
    // (fourier: PETE keeps no per-token parameters, so its MLP is what recovers).
    bool recovery_trains_table_network = false;
    // The k values finetune's classifier protocol selects among when --k is not given
    // (the LLE paper's ranges: lle 1..5, section 3.3; lle-pca 1..10, section 3.4).
    std::vector<int64_t> classifier_protocol_ks;
    // The stored form of its token table (stored_form.hpp): "pca", "svd", "lrf", "tt",
    // "tucker", "lle", "lle-unk", "lle-pca", "fourier", "quant", "aq" or one registered;
    // empty for flat.
    const char* stored_as = "";
    // The request fields it takes beyond every method's (model, evaluation, task, seed;
    // positions with `positions`, lora_* with `lora`).
    // register_method appends the names of own_fields.
    std::vector<std::string> fields;
    // The fields it declares for itself (MethodField), beyond the request's own.
    std::vector<MethodField> own_fields;
    // Its fields' ranges and combinations, d > 0 the model's width (0: unknown yet).
    std::function<void(const CompressionRequest&, int64_t d, const RequestFail&)> check;
    // The request in a few words, e.g. "pca rank 32" (describe_request adds LoRA).
    std::function<std::string(const CompressionRequest&)> describe;
    // How `sweep` lists its settings; none: it does not sweep.
    SweepGrammar sweep;
    // Its fields whose doc is not default_field_doc's (lle-pca's k is a basis size).
    std::vector<std::pair<std::string, FieldDoc>> field_docs;
    // A valid request's own fields as a JSON object ({"rank": 32}): the help's example
    // and the workbench's first values.
    std::string example;
};

// The registry: one row per method, in the order help texts list them (the built-in
// rows first, then those registered; a deque, so rows never move).
const std::deque<MethodDescriptor>& method_registry();
// Adds a method (id Method::External). InputError if its name is taken, it has no
// check or describe, or an own field is malformed (a taken name, a default outside its
// range, a type other than Integer, Number or String).
const MethodDescriptor& register_method(MethodDescriptor method);
// InputError "unknown method 'x' (pca, svd, ...)" for a name not in the registry.
const MethodDescriptor& method_descriptor(const std::string& name);
const MethodDescriptor& method_descriptor(Method id);
// The registry row of `name`, or null (stored kinds such as "lrf" are not methods).
const MethodDescriptor* find_method(const std::string& name);
// The own field `name` of whichever method declares it, or null.
const MethodField* find_method_field(const std::string& name);
// "pca, svd, tt, ..." for messages.
std::string method_names(const char* separator = ", ");

} // namespace embedlab
