// A table method's stored form: how its table sits in a compressed directory. A form
// reads its parameters from the table's embedlab.json block, checks them, and declares
// the tensors it expects (names under the table's prefix, shapes, which hold ids); the
// loader holds model.safetensors to that list. The rebuild from the tensors is the
// form's torch half (register_stored_rebuild, table_method.hpp); the tensors written
// are the embedding's own (TokenEmbedding::stored_tensors).
//
//   embedlab::register_stored_form({.name = "randproj", .layout = [](const StoredBlock& b, TableLayout& t) {
//       const int64_t r = b.integer("rank");
//       t.parameters = {{"rank", r}};
//       t.needs("randproj.Z", {t.rows, r});
//   }});
//   embedlab::stored_form_of("pca", "model/embedlab.json");   // the registry row's stored_as
//
// A method's registry row names its form (MethodDescriptor::stored_as); a form whose
// names_a_method is set is also a manifest's method on its own (lrf: the low-rank
// factors finetune --from-scratch trains, which no method fits). Each built-in form is
// defined and registered beside its method (engine/src/methods/request_*.cpp,
// EMBEDLAB_BUILTIN_ROWS). Torch-free: the manifest fuzzer reaches every form's checks.
// Thread safety: the built-in forms never change; register_stored_form must finish
// before any other thread reads the list.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace embedlab {

using TensorShape = std::vector<int64_t>;

// One table as its manifest block describes it, checked by its form.
struct TableLayout {
    std::string method; // the manifest's: a registry method, or a form that names a method (lrf)
    std::string stored; // its stored form's name: the tensors' prefix (pca, tt, lle-unk, ...)
    std::string prefix; // the table's: "wte.", "model.embed_tokens.", "wpe."
    int64_t rows = 0, dim = 0;
    // What the form checked and its rebuild reads, in the form's own keys ({"rank": 32}).
    nlohmann::json parameters = nlohmann::json::object();
    std::vector<std::pair<std::string, TensorShape>> tensors; // full name -> shape, in order
    std::vector<std::string> index_tensors; // those holding ids or ranks (integers, never quantised)
    // Tensors stored at a ggml type (compress --store, issue 38): full name -> type
    // ("q8_0"). Their file tensor is uint8 [numel / last, row bytes of last]; the shape
    // above is the float32 tensor they dequantise to. Absent: float32 as listed.
    std::map<std::string, std::string> stored_types;

    // Declares a tensor the table needs: `name` under the prefix ("pca.Z").
    void needs(const std::string& name, TensorShape shape, bool holds_ids = false);
};

// The manifest block a form reads its parameters from. Every reader throws InputError
// naming the file: "<where>: missing field 'rank'", "<where>: rank must be an integer".
class StoredBlock {
public:
    StoredBlock(const nlohmann::json& block, std::string prefix, std::string where);
    const nlohmann::json& params() const { return params_; } // the block's "parameters"
    bool has(const char* name) const { return params_.is_object() && params_.contains(name); }
    const nlohmann::json& field(const char* name) const;
    int64_t integer(const char* name) const;
    std::vector<int64_t> integers(const char* name) const;
    // Whether the block's factor_tensors lists `name` (under the prefix), and its shape
    // there: the form's choice among layouts written by earlier versions.
    bool lists(const std::string& name) const;
    TensorShape listed_shape(const std::string& name) const;
    const std::string& prefix() const { return prefix_; }
    const std::string& where() const { return where_; }
    [[noreturn]] void fail(const std::string& problem) const; // InputError("<where>: <problem>")

private:
    const nlohmann::json& block_;
    const nlohmann::json& params_;
    std::string prefix_, where_;
};

struct StoredForm {
    std::string name; // as a registry row's stored_as names it
    // A manifest may name it as its method (lrf), not only a registry row's stored_as.
    bool names_a_method = false;
    // The bytes a value of its tensors takes as written where no stored type (--store)
    // applies: 4 for float32 factors, 1 for quant's ggml blocks (uint8).
    double value_bytes = 4;
    // Reads and checks the block's parameters for a table of t.rows x t.dim, sets
    // t.parameters and declares t's tensors with t.needs.
    std::function<void(const StoredBlock& block, TableLayout& t)> layout;
};

// The forms, the built-in ones first, then those registered (a deque: rows never move).
const std::deque<StoredForm>& stored_forms();
// InputError if the name is empty or taken, or the form has no layout.
const StoredForm& register_stored_form(StoredForm form);
const StoredForm* find_stored_form(const std::string& name); // null when there is none
// The form a manifest's `method` is stored in: its registry row's stored_as, or a form
// that names a method. InputError "<where>: unknown method 'x'" for any other name.
const StoredForm& stored_form_of(const std::string& method, const std::string& where);

} // namespace embedlab
