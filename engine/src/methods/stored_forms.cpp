// The stored forms (stored_form.hpp): the built-in forms, each defined and registered
// beside its method (request_<family>.cpp), then those registered. Torch-free.
#include "embedlab/stored_form.hpp"

#include "embedlab/error.hpp"
#include "embedlab/method_registry.hpp"
#include "methods/request_support.hpp"
#include "model/manifest_layout.hpp"

namespace embedlab {

namespace {

std::deque<StoredForm>& forms()
{
    static std::deque<StoredForm> list = [] {
        std::deque<StoredForm> all;
        for (const auto& family : method_rows::builtin_rows())
            all.insert(all.end(), family.forms.begin(), family.forms.end());
        return all;
    }();
    return list;
}

} // namespace

void TableLayout::needs(const std::string& name, TensorShape shape, bool holds_ids)
{
    tensors.emplace_back(prefix + name, std::move(shape));
    if (holds_ids)
        index_tensors.push_back(prefix + name);
}

namespace {

const nlohmann::json& parameters_of(const nlohmann::json& block, const std::string& where)
{
    if (!block.is_object() || !block.contains("parameters"))
        throw InputError(where + ": missing field 'parameters'");
    return block["parameters"];
}

} // namespace

StoredBlock::StoredBlock(const nlohmann::json& block, std::string prefix, std::string where)
    : block_(block), params_(parameters_of(block, where)), prefix_(std::move(prefix)),
      where_(std::move(where))
{
}

const nlohmann::json& StoredBlock::field(const char* name) const
{
    if (!has(name))
        fail("missing field '" + std::string(name) + "'");
    return params_.at(name);
}

int64_t StoredBlock::integer(const char* name) const
{
    return detail::json_integer(field(name), name, where_);
}

std::vector<int64_t> StoredBlock::integers(const char* name) const
{
    return detail::json_integers(field(name), name, where_);
}

bool StoredBlock::lists(const std::string& name) const
{
    return block_.contains("factor_tensors") && block_["factor_tensors"].is_object() &&
           block_["factor_tensors"].contains(prefix_ + name);
}

TensorShape StoredBlock::listed_shape(const std::string& name) const
{
    const std::string full = prefix_ + name;
    return detail::json_integers(block_["factor_tensors"][full], "the shape of '" + full + "'", where_);
}

void StoredBlock::fail(const std::string& problem) const
{
    throw InputError(where_ + ": " + problem);
}

const std::deque<StoredForm>& stored_forms()
{
    return forms();
}

const StoredForm& register_stored_form(StoredForm form)
{
    if (form.name.empty() || find_stored_form(form.name))
        throw InputError("register_stored_form: the name '" + form.name + "' is " +
                         (form.name.empty() ? "empty" : "taken"));
    if (!form.layout)
        throw InputError("register_stored_form: form '" + form.name + "' needs a layout function");
    return forms().emplace_back(std::move(form));
}

const StoredForm* find_stored_form(const std::string& name)
{
    for (const auto& form : forms())
        if (form.name == name)
            return &form;
    return nullptr;
}

const StoredForm& stored_form_of(const std::string& method, const std::string& where)
{
    if (const auto* m = find_method(method)) {
        if (m->part != CompressedPart::TokenEmbedding)
            throw InputError(where + ": unknown method '" + method + "'");
        if (const auto* form = find_stored_form(m->stored_as))
            return *form;
        throw InputError(where + ": stored layout '" + std::string(m->stored_as) +
                         "' is not one EmbedLab reads");
    }
    if (const auto* form = find_stored_form(method); form && form->names_a_method)
        return *form;
    throw InputError(where + ": unknown method '" + method + "'");
}

} // namespace embedlab
